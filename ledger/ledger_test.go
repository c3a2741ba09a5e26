package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"

	"github.com/lakewrite/lakewrite/facade"
)

func TestMain(m *testing.M) { pgtest.MainWithDatabase(m, "DATABASE_URL") }

func newLedger(t *testing.T, cfg *ledger.Config) (*ledger.Ledger, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.Pool(t)
	l, err := ledger.New(pool, cfg)
	require.NoError(t, err)
	return l, pool
}

// warm opens n connections of pool and puts them back idle, so that tests
// bounding a wait in milliseconds do not spend it starting a connection
// (slow on a loaded machine).
func warm(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	var conns []*pgxpool.Conn
	for range n {
		c, err := pool.Acquire(context.Background())
		require.NoError(t, err)
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
}

func ensure(t *testing.T, l *ledger.Ledger, ids ...string) {
	t.Helper()
	for _, id := range ids {
		_, err := l.EnsureDataset(context.Background(), id, id+" name", nil)
		require.NoError(t, err)
	}
}

func params(ds string) ledger.OpenParams {
	return ledger.OpenParams{DatasetID: ds, WriterID: "pipeline.output", Sink: "iceberg_native", WriteMode: facade.Replace}
}

func TestOpenCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, _ := newLedger(t, nil)
	ensure(t, l, "orders")

	in, err := l.Open(ctx, params("orders"))
	require.NoError(t, err)
	require.Equal(t, int64(1), in.Attempt())
	got, err := l.Get(ctx, in.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusOpen, got.Status)
	require.Zero(t, got.RowCount)

	at := time.Date(2026, 11, 1, 12, 0, 0, 123000, time.UTC)
	require.NoError(t, l.Commit(ctx, in, ledger.Outcome{RowCount: 42, SnapshotID: 7, CommittedAt: at,
		Schema: []byte(`{"columns":["a"]}`)}))

	got, err = l.Get(ctx, in.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusCommitted, got.Status)
	require.Equal(t, int64(42), got.RowCount)
	require.Equal(t, int64(7), got.SnapshotID)
	require.True(t, got.CommittedAt.Equal(at), "committed_at is the time passed in, not now()")

	ds, err := l.Dataset(ctx, "orders")
	require.NoError(t, err)
	require.Equal(t, int64(42), ds.RowCount)
	require.Equal(t, "active", ds.Status)
	require.Equal(t, "iceberg_native", string(ds.Sink)) // the stored text
	require.True(t, ds.SourceWatermark.Equal(at), "watermark = commit time")
	require.JSONEq(t, `{"columns":["a"]}`, string(ds.Schema))

	// Double commit is refused and changes nothing.
	err = l.Commit(ctx, in, ledger.Outcome{RowCount: 1, CommittedAt: at.Add(time.Hour)})
	require.ErrorIs(t, err, ledger.ErrNotOpen)
	ds2, err := l.Dataset(ctx, "orders")
	require.NoError(t, err)
	require.Equal(t, ds.RowCount, ds2.RowCount)
	require.True(t, ds2.SourceWatermark.Equal(at))

	// An append adds to the dataset's row count.
	p := params("orders")
	p.WriteMode = facade.Append
	in2, err := l.Open(ctx, p)
	require.NoError(t, err)
	require.NoError(t, l.Commit(ctx, in2, ledger.Outcome{RowCount: 8, CommittedAt: at.Add(time.Minute)}))
	ds3, err := l.Dataset(ctx, "orders")
	require.NoError(t, err)
	require.Equal(t, int64(50), ds3.RowCount)
}

