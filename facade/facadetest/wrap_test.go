package facadetest_test

import (
	"context"
	"errors"
	"iter"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/facadetest"
	"github.com/lakewrite/lakewrite/facade/internal/contract"
	"github.com/lakewrite/lakewrite/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var errBoom = errors.New("boom")

func target(id string) facade.Target {
	return facade.Target{DatasetID: id, WriterID: "pipeline.output", Workspace: "ws"}
}

// counting records how many rows the wrapped lakehouse read from a stream.
type counting struct {
	facade.Lakehouse
	rows atomic.Int64
}

func (c *counting) Stage(ctx context.Context, t facade.Target, req facade.WriteRequest) (facade.Staged, error) {
	in := req.Rows
	req.Rows = func(yield func(arrow.RecordBatch, error) bool) {
		for b, err := range in {
			if b != nil {
				c.rows.Add(b.NumRows())
			}
			if !yield(b, err) {
				return
			}
		}
	}
	return c.Lakehouse.Stage(ctx, t, req)
}

func (c *counting) Write(ctx context.Context, t facade.Target, req facade.WriteRequest) (facade.CommitResult, error) {
	st, err := c.Stage(ctx, t, req)
	if err != nil {
		return facade.CommitResult{}, err
	}
	return st.Commit(ctx)
}

// double is the in-memory lakehouse on a checked allocator, asserted empty
// when the test ends.
func double(t *testing.T) (*facadetest.Lakehouse, *memory.CheckedAllocator) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	lh := facadetest.New(&facadetest.Config{Allocator: mem})
	t.Cleanup(func() {
		lh.Close()
		mem.AssertSize(t, 0)
	})
	return lh, mem
}

// input is 12 rows in batches of 3, built on mem and released when the test
// ends.
func input(t *testing.T, mem memory.Allocator) []arrow.RecordBatch {
	bs := contract.Batches(mem, contract.Schema(), 0, 12, 3, 12)
	t.Cleanup(func() {
		for _, b := range bs {
			b.Release()
		}
	})
	return bs
}

func request(bs []arrow.RecordBatch, txn string) facade.WriteRequest {
	return facade.WriteRequest{Mode: facade.Replace, Schema: contract.Schema(), Rows: contract.Seq(bs), TxnID: txn}
}

// The wrapper with faults that never match passes the facade contract.
func TestContractWithoutFaults(t *testing.T) {
	contract.Run(t, func(t *testing.T) *contract.Env {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		pols := &contract.Policies{}
		inner := facadetest.New(&facadetest.Config{Allocator: mem, SchemaPolicyFor: pols.For})
		commits, fail := facadetest.FailingCommits()
		faults := []facadetest.Fault{commits}
		for _, p := range []facadetest.Point{facadetest.BeforeStage, facadetest.MidStream, facadetest.BeforeCommit,
			facadetest.AfterCommit, facadetest.BeforeAbort} {
			faults = append(faults, facadetest.Fault{Point: p, Dataset: "not-the-contract-dataset"})
		}
		return &contract.Env{
			LH:          facadetest.Wrap(inner, faults...),
			Mem:         mem,
			Policies:    pols,
			FailCommits: fail,
			Cleanup:     inner.Close,
		}
	})
}

func TestBeforeStage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	inner, mem := double(t)
	lh := facadetest.Wrap(inner, facadetest.Fault{Point: facadetest.BeforeStage, Times: 1, Err: errBoom})
	bs := input(t, mem)
	read := false
	req := request(bs, "t1")
	req.Rows = func(yield func(arrow.RecordBatch, error) bool) {
		read = true
		contract.Seq(bs)(yield)
	}
	_, err := lh.Write(ctx, target("a"), req)
	require.ErrorIs(t, err, errBoom)
	require.False(t, read, "the rows were not read")
	require.Empty(t, inner.Snapshots("a"))
	require.Equal(t, 1, facadetest.Hits(lh, facadetest.BeforeStage))

	res, err := lh.Write(ctx, target("a"), req) // Times: 1
	require.NoError(t, err)
	require.Equal(t, int64(12), res.Rows)
	require.Equal(t, 1, facadetest.Hits(lh, facadetest.BeforeStage))
}

func TestMidStreamFailsAfterRows(t *testing.T) {
	t.Parallel()
	for _, after := range []int64{0, 1, 3, 5, 11, 12} {
		t.Run("", func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			inner, mem := double(t)
			c := &counting{Lakehouse: inner}
			lh := facadetest.Wrap(c, facadetest.Fault{Point: facadetest.MidStream, AfterRows: after, Err: errBoom})
			_, err := lh.Write(ctx, target("a"), request(input(t, mem), "t1"))
			require.ErrorIs(t, err, errBoom)
			require.Equal(t, after, c.rows.Load(), "rows handed over before the fault")
			require.Equal(t, 1, facadetest.Hits(lh, facadetest.MidStream))
			require.Empty(t, inner.Snapshots("a"))
			_, found, err := lh.FindTxn(ctx, "a", "t1")
			require.NoError(t, err)
			require.False(t, found)
		})
	}
}

