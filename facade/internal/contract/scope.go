package contract

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/vocab"
)

// doneBatch reports the rows a scoped replace preserved.
type doneBatch struct {
	arrow.RecordBatch
	preserved *int64
}

func (b doneBatch) MergeDone(n int64) { *b.preserved = n }

// rowsAt is row i of Batches(.., distinct) for each i, one batch each.
func rowsAt(e *Env, distinct int, is ...int) []arrow.RecordBatch {
	var out []arrow.RecordBatch
	for _, i := range is {
		out = append(out, Batches(e.Mem, Schema(), i, 1, 1, distinct)...)
	}
	return out
}

// keys is a Scope over id, or over id and name when names is set ("" is
// NULL).
func keys(e *Env, ids []int64, names []string) *facade.Scope {
	ib := array.NewInt64Builder(e.Mem)
	ib.AppendValues(ids, nil)
	cols := []arrow.Array{ib.NewArray()}
	ib.Release()
	sc, fields := &facade.Scope{Columns: []string{"id"}}, []arrow.Field{Schema().Field(0)}
	if names != nil {
		nb := array.NewStringBuilder(e.Mem)
		for _, n := range names {
			if n == "" {
				nb.AppendNull()
			} else {
				nb.Append(n)
			}
		}
		cols = append(cols, nb.NewArray())
		nb.Release()
		sc.Columns, fields = append(sc.Columns, "name"), append(fields, Schema().Field(1))
	}
	sc.Keys = array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(len(ids)))
	release2(cols)
	return sc
}

func release2(as []arrow.Array) {
	for _, a := range as {
		a.Release()
	}
}

// scoped runs a scoped replace; it returns the result and the rows
// preserved.
func scoped(t *testing.T, e *Env, txn string, sc *facade.Scope, bs []arrow.RecordBatch) (facade.CommitResult, int64, error) {
	t.Helper()
	defer sc.Keys.Release()
	preserved := int64(-1)
	res, err := e.LH.Write(context.Background(), target, facade.WriteRequest{Mode: facade.Replace, Schema: Schema(), Scope: sc, TxnID: txn,
		Rows: func(yield func(arrow.RecordBatch, error) bool) {
			for _, b := range bs {
				if !yield(doneBatch{b, &preserved}, nil) {
					return
				}
			}
		}})
	return res, preserved, err
}

// A scoped replace replaces the rows of its keys only: identical rows are
// matched as a multiset and kept with their identity, the others deleted
// or written as new rows; every row outside the scope keeps its identity;
// the result carries the whole table's rows and checksum.
func testScopedReplace(t *testing.T, e *Env) {
	ctx := context.Background()
	bs := Batches(e.Mem, Schema(), 0, 60, 16, 20) // ids 0..19, each 3 identical rows
	defer release(bs)
	next := write(t, e, facade.Replace, bs, "t1").Rows
	before := rows(t, e, 0, true)

	// 1: all three kept; 2: one kept; 3: gone; 25: new.
	in := rowsAt(e, 20, 1, 21, 41, 2)
	in = append(in, rowsAt(e, 100, 25)...)
	defer release(in)
	res, preserved, err := scoped(t, e, "s1", keys(e, []int64{1, 2, 3, 25}, nil), in)
	require.NoError(t, err)
	require.EqualValues(t, 4, preserved)
	var want []arrow.RecordBatch
	for i := range 60 {
		if k := i % 20; k < 1 || k > 3 {
			want = append(want, rowsAt(e, 20, i)...)
		}
	}
	want = append(want, rowsAt(e, 100, 25)...)
	want = append(want, rowsAt(e, 20, 1, 1, 1, 2)...)
	defer release(want)
	sum := checksum(t, want)
	require.Equal(t, sum, res.Checksum)
	require.Equal(t, sum.Rows, res.Rows)
	require.Equal(t, sum.String(), res.Summary[vocab.SummaryChecksum])
	got, err := e.LH.Checksum(ctx, target.DatasetID, 0)
	require.NoError(t, err)
	require.Equal(t, sum, got)
	after := map[string]bool{}
	for _, r := range rows(t, e, 0, true) {
		after[r] = true
	}
	kept := 0
	for _, r := range before {
		if id := r[strings.Index(r, "|id=")+4:]; !strings.HasPrefix(id, "1,") && !strings.HasPrefix(id, "2,") && !strings.HasPrefix(id, "3,") {
			require.True(t, after[r], "a row outside the scope keeps its identity: %s", r)
		} else if after[r] {
			kept++
		}
		delete(after, r)
	}
	require.Equal(t, 4, kept, "the preserved rows keep their identity")
	for r := range after {
		idx, err := strconv.ParseInt(r[:strings.Index(r, "|")], 10, 64)
		require.NoError(t, err)
		require.GreaterOrEqual(t, idx, next, "a new row continues __row_index")
	}

	// Two columns with a NULL: (10, NULL) keeps one of its three rows,
	// (5, name-5) loses its three.
	row10 := rowsAt(e, 20, 10)
	defer release(row10)
	_, preserved, err = scoped(t, e, "s2", keys(e, []int64{10, 5}, []string{"", "name-5"}), row10)
	require.NoError(t, err)
	require.EqualValues(t, 1, preserved)
	got, err = e.LH.Checksum(ctx, target.DatasetID, 0)
	require.NoError(t, err)
	require.Equal(t, sum.Rows-2-3, got.Rows)

	// A row outside the scope: refused, nothing visible.
	_, _, err = scoped(t, e, "s3", keys(e, []int64{10}, nil), append(row10[:1:1], in[4]))
	require.ErrorIs(t, err, facade.ErrInvalidRequest)
	_, found, err := e.LH.FindTxn(ctx, target.DatasetID, "s3")
	require.NoError(t, err)
	require.False(t, found)
	now, err := e.LH.Checksum(ctx, target.DatasetID, 0)
	require.NoError(t, err)
	require.Equal(t, got, now)

	// No keys: a snapshot that changes nothing.
	res, _, err = scoped(t, e, "s4", keys(e, nil, nil), nil)
	require.NoError(t, err)
	require.Equal(t, got, res.Checksum)
	_, found, err = e.LH.FindTxn(ctx, target.DatasetID, "s4")
	require.NoError(t, err)
	require.True(t, found)

	// A write landing between the scoped replace's read and its commit.
	sc := keys(e, []int64{0}, nil)
	defer sc.Keys.Release()
	st, err := e.LH.Stage(ctx, target, facade.WriteRequest{Mode: facade.Replace, Schema: Schema(), Scope: sc, Rows: Seq(nil)})
	require.NoError(t, err)
	extra := rowsAt(e, 100, 77)
	defer release(extra)
	write(t, e, facade.Append, extra, "t9")
	_, err = st.Commit(ctx)
	require.ErrorIs(t, err, facade.ErrCommitConflict)
}