func TestAbortLeavesWatermark(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, _ := newLedger(t, nil)
	ensure(t, l, "d")
	in, err := l.Open(ctx, params("d"))
	require.NoError(t, err)
	require.NoError(t, l.Abort(ctx, in, errors.New("compute failed: division by zero")))
	got, err := l.Get(ctx, in.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusAborted, got.Status)
	require.Equal(t, "compute failed: division by zero", got.Error)
	ds, err := l.Dataset(ctx, "d")
	require.NoError(t, err)
	require.True(t, ds.SourceWatermark.IsZero())
	require.Equal(t, "pending", ds.Status)

	require.ErrorIs(t, l.Abort(ctx, in, nil), ledger.ErrNotOpen)
	require.ErrorIs(t, l.Commit(ctx, in, ledger.Outcome{CommittedAt: time.Now()}), ledger.ErrNotOpen)
	// The dataset is free again.
	in, err = l.Open(ctx, params("d"))
	require.NoError(t, err)
	require.NoError(t, l.Abort(ctx, in, nil))
}

var errTooFew = errors.New("expected at least 10 rows")

// atLeast10 is an expectation refusing commits of fewer than 10 rows; it
// records what it saw in seen, when not nil.
func atLeast10(seen *[]ledger.Commit) ledger.Expectation {
	return func(ctx context.Context, tx pgx.Tx, c ledger.Commit) error {
		if seen != nil {
			*seen = append(*seen, c)
		}
		if c.Outcome.RowCount < 10 {
			return errTooFew
		}
		return nil
	}
}

func TestVetoAbortsAndStampsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, pool := newLedger(t, &ledger.Config{Expectations: []ledger.Expectation{atLeast10(nil)}})
	ensure(t, l, "d")
	in, err := l.Open(ctx, params("d"))
	require.NoError(t, err)
	err = l.Commit(ctx, in, ledger.Outcome{RowCount: 3, CommittedAt: time.Now()})
	require.ErrorIs(t, err, ledger.ErrVetoed)
	require.ErrorIs(t, err, errTooFew)
	got, err := l.Get(ctx, in.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusAborted, got.Status)
	require.Contains(t, got.Error, "expected at least 10 rows")
	ds, err := l.Dataset(ctx, "d")
	require.NoError(t, err)
	require.True(t, ds.SourceWatermark.IsZero())
	require.Zero(t, ds.RowCount)

	// CommitTx: veto inside the caller's transaction.
	in2, err := l.Open(ctx, params("d"))
	require.NoError(t, err)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	err = l.CommitTx(ctx, tx, in2, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()})
	require.ErrorIs(t, err, ledger.ErrVetoed)
	require.NoError(t, tx.Commit(ctx))
	got, err = l.Get(ctx, in2.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusAborted, got.Status)
	ds, err = l.Dataset(ctx, "d")
	require.NoError(t, err)
	require.True(t, ds.SourceWatermark.IsZero())
}

func TestCheckCommitsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var seen []ledger.Commit
	l, _ := newLedger(t, &ledger.Config{Expectations: []ledger.Expectation{atLeast10(&seen)}})
	ensure(t, l, "d")
	in, err := l.Open(ctx, params("d"))
	require.NoError(t, err)
	unchanged := func() {
		t.Helper()
		got, err := l.Get(ctx, in.ID)
		require.NoError(t, err)
		require.Equal(t, ledger.StatusOpen, got.Status)
		require.Zero(t, got.RowCount)
		require.True(t, got.CommittedAt.IsZero())
		ds, err := l.Dataset(ctx, "d")
		require.NoError(t, err)
		require.True(t, ds.SourceWatermark.IsZero())
		require.Zero(t, ds.RowCount)
		require.Equal(t, "pending", ds.Status)
	}

	err = l.Check(ctx, in, ledger.Outcome{RowCount: 3, CommittedAt: time.Now()})
	require.ErrorIs(t, err, ledger.ErrVetoed)
	require.ErrorIs(t, err, errTooFew)
	unchanged()
	require.NoError(t, l.Check(ctx, in, ledger.Outcome{RowCount: 12, CommittedAt: time.Now()}))
	unchanged()
	require.Len(t, seen, 2)
	require.Equal(t, in.ID, seen[1].Intent.ID)

	// The intent still commits, and the expectations run again.
	require.NoError(t, l.Commit(ctx, in, ledger.Outcome{RowCount: 12, CommittedAt: time.Now()}))
	require.Len(t, seen, 3)
	require.ErrorIs(t, l.Check(ctx, in, ledger.Outcome{RowCount: 12, CommittedAt: time.Now()}), ledger.ErrNotOpen)
	require.ErrorIs(t, l.Check(ctx, in, ledger.Outcome{RowCount: 12}), ledger.ErrInvalid)

	// Without expectations there is nothing to ask.
	plain, _ := newLedger(t, nil)
	require.NoError(t, plain.Check(ctx, in, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}))
}

func TestCommitTxWithCallerWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, pool := newLedger(t, nil)
	ensure(t, l, "d")

	// Rolled back: neither the rows nor the commit are visible.
	in, err := l.Open(ctx, params("d"))
	require.NoError(t, err)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO lakewrite.dataset_rows VALUES ('d', 0, '{"a":1}')`)
	require.NoError(t, err)
	require.NoError(t, l.CommitTx(ctx, tx, in, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}))
	require.NoError(t, tx.Rollback(ctx))
	got, err := l.Get(ctx, in.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusOpen, got.Status)

	// Committed: both land together.
	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO lakewrite.dataset_rows VALUES ('d', 0, '{"a":1}')`)
	require.NoError(t, err)
	require.NoError(t, l.CommitTx(ctx, tx, in, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}))
	require.NoError(t, tx.Commit(ctx))
	got, err = l.Get(ctx, in.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusCommitted, got.Status)
}

func TestWith(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, _ := newLedger(t, nil)
	ensure(t, l, "d")

	var id string
	out, err := l.With(ctx, params("d"), func(ctx context.Context, in *ledger.Intent) (ledger.Outcome, error) {
		id = in.ID
		return ledger.Outcome{RowCount: 5, CommittedAt: time.Now()}, nil
	})
	require.NoError(t, err)
	require.Equal(t, int64(5), out.RowCount)
	got, err := l.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusCommitted, got.Status)

	boom := errors.New("boom")
	_, err = l.With(ctx, params("d"), func(ctx context.Context, in *ledger.Intent) (ledger.Outcome, error) {
		id = in.ID
		return ledger.Outcome{}, boom
	})
	require.ErrorIs(t, err, boom)
	got, err = l.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusAborted, got.Status)
	require.Equal(t, "boom", got.Error)

	// Panic: aborted, then re-panicked.
	require.PanicsWithValue(t, "kaboom", func() {
		_, _ = l.With(ctx, params("d"), func(ctx context.Context, in *ledger.Intent) (ledger.Outcome, error) {
			id = in.ID
			panic("kaboom")
		})
	})
	got, err = l.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusAborted, got.Status)
	require.Contains(t, got.Error, "kaboom")

	// Outcome unknown: left open for the sweeper.
	_, err = l.With(ctx, params("d"), func(ctx context.Context, in *ledger.Intent) (ledger.Outcome, error) {
		id = in.ID
		return ledger.Outcome{}, fmt.Errorf("catalog timed out: %w", ledger.ErrOutcomeUnknown)
	})
	require.ErrorIs(t, err, ledger.ErrOutcomeUnknown)
	got, err = l.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusOpen, got.Status)
}

