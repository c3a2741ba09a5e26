package identity

import (
	"math"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
)

var negZero = math.Copysign(0, -1)

// pairCase is two values of one column type: rows 0 and 1 of the column
// build appends.
type pairCase struct {
	name  string
	typ   arrow.DataType
	meta  arrow.Metadata
	build func(b array.Builder)
	// same: the sinks hold the two as one value (the row hashes are equal)
	same bool
	// idsDiffer: the row-id hashes differ too (every pair the row hash
	// distinguishes but one involving a float -0)
	idsDiffer bool
}

func floats(vs ...float64) func(array.Builder) {
	return func(b array.Builder) {
		for _, v := range vs {
			b.(*array.Float64Builder).Append(v)
		}
	}
}

func float32s(vs ...float32) func(array.Builder) {
	return func(b array.Builder) {
		for _, v := range vs {
			b.(*array.Float32Builder).Append(v)
		}
	}
}

// floatLists appends one list per vs (nil: a NULL list).
func floatLists(vs ...[]float64) func(array.Builder) {
	return func(b array.Builder) {
		lb := b.(*array.ListBuilder)
		for _, l := range vs {
			if l == nil {
				lb.AppendNull()
				continue
			}
			lb.Append(true)
			for _, v := range l {
				if math.IsInf(v, 0) && v > 0 {
					lb.ValueBuilder().AppendNull() // +Inf stands for a NULL element
					continue
				}
				lb.ValueBuilder().(*array.Float64Builder).Append(v)
			}
		}
	}
}

// strs appends the values (nil: NULL).
func strs(vs ...*string) func(array.Builder) {
	return func(b array.Builder) {
		for _, v := range vs {
			if v == nil {
				b.AppendNull()
				continue
			}
			b.(*array.StringBuilder).Append(*v)
		}
	}
}

func ptr(s string) *string { return &s }

func pgMeta(t string) arrow.Metadata { return arrow.NewMetadata([]string{"pg.type"}, []string{t}) }