// A stream shorter than AfterRows never reaches the point.
func TestMidStreamNotReached(t *testing.T) {
	t.Parallel()
	inner, mem := double(t)
	lh := facadetest.Wrap(inner, facadetest.Fault{Point: facadetest.MidStream, AfterRows: 13, Err: errBoom})
	res, err := lh.Write(context.Background(), target("a"), request(input(t, mem), "t1"))
	require.NoError(t, err)
	require.Equal(t, int64(12), res.Rows)
	require.Equal(t, 0, facadetest.Hits(lh, facadetest.MidStream))
}

// A Call that returns nil lets the stream go on: the rows cut at the fault
// arrive whole and in order.
func TestMidStreamCallContinues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	inner, mem := double(t)
	var seen int
	lh := facadetest.Wrap(inner,
		facadetest.Fault{Point: facadetest.MidStream, AfterRows: 4, Do: func(context.Context) error { seen++; return nil }},
		facadetest.Fault{Point: facadetest.MidStream, AfterRows: 8, Do: func(context.Context) error { seen++; return nil }},
	)
	bs := input(t, mem)
	want, err := facade.ChecksumBatches(contract.Seq(bs))
	require.NoError(t, err)
	res, err := lh.Write(ctx, target("a"), request(bs, "t1"))
	require.NoError(t, err)
	require.Equal(t, want, res.Checksum)
	require.Equal(t, 2, seen)
	require.Equal(t, 2, facadetest.Hits(lh, facadetest.MidStream))
	var idx []int64
	for b, err := range lh.Scan(ctx, "a", facade.ScanOptions{Columns: []string{"id"}}) {
		require.NoError(t, err)
		for i := range int(b.NumRows()) {
			idx = append(idx, b.Column(0).(interface{ Value(int) int64 }).Value(i))
		}
	}
	require.Equal(t, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, idx)
}

// A producer that builds and releases its own batches (facade.FromRows on a
// checked allocator) is stopped by a mid-stream failure, with nothing
// leaked: its deferred cleanup ran.
func TestMidStreamReleasesProducer(t *testing.T) {
	t.Parallel()
	inner := facadetest.New(nil)
	defer inner.Close()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	var produced int
	rows := func(yield func([]any, error) bool) {
		for i := range 1000 {
			produced++
			if !yield([]any{i}, nil) {
				return
			}
		}
	}
	lh := facadetest.Wrap(inner, facadetest.Fault{Point: facadetest.MidStream, AfterRows: 150, Err: errBoom})
	_, err := lh.Write(context.Background(), target("a"), facade.WriteRequest{Mode: facade.Replace, Schema: sc,
		Rows: facade.FromRows(mem, sc, 100, iter.Seq2[[]any, error](rows))})
	require.ErrorIs(t, err, errBoom)
	require.Equal(t, 200, produced, "the producer stopped after the batch that held the fault")
	mem.AssertSize(t, 0)
}

// cancelWhenHit calls cancel once a fault fired at p (its Block is then
// waiting), or after a minute; the returned channel closes after the call.
func cancelWhenHit(lh facade.Lakehouse, p facadetest.Point, cancel func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		for deadline := time.Now().Add(time.Minute); facadetest.Hits(lh, p) == 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}()
	return done
}

// Block waits for the Stage context and returns its cause; the stream's
// slice and the double's stamped batches are released.
func TestMidStreamBlock(t *testing.T) {
	t.Parallel()
	inner, mem := double(t)
	cause := errors.New("operator cancelled")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	lh := facadetest.Wrap(inner, facadetest.Fault{Point: facadetest.MidStream, AfterRows: 7, Do: facadetest.Block})
	done := cancelWhenHit(lh, facadetest.MidStream, func() { cancel(cause) })
	_, err := lh.Write(ctx, target("a"), request(input(t, mem), "t1"))
	<-done
	require.ErrorIs(t, err, cause)
	require.Equal(t, 1, facadetest.Hits(lh, facadetest.MidStream))
	require.Empty(t, inner.Snapshots("a"))
}

// drain reads a write's stream and keeps nothing, so that a test can
// check that the wrapper alone released what it made.
type drain struct{ facade.Lakehouse }

