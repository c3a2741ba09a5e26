package identity

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
)

// hashBytesRef is the row hash's byte folding written plainly: the length,
// 8-byte little-endian words, then the remaining bytes as one word.
func hashBytesRef(seed uint64, b []byte) uint64 {
	h := mix(seed, uint64(len(b))^k3)
	for len(b) >= 8 {
		h = mix(h, binary.LittleEndian.Uint64(b))
		b = b[8:]
	}
	var tail uint64
	for i, c := range b {
		tail |= uint64(c) << (8 * i)
	}
	return mix(h, tail)
}

// TestHashBytesReference: hashBytes equals the plain definition for every
// length up to 80 and at every alignment (row ids depend on it).
func TestHashBytesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 100)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	for off := range 8 {
		for n := 0; n <= 80; n++ {
			b := buf[off : off+n]
			require.Equal(t, hashBytesRef(tagString, b), hashBytes(tagString, b), "off %d len %d", off, n)
		}
	}
}

// TestValueHashesSlicedStrings: value hashes of a sliced string or binary
// array equal those of the same values unsliced.
func TestValueHashesSlicedStrings(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	vals := []string{"alpha", "", "a much longer value than eight bytes", "x", "0123456789abcdef", "tail-7b"}
	for _, dt := range []arrow.DataType{arrow.BinaryTypes.String, arrow.BinaryTypes.Binary} {
		b := array.NewBuilder(mem, dt)
		for _, v := range vals {
			switch bb := b.(type) {
			case *array.StringBuilder:
				bb.Append(v)
			case *array.BinaryBuilder:
				bb.AppendString(v)
			}
		}
		arr := b.NewArray()
		b.Release()
		f := arrow.Field{Name: "c", Type: dt}
		all := make([]uint64, len(vals))
		require.NoError(t, ValueHashes(f, arr, all))
		tag := tagString
		if dt.ID() == arrow.BINARY {
			tag = tagBinary
		}
		for i, v := range vals {
			require.Equal(t, hashBytesRef(tag, []byte(v)), all[i])
		}
		sl := array.NewSlice(arr, 2, 5)
		part := make([]uint64, 3)
		require.NoError(t, ValueHashes(f, sl, part))
		require.Equal(t, all[2:5], part)
		sl.Release()
		arr.Release()
	}
}

// TestFoldColumnMatchesValueHashes: the one-pass fold of each supported
// type (sliced, without nulls) gives the row hashes of ValueHashes followed
// by the fold.
func TestFoldColumnMatchesValueHashes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32},
		{Name: "i16", Type: arrow.PrimitiveTypes.Int16},
		{Name: "d", Type: arrow.FixedWidthTypes.Date32},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "t", Type: arrow.FixedWidthTypes.Time64us},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "dec", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}},
		{Name: "s", Type: arrow.BinaryTypes.String},
		{Name: "bin", Type: arrow.BinaryTypes.Binary},
	}, nil)
	rb := array.NewRecordBuilder(mem, sc)
	defer rb.Release()
	r := rand.New(rand.NewPCG(3, 4))
	const n = 300
	for i := range n {
		rb.Field(0).(*array.Int64Builder).Append(r.Int64() - r.Int64())
		rb.Field(1).(*array.Int32Builder).Append(int32(r.Uint32()))
		rb.Field(2).(*array.Int16Builder).Append(int16(r.Uint32()))
		rb.Field(3).(*array.Date32Builder).Append(arrow.Date32(r.Int32N(40000) - 20000))
		rb.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(r.Int64() - r.Int64()))
		rb.Field(5).(*array.Time64Builder).Append(arrow.Time64(r.Int64N(86_400_000_000)))
		rb.Field(6).(*array.Float64Builder).Append([]float64{0, math.Copysign(0, -1), r.NormFloat64(), math.NaN()}[i%4])
		rb.Field(7).(*array.BooleanBuilder).Append(r.IntN(2) == 0)
		rb.Field(8).(*array.Decimal128Builder).Append(decimal128.FromI64(r.Int64N(1e12) - 5e11))
		s := make([]byte, r.IntN(40))
		for j := range s {
			s[j] = byte(r.Uint32())
		}
		rb.Field(9).(*array.StringBuilder).Append(string(s))
		rb.Field(10).(*array.BinaryBuilder).Append(s)
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	for _, sl := range [][2]int64{{0, n}, {17, 250}} {
		part := rec.NewSlice(sl[0], sl[1])
		m := int(part.NumRows())
		for i, f := range sc.Fields() {
			want := make([]uint64, m)
			got := make([]uint64, m)
			for j := range m {
				want[j] = uint64(j) * 0x9e3779b97f4a7c15
				got[j] = want[j]
			}
			vals := make([]uint64, m)
			require.NoError(t, ValueHashes(f, part.Column(i), vals))
			for j := range want {
				want[j] = mix(want[j]^77, vals[j])
			}
			require.True(t, foldColumn(f, 77, part.Column(i), got), f.Name)
			require.Equal(t, want, got, f.Name)
		}
		part.Release()
	}
}