// TestRowHashDistinguishesWhatSinksDistinguish: for each pair of values
// that Postgres (and the row store, which keeps the text form of floats and
// json) holds apart, the row hashes differ, so a merge rewrites a row that
// changed from one to the other and a checksum tells them apart; the
// values the sinks hold as one (every NaN: Postgres prints each as "NaN")
// hash the same. The row-id hashes (__row_id) keep version 1's -0 == +0.
func TestRowHashDistinguishesWhatSinksDistinguish(t *testing.T) {
	nan2 := math.Float64frombits(0xfff8000000000000) // x86's default NaN (sign bit set)
	nan3 := math.Float64frombits(0x7ff0000000000001) // a signalling NaN
	nan32 := math.Float32frombits(0xffc00000)        // float32 NaN with the sign bit
	cases := []pairCase{
		{name: "float8 -0 vs 0", typ: arrow.PrimitiveTypes.Float64, build: floats(negZero, 0)},
		{name: "float8 -0 vs NULL", typ: arrow.PrimitiveTypes.Float64, idsDiffer: true,
			build: func(b array.Builder) { b.(*array.Float64Builder).Append(negZero); b.AppendNull() }},
		{name: "real -0 vs 0", typ: arrow.PrimitiveTypes.Float32, build: float32s(float32(negZero), 0)},
		{name: "float8 NaN vs NaN", typ: arrow.PrimitiveTypes.Float64, build: floats(math.NaN(), nan2), same: true},
		{name: "float8 NaN vs signalling NaN", typ: arrow.PrimitiveTypes.Float64, build: floats(math.NaN(), nan3), same: true},
		{name: "real NaN vs -NaN", typ: arrow.PrimitiveTypes.Float32, build: float32s(float32(math.NaN()), nan32), same: true},
		{name: "float8 Inf vs -Inf", typ: arrow.PrimitiveTypes.Float64, build: floats(math.Inf(1), math.Inf(-1)), idsDiffer: true},
		{name: "float8[] {-0} vs {0}", typ: arrow.ListOf(arrow.PrimitiveTypes.Float64), build: floatLists([]float64{negZero}, []float64{0})},
		{name: "float8[] {0,-0} vs {-0,0}", typ: arrow.ListOf(arrow.PrimitiveTypes.Float64),
			build: floatLists([]float64{0, negZero}, []float64{negZero, 0})},
		{name: "float8[] {-0,NULL} vs {-0}", typ: arrow.ListOf(arrow.PrimitiveTypes.Float64), idsDiffer: true,
			build: floatLists([]float64{negZero, math.Inf(1)}, []float64{negZero})},
		{name: "float8[] {} vs NULL", typ: arrow.ListOf(arrow.PrimitiveTypes.Float64), idsDiffer: true,
			build: floatLists([]float64{}, nil)},
		{name: "float8[] {NULL} vs {}", typ: arrow.ListOf(arrow.PrimitiveTypes.Float64), idsDiffer: true,
			build: floatLists([]float64{math.Inf(1)}, []float64{})},
		{name: "text 'NULL' vs NULL", typ: arrow.BinaryTypes.String, build: strs(ptr("NULL"), nil), idsDiffer: true},
		{name: "text '' vs NULL", typ: arrow.BinaryTypes.String, build: strs(ptr(""), nil), idsDiffer: true},
		{name: "jsonb null vs NULL", typ: arrow.BinaryTypes.String, meta: pgMeta("jsonb"), build: strs(ptr("null"), nil), idsDiffer: true},
		{name: "json text vs json text", typ: arrow.BinaryTypes.String, meta: pgMeta("json"),
			build: strs(ptr(`{"a":1}`), ptr(`{"a": 1}`)), idsDiffer: true},
		{name: "bigint 0 vs NULL", typ: arrow.PrimitiveTypes.Int64, idsDiffer: true,
			build: func(b array.Builder) { b.(*array.Int64Builder).Append(0); b.AppendNull() }},
		{name: "boolean false vs NULL", typ: arrow.FixedWidthTypes.Boolean, idsDiffer: true,
			build: func(b array.Builder) { b.(*array.BooleanBuilder).Append(false); b.AppendNull() }},
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc := arrow.NewSchema([]arrow.Field{
				{Name: "id", Type: arrow.PrimitiveTypes.Int64},
				{Name: "v", Type: c.typ, Nullable: true, Metadata: c.meta},
			}, nil)
			rb := array.NewRecordBuilder(mem, sc)
			defer rb.Release()
			rb.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 1}, nil)
			c.build(rb.Field(1))
			rec := rb.NewRecordBatch()
			defer rec.Release()

			h, err := RowHashes(rec, nil)
			require.NoError(t, err)
			ids, err := newRowHasher(sc).hash(rec, nil)
			require.NoError(t, err)
			one := func(i int64) Checksum {
				s := rec.NewSlice(i, i+1)
				defer s.Release()
				sum, err := ChecksumBatches(func(yield func(arrow.RecordBatch, error) bool) { yield(s, nil) })
				require.NoError(t, err)
				return sum
			}
			if c.same {
				require.Equal(t, h[0], h[1], "row hashes")
				require.Equal(t, one(0), one(1), "checksums")
			} else {
				require.NotEqual(t, h[0], h[1], "row hashes")
				require.NotEqual(t, one(0), one(1), "checksums")
			}
			require.Equal(t, c.idsDiffer, ids[0] != ids[1], "row-id hashes differ")

			// The stamper's checksum (of the row-id hashes, corrected)
			// equals ChecksumBatches.
			st, err := NewTableStamper(mem, "d", sc, sc, 0, time.Unix(0, 0))
			require.NoError(t, err)
			out, err := st.Stamp(rec)
			require.NoError(t, err)
			out.Release()
			sum, err := ChecksumBatches(func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) })
			require.NoError(t, err)
			require.Equal(t, sum, st.Checksum())
		})
	}
}

// TestRowHashOfRowsWithoutNegZero: a row without a float -0 has the same
// row hash as row-id hash (so checksums of such rows are those of version
// 1), and where a row holds its -0 (which column) matters.
func TestRowHashOfRowsWithoutNegZero(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	rb := array.NewRecordBuilder(mem, sc)
	defer rb.Release()
	// (0,0) (-0,0) (0,-0) (-0,-0) (1.5,NULL)
	rb.Field(0).(*array.Float64Builder).AppendValues([]float64{0, negZero, 0, negZero, 1.5}, nil)
	rb.Field(1).(*array.Float64Builder).AppendValues([]float64{0, 0, negZero, negZero, 0}, []bool{true, true, true, true, false})
	rec := rb.NewRecordBatch()
	defer rec.Release()
	h, err := RowHashes(rec, nil)
	require.NoError(t, err)
	ids, err := newRowHasher(sc).hash(rec, nil)
	require.NoError(t, err)
	require.Equal(t, ids[0], h[0])
	require.Equal(t, ids[4], h[4])
	for i := range 4 {
		require.Equal(t, ids[0], ids[i], "row ids: -0 is +0")
		for j := range i {
			require.NotEqual(t, h[i], h[j], "rows %d and %d", i, j)
		}
	}
	// A slice hashes its rows as the whole batch does (the list offsets
	// and the -0 rows are found relative to the slice).
	s := rec.NewSlice(1, 4)
	defer s.Release()
	hs, err := RowHashes(s, nil)
	require.NoError(t, err)
	require.Equal(t, h[1:4], hs)
}
