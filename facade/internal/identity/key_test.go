package identity

import (
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
)

// keyOf is the encoding and the key hash of the one-column key at row i.
func keyOf(t *testing.T, f arrow.Field, a arrow.Array, i int) (string, uint64) {
	t.Helper()
	b, err := AppendKey(nil, []arrow.Field{f}, []arrow.Array{a}, i)
	require.NoError(t, err)
	s := array.NewSlice(a, int64(i), int64(i+1))
	defer s.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{f}, nil), []arrow.Array{s}, 1)
	defer rec.Release()
	h, err := RowHashes(rec, nil)
	require.NoError(t, err)
	return string(b), h[0]
}

// AppendKey: two key values encode the same exactly when they are one
// value to the row hash (integers across widths, a UUID as text or bytes,
// every NaN), and then their key hashes are equal too; values the row
// hash tells apart (-0 and +0, NULL and the empty text, arrays of other
// lengths) encode apart.
func TestAppendKeyEqualExactlyWhenValuesAre(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the arrays' releases
	uuidMeta := arrow.NewMetadata([]string{metaPGType}, []string{"uuid"})
	const u = "0e5b3bcd-3f3c-4a8e-9a55-4c1d2f0b7a11"
	ub := []byte{0x0e, 0x5b, 0x3b, 0xcd, 0x3f, 0x3c, 0x4a, 0x8e, 0x9a, 0x55, 0x4c, 0x1d, 0x2f, 0x0b, 0x7a, 0x11}

	type val struct {
		f arrow.Field
		a arrow.Array
		i int
	}
	build := func(dt arrow.DataType, meta arrow.Metadata, fill func(b array.Builder)) []val {
		b := array.NewBuilder(mem, dt)
		defer b.Release()
		fill(b)
		a := b.NewArray()
		t.Cleanup(a.Release)
		f := arrow.Field{Name: "k", Type: dt, Nullable: true, Metadata: meta}
		out := make([]val, a.Len())
		for i := range out {
			out[i] = val{f, a, i}
		}
		return out
	}
	i64 := build(arrow.PrimitiveTypes.Int64, arrow.Metadata{}, func(b array.Builder) {
		b.(*array.Int64Builder).AppendValues([]int64{7, 0, -1}, nil)
		b.AppendNull()
	})
	i32 := build(arrow.PrimitiveTypes.Int32, arrow.Metadata{}, func(b array.Builder) {
		b.(*array.Int32Builder).AppendValues([]int32{7, 0}, nil)
	})
	f64 := build(arrow.PrimitiveTypes.Float64, arrow.Metadata{}, func(b array.Builder) {
		b.(*array.Float64Builder).AppendValues([]float64{0, negZero, math.NaN(), math.Float64frombits(0xfff8000000000001)}, nil)
	})
	str := build(arrow.BinaryTypes.String, arrow.Metadata{}, func(b array.Builder) {
		b.(*array.StringBuilder).AppendValues([]string{"", "a", "NULL"}, nil)
		b.AppendNull()
	})
	uStr := build(arrow.BinaryTypes.String, uuidMeta, func(b array.Builder) {
		b.(*array.StringBuilder).AppendValues([]string{u}, nil)
	})
	uFix := build(&arrow.FixedSizeBinaryType{ByteWidth: 16}, uuidMeta, func(b array.Builder) {
		b.(*array.FixedSizeBinaryBuilder).Append(ub)
	})
	lists := build(arrow.ListOf(arrow.PrimitiveTypes.Int64), arrow.Metadata{}, func(b array.Builder) {
		lb := b.(*array.ListBuilder)
		vb := lb.ValueBuilder().(*array.Int64Builder)
		lb.Append(true) // []
		lb.Append(true) // [NULL]
		vb.AppendNull()
		lb.Append(true) // [1, 2]
		vb.AppendValues([]int64{1, 2}, nil)
		lb.Append(true) // [12]
		vb.Append(12)
		lb.AppendNull()
	})
	type pair struct {
		a, b  val
		equal bool
	}
	pairs := []pair{
		{i64[0], i32[0], true}, {i64[1], i32[1], true}, {i64[0], i64[2], false}, {i64[1], i64[3], false},
		{f64[0], f64[1], false}, {f64[2], f64[3], true}, {f64[0], i64[1], false},
		{str[0], str[3], false}, {str[2], str[3], false}, {str[0], str[1], false}, {i64[3], str[3], true},
		{uStr[0], uFix[0], true},
		{lists[0], lists[4], false}, {lists[0], lists[1], false}, {lists[2], lists[3], false},
	}
	for n, p := range pairs {
		ka, ha := keyOf(t, p.a.f, p.a.a, p.a.i)
		kb, hb := keyOf(t, p.b.f, p.b.a, p.b.i)
		require.Equal(t, p.equal, ka == kb, "pair %d: encodings", n)
		if p.equal {
			require.Equal(t, ha, hb, "pair %d: equal keys hash the same", n)
		} else {
			require.NotEqual(t, ha, hb, "pair %d: hashes", n)
		}
	}
	// A tuple's encoding is its values' one after the other, and no split
	// of it reads as another tuple: ("a", "") and ("", "a") differ.
	c1 := build(arrow.BinaryTypes.String, arrow.Metadata{}, func(b array.Builder) { b.(*array.StringBuilder).AppendValues([]string{"a", ""}, nil) })
	c2 := build(arrow.BinaryTypes.String, arrow.Metadata{}, func(b array.Builder) { b.(*array.StringBuilder).AppendValues([]string{"", "a"}, nil) })
	fs, cols := []arrow.Field{c1[0].f, c2[0].f}, []arrow.Array{c1[0].a, c2[0].a}
	k1, err := AppendKey(nil, fs, cols, 0)
	require.NoError(t, err)
	k2, err := AppendKey(nil, fs, cols, 1)
	require.NoError(t, err)
	require.NotEqual(t, string(k1), string(k2))
	// Unsupported types are typed errors.
	dur := build(arrow.FixedWidthTypes.Duration_us, arrow.Metadata{}, func(b array.Builder) { b.(*array.DurationBuilder).Append(1) })
	_, err = AppendKey(nil, []arrow.Field{dur[0].f}, []arrow.Array{dur[0].a}, 0)
	var ute *UnsupportedTypeError
	require.ErrorAs(t, err, &ute)
	require.True(t, IsIntArray(i32[0].a))
	require.False(t, IsIntArray(f64[0].a))
}
