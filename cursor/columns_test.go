package cursor

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
)

func be8(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// TestColumnBuilders feeds several batches (with and without NULLs,
// variable-width data outgrowing its first buffer) through the
// accumulators and checks every array, its validity and that all memory
// goes back to the allocator.
func TestColumnBuilders(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := newRecycler(mem)
	const size = 5
	cols := []column{
		{kind: kInt8, field: arrow.Field{Type: arrow.PrimitiveTypes.Int64}},
		{kind: kBool, field: arrow.Field{Type: arrow.FixedWidthTypes.Boolean}},
		{kind: kString, field: arrow.Field{Type: arrow.BinaryTypes.String}},
		{kind: kJSONB, field: arrow.Field{Type: arrow.BinaryTypes.String}},
		{kind: kTimestamptz, field: arrow.Field{Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}}},
	}
	bs := make([]colBuilder, len(cols))
	for i := range cols {
		bs[i] = newColBuilder(&cols[i], rec, mem, size)
	}
	big := make([]byte, 3000) // 5 of them outgrow the first 4 KiB data buffer
	for i := range big {
		big[i] = 'a' + byte(i%26)
	}
	var held []arrow.RecordBatch
	schema := arrow.NewSchema([]arrow.Field{{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true}, {Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "j", Type: arrow.BinaryTypes.String, Nullable: true}, {Name: "t", Type: cols[4].field.Type, Nullable: true}}, nil)
	for batch := range 4 {
		for _, b := range bs {
			b.start(size)
		}
		n := size
		if batch == 3 {
			n = 2 // a short last batch
		}
		for r := range n {
			row := batch*size + r
			null := batch%2 == 1 && r%2 == 0 // NULLs in odd batches only
			vals := [][]byte{be8(int64(row)), {byte(row % 2)}, big[:row*100%3000], append([]byte{1}, `{"r":1}`...), be8(int64(row))}
			for i, b := range bs {
				v := vals[i]
				if null {
					v = nil
				}
				require.NoError(t, b.decode(v))
			}
		}
		arrs := make([]arrow.Array, len(bs))
		for i, b := range bs {
			arrs[i] = b.build()
		}
		rb := array.NewRecordBatch(schema, arrs, int64(n))
		for _, a := range arrs {
			a.Release()
		}
		for i := range arrs {
			require.NoError(t, array.ValidateFull(rb.Column(i)))
		}
		for r := range n {
			row := batch*size + r
			if batch%2 == 1 && r%2 == 0 {
				for i := range arrs {
					require.True(t, rb.Column(i).IsNull(r))
				}
				continue
			}
			require.EqualValues(t, row, rb.Column(0).(*array.Int64).Value(r))
			require.Equal(t, row%2 == 1, rb.Column(1).(*array.Boolean).Value(r))
			require.Equal(t, string(big[:row*100%3000]), rb.Column(2).(*array.String).Value(r))
			require.Equal(t, `{"r":1}`, rb.Column(3).(*array.String).Value(r))
			require.EqualValues(t, row+pgEpochMicros, rb.Column(4).(*array.Timestamp).Value(r))
		}
		if batch == 0 {
			held = append(held, rb) // released after the stream ends
		} else {
			rb.Release()
		}
	}
	require.Error(t, bs[3].decode([]byte{2, '{', '}'}), "jsonb version")
	for _, b := range bs {
		b.start(size) // an empty batch at the end holds buffers until release
	}
	for _, b := range bs {
		b.release()
	}
	rec.close()
	for _, rb := range held {
		rb.Release()
	}
}

// TestRecycler: released buffers are reused, within a bound, and returned
// to the wrapped allocator on close or when released afterwards.
func TestRecycler(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	r := newRecycler(mem)
	r.batchBytes(1000) // keeps up to 2000 bytes
	a := r.Allocate(1000)
	p := &a[0]
	r.Free(a[:10]) // a prefix frees the whole allocation
	require.Equal(t, 1000, mem.CurrentAlloc(), "kept")
	b := r.Allocate(900)
	require.Same(t, p, &b[0], "reused")
	require.Len(t, b, 900)
	c := r.Allocate(100) // too small to reuse b's later: new
	r.Free(b)
	r.Free(c)
	require.Equal(t, 1100, mem.CurrentAlloc())
	d := r.Allocate(1200)
	require.Equal(t, 2300, mem.CurrentAlloc(), "nothing kept fits")
	r.Free(d) // evicts the oldest kept (b)
	require.Equal(t, 1300, mem.CurrentAlloc())
	e := r.Allocate(500)
	r.close()
	require.Equal(t, 500, mem.CurrentAlloc())
	r.Free(e)
	e2 := r.Reallocate(10, nil)
	r.Free(e2)
}

