package facade

import (
	"context"
	"errors"
	"iter"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
)

// checkedMergeRows yields rows (id, name) of ids as keyed batches of 100
// rows from mem, then fail (when not nil) as the stream's error.
func checkedMergeRows(mem memory.Allocator, ids []int64, fail error) iter.Seq2[arrow.RecordBatch, error] {
	var preserved int64
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	return func(yield func(arrow.RecordBatch, error) bool) {
		for from := 0; from < len(ids); from += 100 {
			b := array.NewRecordBuilder(mem, sc)
			for _, id := range ids[from:min(from+100, len(ids))] {
				b.Field(0).(*array.Int64Builder).Append(id)
				b.Field(1).(*array.StringBuilder).Append("n")
			}
			rec := b.NewRecordBatch()
			b.Release()
			more := yield(keyedBatch{RecordBatch: rec, preserved: &preserved}, nil)
			rec.Release()
			if !more {
				return
			}
		}
		if fail != nil {
			yield(nil, fail)
		}
	}
}

// A merge reads its rows ahead while it probes the target: the rows read
// ahead are merged in order, and whatever ends the merge early (the probe
// refusing the target, the stream failing after the rows read ahead)
// releases every batch read ahead.
func TestMergeReadAhead(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t)
	f := env.f
	ctx := context.Background()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	write := func(ds string, mode WriteMode, ids []int64, fail error) (CommitResult, error) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		return f.Write(ctx, Target{DatasetID: ds}, WriteRequest{Mode: mode, Schema: sc, Rows: checkedMergeRows(mem, ids, fail)})
	}
	_, err := write("ahead", Replace, idRange(0, 2000), nil)
	require.NoError(t, err)
	res, err := write("ahead", Replace, idRange(500, 2500), nil)
	require.NoError(t, err)
	require.Equal(t, int64(2000), res.Rows)
	require.Len(t, liveIdentity(t, f, "ahead"), 2000)

	boom := errors.New("source failed")
	_, err = write("ahead", Replace, idRange(0, 1500), boom)
	require.ErrorIs(t, err, boom)
	require.Len(t, liveIdentity(t, f, "ahead"), 2000, "a failed merge changes nothing")

	// A target holding a key twice: the probe refuses it and the rows
	// replace the table whole (new identities); the next merge keeps them.
	_, err = write("twice", Replace, idRange(0, 300), nil)
	require.NoError(t, err)
	_, err = write("twice", Append, []int64{7}, nil)
	require.NoError(t, err)
	_, err = write("twice", Replace, idRange(0, 300), nil)
	require.NoError(t, err)
	replaced := liveIdentity(t, f, "twice")
	require.Len(t, replaced, 300, "the key held twice is gone")
	_, err = write("twice", Replace, idRange(0, 300), nil)
	require.NoError(t, err)
	require.Equal(t, replaced, liveIdentity(t, f, "twice"), "a merge again: every row kept in place")
}