// 16 goroutines with their own connections race intents for one dataset:
// never two open at once, and all of them finish.
func TestRaceOneDataset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	setup := pgtest.Conn(t, url)
	l0, err := ledger.New(setup, nil)
	require.NoError(t, err)
	ensure(t, l0, "hot")

	const writers = 16
	var inside, maxInside, done atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := 0; i < writers; i++ {
		conn := pgtest.Conn(t, url)
		l, err := ledger.New(conn, ledger.WithMaxBackoff(&ledger.Config{WaitTimeout: 2 * time.Minute}, 50*time.Millisecond))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.With(ctx, params("hot"), func(ctx context.Context, in *ledger.Intent) (ledger.Outcome, error) {
				n := inside.Add(1)
				for {
					m := maxInside.Load()
					if n <= m || maxInside.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(5 * time.Millisecond)
				inside.Add(-1)
				return ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}, nil
			})
			if err == nil {
				done.Add(1)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int32(writers), done.Load())
	require.Equal(t, int32(1), maxInside.Load(), "two intents were open at once")
	var committed int
	require.NoError(t, setup.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE status='committed'`).Scan(&committed))
	require.Equal(t, writers, committed)
}

func TestBusyAndDifferentDatasets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, pool := newLedger(t, &ledger.Config{WaitTimeout: 200 * time.Millisecond})
	ensure(t, l, "a", "b")
	warm(t, pool, 3) // the waits measured below are not a connection's start
	held, err := l.Open(ctx, params("a"))
	require.NoError(t, err)
	t.Cleanup(held.Release) // a failed check does not leave the pool waiting on it

	// A different dataset does not wait.
	other, err := l.Open(ctx, params("b"))
	require.NoError(t, err)
	require.NoError(t, l.Abort(ctx, other, nil))

	// The same dataset: busy after the wait budget, naming the holder.
	_, err = l.Open(ctx, params("a"))
	require.ErrorIs(t, err, ledger.ErrBusy)
	holder, busy := ledger.BusyHolder(err)
	require.True(t, busy, "a busy error: %v", err)
	require.Equal(t, held.ID, holder)

	// Or when the caller's context ends first (while it waits for the
	// dataset: the deadline leaves a loaded machine time to get there).
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	l2, err := ledger.New(pool, &ledger.Config{WaitTimeout: time.Hour})
	require.NoError(t, err)
	_, err = l2.Open(cctx, params("a"))
	require.ErrorIs(t, err, ledger.ErrBusy)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// A context already cancelled is the caller's error, not a busy dataset.
	done, cancelDone := context.WithCancel(ctx)
	cancelDone()
	_, err = l.Open(done, params("b"))
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, ledger.ErrBusy)

	// Once the holder ends, a waiting Open goes through.
	result := make(chan error, 1)
	go func() {
		l3, _ := ledger.New(pool, &ledger.Config{WaitTimeout: time.Minute})
		in, err := l3.Open(ctx, params("a"))
		if err == nil {
			err = l3.Abort(ctx, in, nil)
		}
		result <- err
	}()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, l.Commit(ctx, held, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}))
	require.NoError(t, <-result)
}

func TestPreMintedID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, _ := newLedger(t, nil)
	ensure(t, l, "d", "e")
	id := ledger.NewID()
	p := params("d")
	p.SetID(id)
	in, err := l.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, id, in.ID)
	again, err := l.Open(ctx, p) // retried Open of the same intent
	require.NoError(t, err)
	require.Equal(t, []any{in.ID, in.DatasetID, in.Attempt(), in.CreatedAt}, []any{again.ID, again.DatasetID, again.Attempt(), again.CreatedAt})
	require.NoError(t, l.Abort(ctx, in, nil))
	_, err = l.Open(ctx, p)
	require.ErrorIs(t, err, ledger.ErrIDInUse)
	p2 := params("e")
	p2.SetID(id)
	_, err = l.Open(ctx, p2)
	require.ErrorIs(t, err, ledger.ErrIDInUse)
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, _ := newLedger(t, nil)
	ensure(t, l, "d")
	for name, p := range map[string]ledger.OpenParams{
		"empty dataset": {WriterID: "w", Sink: "pg", WriteMode: facade.Replace},
		"empty writer":  {DatasetID: "d", Sink: "pg", WriteMode: facade.Replace},
		"empty sink":    {DatasetID: "d", WriterID: "w", WriteMode: facade.Replace},
		"bad mode":      {DatasetID: "d", WriterID: "w", Sink: "pg", WriteMode: "upsert"},
		"bad id":        ledger.WithID(ledger.OpenParams{DatasetID: "d", WriterID: "w", Sink: "pg", WriteMode: facade.Replace}, "not-a-uuid"),
	} {
		_, err := l.Open(ctx, p)
		require.ErrorIs(t, err, ledger.ErrInvalid, name)
	}
	_, err := l.Open(ctx, params("nope"))
	require.ErrorIs(t, err, ledger.ErrDatasetNotFound)

	in, err := l.Open(ctx, params("d"))
	require.NoError(t, err)
	require.ErrorIs(t, l.Commit(ctx, in, ledger.Outcome{RowCount: -1, CommittedAt: time.Now()}), ledger.ErrInvalid)
	require.ErrorIs(t, l.Commit(ctx, in, ledger.Outcome{RowCount: 1}), ledger.ErrInvalid)
	require.ErrorIs(t, l.Commit(ctx, nil, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}), ledger.ErrInvalid)
	unknown := *in
	unknown.ID = ledger.NewID()
	require.ErrorIs(t, l.Commit(ctx, &unknown, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}), ledger.ErrIntentNotFound)
	_, err = l.EnsureDataset(ctx, "", "x", nil)
	require.ErrorIs(t, err, ledger.ErrInvalid)
	_, err = l.Dataset(ctx, "missing")
	require.ErrorIs(t, err, ledger.ErrDatasetNotFound)
	_, err = ledger.New(nil, nil)
	require.ErrorIs(t, err, ledger.ErrInvalid)
	// Nothing was stamped by the refused commits.
	got, err := l.Get(ctx, in.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusOpen, got.Status)
}

func TestDatasetOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, pool := newLedger(t, nil)
	ensure(t, l, "manual", "free")
	manual := ledger.OpenParams{DatasetID: "manual", WriterID: "manualtable", Sink: "iceberg_native", WriteMode: facade.Replace}

	// Unowned: any writer opens.
	in, err := l.Open(ctx, params("manual"))
	require.NoError(t, err)
	require.NoError(t, l.Abort(ctx, in, nil))

	require.NoError(t, l.ClaimDataset(ctx, "manual", "manualtable"))
	require.NoError(t, l.ClaimDataset(ctx, "manual", "manualtable"), "claiming again is a no-op")
	ds, err := l.Dataset(ctx, "manual")
	require.NoError(t, err)
	require.Equal(t, "manualtable", ds.Owner)

	// Another writer can neither open nor claim it.
	_, err = l.Open(ctx, params("manual"))
	require.ErrorIs(t, err, ledger.ErrNotOwner)
	require.EqualError(t, err, `ledger: dataset owned by another writer: dataset "manual" is owned by writer "manualtable"; writer "pipeline.output" may not write or claim it`)
	require.ErrorIs(t, l.ClaimDataset(ctx, "manual", "pipeline.output"), ledger.ErrNotOwner)
	var open int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE status = 'open'`).Scan(&open))
	require.Zero(t, open, "a refused open leaves no intent")

	// The owner writes as usual; other datasets are unaffected.
	in, err = l.Open(ctx, manual)
	require.NoError(t, err)
	require.NoError(t, l.Commit(ctx, in, ledger.Outcome{RowCount: 2, CommittedAt: time.Now()}))
	in, err = l.Open(ctx, params("free"))
	require.NoError(t, err)
	require.NoError(t, l.Abort(ctx, in, nil))

	// The operator hands it over.
	require.NoError(t, l.SetDatasetOwner(ctx, "manual", ""))
	in, err = l.Open(ctx, params("manual"))
	require.NoError(t, err)
	require.NoError(t, l.Abort(ctx, in, nil))
	require.NoError(t, l.SetDatasetOwner(ctx, "manual", "pipeline.output"))
	_, err = l.Open(ctx, manual)
	require.ErrorIs(t, err, ledger.ErrNotOwner)

	// Bad input.
	require.ErrorIs(t, l.ClaimDataset(ctx, "nope", "manualtable"), ledger.ErrDatasetNotFound)
	require.ErrorIs(t, l.ClaimDataset(ctx, "free", " "), ledger.ErrInvalid)
	require.ErrorIs(t, l.SetDatasetOwner(ctx, "nope", "x"), ledger.ErrDatasetNotFound)
	_, err = l.Open(ctx, params("nope"))
	require.ErrorIs(t, err, ledger.ErrDatasetNotFound)
}
