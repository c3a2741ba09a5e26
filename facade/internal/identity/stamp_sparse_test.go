package identity

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
)

// TestStampSparseOrdinals: a write numbers its rows' ordinals in a map of
// the slots it used until it passes sparseRows rows, then in the ordinal
// table; the row ids are the same as with the table from the first row
// (equal rows included, across the switch).
func TestStampSparseOrdinals(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	in := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	out := arrow.NewSchema([]arrow.Field{
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: ColRowIndex, Type: arrow.PrimitiveTypes.Int64},
		{Name: ColRowID, Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	const batch = 5000 // 4 batches cross sparseRows
	require.Less(t, 2*batch, sparseRows)
	require.Greater(t, 4*batch, sparseRows)
	var recs []arrow.RecordBatch
	for b := range 4 {
		bld := array.NewInt64Builder(mem)
		for i := range batch {
			bld.Append(int64((b*batch + i) % 7000)) // equal rows, within and across batches
		}
		col := bld.NewArray()
		bld.Release()
		recs = append(recs, array.NewRecordBatch(in, []arrow.Array{col}, batch))
		col.Release()
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	ids := func(dense bool) []int64 {
		st := NewStamper(mem, "ds", in, out, nil, -1, -1, 0, 0, 0)
		if dense {
			st.counts = make([]uint32, st.slots)
		}
		var got []int64
		for _, r := range recs {
			o, err := st.Stamp(r)
			require.NoError(t, err)
			got = append(got, o.Column(2).(*array.Int64).Int64Values()...)
			o.Release()
		}
		return got
	}
	sparse, dense := ids(false), ids(true)
	require.Equal(t, dense, sparse)
	seen := map[int64]bool{}
	for _, id := range sparse {
		require.False(t, seen[id], "duplicate row id")
		seen[id] = true
	}
}