func (drain) Stage(_ context.Context, _ facade.Target, req facade.WriteRequest) (facade.Staged, error) {
	for _, err := range req.Rows {
		if err != nil {
			return nil, err
		}
	}
	return nil, errors.New("drain: nothing staged")
}

func TestMidStreamPanic(t *testing.T) {
	t.Parallel()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	bs := contract.Batches(mem, contract.Schema(), 0, 12, 3, 12)
	lh := facadetest.Wrap(drain{}, facadetest.Fault{Point: facadetest.MidStream, AfterRows: 4, Do: func(context.Context) error { panic("crash") }})
	require.PanicsWithValue(t, "crash", func() {
		_, _ = lh.Stage(context.Background(), target("a"), request(bs, "t1"))
	})
	for _, b := range bs {
		b.Release()
	}
	mem.AssertSize(t, 0) // the cut slice was released
	require.Equal(t, 1, facadetest.Hits(lh, facadetest.MidStream))
}

func TestBeforeCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	inner, mem := double(t)
	lh := facadetest.Wrap(inner, facadetest.Fault{Point: facadetest.BeforeCommit, Dataset: "a", Err: errBoom})
	bs := input(t, mem)

	st, err := lh.Stage(ctx, target("a"), request(bs, "t1"))
	require.NoError(t, err)
	require.Equal(t, int64(12), st.Info().Rows)
	_, err = st.Commit(ctx)
	require.ErrorIs(t, err, errBoom)
	require.NotErrorIs(t, err, facade.ErrCommitStateUnknown)
	require.ErrorIs(t, st.Abort(ctx), facade.ErrAlreadyFinished, "the staged write was already aborted")
	_, err = st.Commit(ctx)
	require.ErrorIs(t, err, facade.ErrAlreadyFinished)
	require.Empty(t, inner.Snapshots("a"))

	_, err = lh.Write(ctx, target("a"), request(bs, "t2")) // every time (Times: 0)
	require.ErrorIs(t, err, errBoom)
	require.Equal(t, 2, facadetest.Hits(lh, facadetest.BeforeCommit))
	_, err = lh.Write(ctx, target("b"), request(bs, "t3")) // another dataset
	require.NoError(t, err)
	require.Empty(t, inner.Snapshots("a"))
	require.Len(t, inner.Snapshots("b"), 1)
}

func TestBeforeCommitBlock(t *testing.T) {
	t.Parallel()
	inner, mem := double(t)
	lh := facadetest.Wrap(inner, facadetest.Fault{Point: facadetest.BeforeCommit, Do: facadetest.Block})
	st, err := lh.Stage(context.Background(), target("a"), request(input(t, mem), "t1"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = st.Commit(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Empty(t, inner.Snapshots("a"))
}

func TestAfterCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	inner, mem := double(t)
	lh := facadetest.Wrap(inner, facadetest.Fault{Point: facadetest.AfterCommit, Times: 1, Err: errBoom})
	bs := input(t, mem)

	_, err := lh.Write(ctx, target("a"), request(bs, "t1"))
	require.ErrorIs(t, err, facade.ErrCommitStateUnknown, "the commit landed: the outcome is unknown to the caller")
	require.ErrorIs(t, err, errBoom)
	require.ErrorContains(t, err, `dataset "a"`)
	res, found, err := lh.FindTxn(ctx, "a", "t1")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, int64(12), res.Rows)
	require.Len(t, inner.Snapshots("a"), 1)
	require.Equal(t, 1, facadetest.Hits(lh, facadetest.AfterCommit))

	got, err := lh.Write(ctx, target("a"), request(bs, "t2"))
	require.NoError(t, err)
	require.Equal(t, 1, facadetest.Hits(lh, facadetest.AfterCommit))
	require.Len(t, inner.Snapshots("a"), 2)
	require.Equal(t, "t2", got.TxnID)
}

// Block and a failing Call at AfterCommit report an unknown outcome too; a
// Call returning nil hands the commit result through.
func TestAfterCommitActions(t *testing.T) {
	t.Parallel()
	inner, mem := double(t)
	bs := input(t, mem)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	block := facadetest.Wrap(inner, facadetest.Fault{Point: facadetest.AfterCommit, Do: facadetest.Block})
	done := cancelWhenHit(block, facadetest.AfterCommit, cancel)
	_, err := block.Write(ctx, target("a"), request(bs, "t1"))
	<-done
	require.ErrorIs(t, err, facade.ErrCommitStateUnknown)
	require.ErrorIs(t, err, context.Canceled)
	_, found, err := inner.FindTxn(context.Background(), "a", "t1")
	require.NoError(t, err)
	require.True(t, found)

	var calls int
	call := facadetest.Wrap(inner, facadetest.Fault{Point: facadetest.AfterCommit, Do: func(context.Context) error {
		calls++
		if calls == 1 {
			return nil
		}
		return errBoom
	}})
	res, err := call.Write(context.Background(), target("a"), request(bs, "t2"))
	require.NoError(t, err)
	require.Equal(t, int64(12), res.Rows)
	_, err = call.Write(context.Background(), target("a"), request(bs, "t3"))
	require.ErrorIs(t, err, facade.ErrCommitStateUnknown)
	require.ErrorIs(t, err, errBoom)
	require.Equal(t, 2, facadetest.Hits(call, facadetest.AfterCommit))
	require.Len(t, inner.Snapshots("a"), 3)
}

// A failed commit does not reach AfterCommit.
func TestAfterCommitNotReachedOnCommitError(t *testing.T) {
	t.Parallel()
	inner, mem := double(t)
	conflict := facadetest.Wrap(inner, facadetest.Fault{Point: facadetest.BeforeCommit, Err: facade.ErrCommitConflict})
	lh := facadetest.Wrap(conflict, facadetest.Fault{Point: facadetest.AfterCommit, Err: errBoom})
	_, err := lh.Write(context.Background(), target("a"), request(input(t, mem), "t1"))
	require.ErrorIs(t, err, facade.ErrCommitConflict)
	require.NotErrorIs(t, err, errBoom)
	require.Equal(t, 0, facadetest.Hits(lh, facadetest.AfterCommit))
}

func TestBeforeAbort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	inner, mem := double(t)
	lh := facadetest.Wrap(inner, facadetest.Fault{Point: facadetest.BeforeAbort, Times: 1, Err: errBoom})
	st, err := lh.Stage(ctx, target("a"), request(input(t, mem), "t1"))
	require.NoError(t, err)
	require.ErrorIs(t, st.Abort(ctx), errBoom)
	require.NoError(t, st.Abort(ctx), "a failed abort can be retried")
	require.ErrorIs(t, st.Abort(ctx), facade.ErrAlreadyFinished)
	_, err = st.Commit(ctx)
	require.ErrorIs(t, err, facade.ErrAlreadyFinished)
	require.Equal(t, 1, facadetest.Hits(lh, facadetest.BeforeAbort))
	require.Empty(t, inner.Snapshots("a"))
}