// TestNumeric128 checks the 128-bit numeric arithmetic, and decodeNumeric
// with its 64-bit fast path, against big.Int on random digits, weights and
// scales, strict and rounding half-even.
func TestNumeric128(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	checked, rounded := 0, 0
	for range 200000 {
		ndigits := 1 + rng.IntN(11)
		digits := make([]byte, 2*ndigits)
		for i := range ndigits {
			d := rng.IntN(10000)
			if rng.IntN(3) == 0 {
				d = []int{0, 1, 9999, 5000, 500, 50, 5}[rng.IntN(7)]
			}
			binary.BigEndian.PutUint16(digits[2*i:], uint16(d))
		}
		weight := rng.IntN(16) - 8
		prec := int32(1 + rng.IntN(38))
		scale := int32(rng.IntN(int(prec) + 1))
		exp := 4*(weight-ndigits+1) + int(scale)
		neg := rng.IntN(2) == 0
		strict := rng.IntN(2) == 0
		want, wantRounded, wantErr := numericBig(digits, ndigits, exp, prec, scale, neg, strict)

		// decodeNumeric on the binary value (fast path included).
		v := make([]byte, 8, 8+len(digits))
		binary.BigEndian.PutUint16(v, uint16(ndigits))
		binary.BigEndian.PutUint16(v[2:], uint16(int16(weight)))
		if neg {
			binary.BigEndian.PutUint16(v[4:], 0x4000)
		}
		v = append(v, digits...)
		got, gotRounded, gotErr := decodeNumeric(v, prec, scale, strict)
		require.Equal(t, wantErr, gotErr)
		require.Equal(t, want, got)
		require.Equal(t, wantRounded, gotRounded)

		got, ok, gotRounded, gotErr := numeric128(digits, ndigits, exp, prec, scale, neg, strict)
		if !ok {
			continue
		}
		checked++
		if gotRounded {
			rounded++
		}
		require.Equal(t, wantErr, gotErr)
		require.Equal(t, want, got)
		require.Equal(t, wantRounded, gotRounded)
	}
	require.Greater(t, checked, 150000)
	require.Greater(t, rounded, 10000)
}

// BenchmarkDecodeRow decodes the BenchmarkStream row shape (no database):
// the client-side cost per row on top of reading the socket.
func BenchmarkDecodeRow(b *testing.B) {
	rec := newRecycler(memory.DefaultAllocator)
	rec.batchBytes(4 << 20)
	const size = defaultBatchSize
	cols := []column{
		{kind: kInt8, field: arrow.Field{Type: arrow.PrimitiveTypes.Int64}},
		{kind: kString, field: arrow.Field{Type: arrow.BinaryTypes.String}},
		{kind: kNumeric, numericFit: numericFit{prec: 12, scale: 2}, field: arrow.Field{Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}}},
		{kind: kTimestamptz, field: arrow.Field{Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}}},
		{kind: kBool, field: arrow.Field{Type: arrow.FixedWidthTypes.Boolean}},
		{kind: kJSONB, field: arrow.Field{Type: arrow.BinaryTypes.String}},
		{kind: kString, field: arrow.Field{Type: arrow.BinaryTypes.String}},
	}
	bs := make([]colBuilder, len(cols))
	for i := range cols {
		bs[i] = newColBuilder(&cols[i], rec, memory.DefaultAllocator, size)
	}
	// 1234.56 as numeric: ndigits 2, weight 0, sign +, dscale 2, digits 1234 5600.
	num := []byte{0, 2, 0, 0, 0, 0, 0, 2, 0x04, 0xd2, 0x15, 0xe0}
	row := [][]byte{be8(123456), []byte("name-123456"), num, be8(789), {1},
		append([]byte{1}, `{"k": 123456, "v": 3, "tag": "abcdefghij", "note": "xyzxyzxyz"}`...), []byte("green")}
	b.ResetTimer()
	n := 0
	for b.Loop() {
		if n == 0 {
			for _, c := range bs {
				c.start(size)
			}
		}
		for i, c := range bs {
			if err := c.decode(row[i]); err != nil {
				b.Fatal(err)
			}
		}
		if n++; n == size {
			for _, c := range bs {
				c.build().Release()
			}
			n = 0
		}
	}
}

// BenchmarkDecodeNumeric decodes an unconstrained numeric at scale 18: an
// avg()-like value with 20 fractional digits (rounded) and one with 18
// (exact), to compare the cost of rounding.
func BenchmarkDecodeNumeric(b *testing.B) {
	// 0.04997333333333333333: weight -1, digits 0499 7333 3333 3333 3333
	rounded := []byte{0, 5, 0xff, 0xff, 0, 0, 0, 20, 0x01, 0xf3, 0x1c, 0xa5, 0x0d, 0x05, 0x0d, 0x05, 0x0d, 0x05}
	// 0.049973333333333333: the same, 18 digits (last group 3300)
	exact := []byte{0, 5, 0xff, 0xff, 0, 0, 0, 18, 0x01, 0xf3, 0x1c, 0xa5, 0x0d, 0x05, 0x0d, 0x05, 0x0c, 0xe4}
	for name, v := range map[string][]byte{"rounded": rounded, "exact": exact} {
		b.Run(name, func(b *testing.B) {
			n, r, err := decodeNumeric(v, 38, 18, false)
			if s := n.ToString(18); err != nil || r != (name == "rounded") || s != "0.049973333333333333" {
				b.Fatal(s, r, err)
			}
			for b.Loop() {
				if _, _, err := decodeNumeric(v, 38, 18, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestEmptyStringsHaveValueBytes: a text batch whose values are all empty
// strings has a non-nil value buffer, which Parquet writers need to count
// "" in their statistics (a nil value is "no value" to arrow-go's).
func TestEmptyStringsHaveValueBytes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := newRecycler(mem)
	defer rec.close()
	col := column{kind: kString, field: arrow.Field{Type: arrow.BinaryTypes.String}}
	b := newColBuilder(&col, rec, mem, 4)
	defer b.release()
	b.start(4)
	require.NoError(t, b.decode([]byte{}))
	require.NoError(t, b.decode(nil)) // NULL
	require.NoError(t, b.decode([]byte{}))
	a := b.build()
	defer a.Release()
	require.NoError(t, array.ValidateFull(a))
	s := a.(*array.String)
	require.Equal(t, "", s.Value(0))
	require.True(t, s.IsNull(1))
	require.NotNil(t, s.ValueBytes())
	require.NotNil(t, s.Data().Buffers()[2].Bytes())
}
