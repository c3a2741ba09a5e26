package writestrategy_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental/model"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// scoreSchema declares the test model's output columns.
var scoreSchema = arrow.NewSchema([]arrow.Field{
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "label", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// scorer is the test model over feedSQL's rows (id, v, n): a source row
// whose n%10 is 1 gets no output row, 0 gets two, any other one. calls
// counts the source rows passed to it.
type scorer struct {
	calls atomic.Int64
	// fail, when set, is called with each window's first id and may fail
	// or panic.
	fail func(firstID int64) error
}

func (s *scorer) fn(ctx context.Context, in arrow.RecordBatch) (arrow.RecordBatch, error) {
	s.calls.Add(in.NumRows())
	keys := in.Column(0).(*array.String)
	ids := in.Column(1).(*array.Int64)
	vs := in.Column(2).(*array.String)
	ns := in.Column(3).(*array.Int32)
	if s.fail != nil {
		if err := s.fail(ids.Value(0)); err != nil {
			return nil, err
		}
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, model.OutputSchema(scoreSchema))
	defer b.Release()
	for i := range int(in.NumRows()) {
		n := ns.Value(i)
		reps := 1
		switch n % 10 {
		case 0:
			reps = 2
		case 1:
			reps = 0
		}
		for r := range reps {
			b.Field(0).(*array.StringBuilder).Append(keys.Value(i))
			b.Field(1).(*array.Float64Builder).Append(float64(ids.Value(i)*int64(n)) / 7)
			b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("%s/%d", vs.Value(i), r))
		}
	}
	return b.NewRecordBatch(), ctx.Err()
}

// model is the test model of output out over source src.
func (s *scorer) model(out, src string) writestrategy.Model {
	return writestrategy.Model{Output: out, Source: src, Key: []string{"id"}, Columns: []string{"id", "v", "n"},
		Schema: scoreSchema, Func: s.fn, Window: 700, Concurrency: 3}
}

// wantScoreRows is the number of output rows of the test model over ids
// lo..hi (n = id % 97).
func wantScoreRows(lo, hi int64) int64 {
	var n int64
	for id := lo; id <= hi; id++ {
		switch id % 97 % 10 {
		case 0:
			n += 2
		case 1:
		default:
			n++
		}
	}
	return n
}

// A model's first run scores every source row, in windows, on either
// sink, and both sinks hold the same rows.
func TestModelFullRun(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	ensureOutputs(t, w.pool, "src", "scores_pg", "scores_ice")
	w.loadRows("src", facade.Replace, 1, 5000, 1)
	w.iceberg("scores_ice")
	var want facade.Checksum
	for _, out := range []string{"scores_pg", "scores_ice"} {
		s := &scorer{}
		res := w.mustWrite(s.model(out, "src"))
		require.Equal(t, int64(5000), s.calls.Load(), out)
		require.Equal(t, wantScoreRows(1, 5000), res[0].Rows, out)
		c := w.checksum(out)
		require.Equal(t, wantScoreRows(1, 5000), c.Rows)
		if want.Rows == 0 {
			want = c
		}
		require.Equal(t, want, c, "both sinks hold the same rows")
	}
	var keys int64
	require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT count(DISTINCT data->>'__source_row_key') FROM lakewrite.dataset_rows WHERE dataset_id = 'scores_pg'`).Scan(&keys))
	require.Equal(t, 5000-countN1(1, 5000), keys, "every source row with an output row has its key")
	// Verify re-scores the source: a deterministic model has parity.
	s := &scorer{}
	par, err := w.d.Verify(context.Background(), writestrategy.Request{Strategy: s.model("scores_ice", "src")})
	require.NoError(t, err)
	require.True(t, par[0].OK(), par[0].String())
}

// countN1 counts the ids lo..hi without output row (n%10 == 1).
func countN1(lo, hi int64) int64 {
	var n int64
	for id := lo; id <= hi; id++ {
		if id%97%10 == 1 {
			n++
		}
	}
	return n
}

// A model whose function fails, panics or runs past its deadline in a
// later window fails the write with an error naming the window and its
// keys; nothing is visible and the output keeps its earlier rows.
func TestModelFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	ensureOutputs(t, w.pool, "src", "m_pg", "m_ice")
	w.loadRows("src", facade.Replace, 1, 3000, 1)
	w.iceberg("m_ice")
	boom := errors.New("boom")
	for _, out := range []string{"m_pg", "m_ice"} {
		good := &scorer{}
		w.mustWrite(good.model(out, "src"))
		before := w.checksum(out)
		w.loadRows("src", facade.Replace, 1, 3000, 2)
		for name, f := range map[string]func(int64) error{
			"error": func(id int64) error {
				if id > 1400 {
					return boom
				}
				return nil
			},
			"panic": func(id int64) error {
				if id > 1400 {
					panic("model exploded")
				}
				return nil
			},
		} {
			s := &scorer{fail: f}
			_, err := w.write(s.model(out, "src"))
			var we *model.WindowError
			require.ErrorAs(t, err, &we, name)
			require.Equal(t, 2, we.Window, name) // windows of 700: ids 1401..2100
			require.Equal(t, "[1401]", we.First, name)
			require.Equal(t, "[2100]", we.Last, name)
			if name == "panic" {
				require.ErrorIs(t, err, model.ErrPanic)
			} else {
				require.ErrorIs(t, err, boom)
			}
			require.Equal(t, before, w.checksum(out), "%s on %s: nothing visible", name, out)
			require.Zero(t, w.openIntents(out))
		}
		late := writestrategy.Model{Output: out, Source: "src", Key: []string{"id"}, Columns: []string{"id"}, Schema: scoreSchema,
			Window: 1000, Deadline: 20 * time.Millisecond, Func: func(ctx context.Context, in arrow.RecordBatch) (arrow.RecordBatch, error) {
				<-ctx.Done()
				return nil, nil
			}}
		_, err := w.write(late)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, before, w.checksum(out))
	}
}