func TestPanicAndZeroAction(t *testing.T) {
	t.Parallel()
	inner, mem := double(t)
	bs := input(t, mem)
	lh := facadetest.Wrap(inner, facadetest.Fault{Point: facadetest.BeforeStage, Dataset: "p", Do: func(context.Context) error { panic(errBoom) }},
		facadetest.Fault{Point: facadetest.BeforeStage, Dataset: "z"})
	require.PanicsWithError(t, errBoom.Error(), func() { _, _ = lh.Write(context.Background(), target("p"), request(bs, "t1")) })
	_, err := lh.Write(context.Background(), target("z"), request(bs, "t2"))
	require.ErrorIs(t, err, facadetest.ErrInjected)
	_, err = lh.Write(context.Background(), target("z"), request(bs, "t3"))
	require.ErrorIs(t, err, facadetest.ErrInjected)
	require.Equal(t, 3, facadetest.Hits(lh, facadetest.BeforeStage))
}

func TestWrapRefusesBadFaults(t *testing.T) {
	t.Parallel()
	inner := facadetest.New(nil)
	require.Panics(t, func() { facadetest.Wrap(inner, facadetest.Fault{Point: "sometime"}) })
	require.Panics(t, func() { facadetest.Wrap(inner, facadetest.Fault{Point: facadetest.AfterCommit, Times: -1}) })
	require.Panics(t, func() { facadetest.Wrap(inner, facadetest.Fault{Point: facadetest.MidStream, AfterRows: -1}) })
	require.Panics(t, func() { facadetest.Wrap(nil) })
}

// Times is exact under concurrent writes.
func TestConcurrentTimes(t *testing.T) {
	t.Parallel()
	inner, mem := double(t)
	bs := input(t, mem)
	lh := facadetest.Wrap(inner,
		facadetest.Fault{Point: facadetest.BeforeStage, Times: 3, Err: errBoom},
		facadetest.Fault{Point: facadetest.MidStream, AfterRows: 5, Times: 2, Err: errBoom},
	)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := string(rune('a' + i))
			if _, err := lh.Write(context.Background(), target(id), request(bs, "t")); errors.Is(err, errBoom) {
				failed.Add(1)
			} else if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int64(5), failed.Load())
	require.Equal(t, 3, facadetest.Hits(lh, facadetest.BeforeStage))
	require.Equal(t, 2, facadetest.Hits(lh, facadetest.MidStream))
}
