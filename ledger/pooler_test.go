package ledger_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
)

// bouncedLedger is a ledger on a pool through a PgBouncer in mode in
// front of a fresh database, with several server connections idle.
func bouncedLedger(t *testing.T, mode string, cfg *ledger.Config) (*ledger.Ledger, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.PgBouncer(t, pgtest.URL(t), mode))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	// Four statements at once: four server connections, idle afterwards
	// (in transaction mode the next ones land on them in turn).
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := pool.Exec(ctx, `SELECT pg_sleep(0.2)`)
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	l, err := ledger.New(pool, cfg)
	require.NoError(t, err)
	return l, pool
}

// Behind PgBouncer in transaction mode a session lock cannot hold: Open
// with liveness refuses with ErrTransactionPooling before it locks or
// inserts anything (no intent, no advisory lock left on any server
// connection). In session mode it opens and commits as on a direct
// connection, with liveness.
func TestTransactionPoolingRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, pool := bouncedLedger(t, "transaction", nil)
	ensure(t, l, "pooled")
	_, err := boundedOpen(t, l, params("pooled"))
	require.ErrorIs(t, err, ledger.ErrTransactionPooling)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions`).Scan(&n))
	require.Zero(t, n, "no intent")
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n))
	require.Zero(t, n, "no advisory lock")

	sl, _ := bouncedLedger(t, "session", nil)
	ensure(t, sl, "sessioned")
	in, err := boundedOpen(t, sl, params("sessioned"))
	require.NoError(t, err)
	require.NoError(t, in.Alive(ctx))
	require.NoError(t, sl.Commit(ctx, in, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}))
}

// boundedOpen opens within a bound, releasing at the end of the test any
// intent it returns: a test expecting a refusal fails at its assertion
// instead of waiting for its pool to close (a pool waits for the
// connection an unexpected hold keeps).
func boundedOpen(t *testing.T, l *ledger.Ledger, p ledger.OpenParams) (*ledger.Intent, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, err := l.Open(ctx, p)
	if in != nil {
		held(t, in)
	}
	return in, err
}

// Behind PgBouncer in transaction mode with a single server connection,
// every client's statements run on the one backend, so a session setting
// made by one statement is seen by the next, as on a session of its own.
// What gives the shared backend away is a lock of another client's open
// intent on it: the first hold cannot be told apart, the next one is
// refused with ErrTransactionPooling while the first is held, and so is a
// later writer after the first one died holding it, where it would
// otherwise wait behind a writer that looks alive for ever.
func TestTransactionPoolingOneServerRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	through := pgtest.PgBouncerPool(t, pgtest.URL(t), "transaction", 1)
	pool, err := pgxpool.New(ctx, through)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	l, err := ledger.New(pool, &ledger.Config{WaitTimeout: time.Second})
	require.NoError(t, err)
	ensure(t, l, "first", "second")

	// The first writer, on a connection of its own (so that it can die
	// without its pool waiting for it).
	conn, err := pgx.Connect(ctx, through)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	fl, err := ledger.New(conn, nil)
	require.NoError(t, err)
	first, err := boundedOpen(t, fl, params("first"))
	require.NoError(t, err, "the first hold on the shared backend cannot be told apart")

	_, err = boundedOpen(t, l, params("second"))
	require.ErrorIs(t, err, ledger.ErrTransactionPooling)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE dataset_id = 'second'`).Scan(&n))
	require.Zero(t, n, "the refused Open left no intent")

	// The first writer dies: its client connection closes, its lock stays
	// on the server connection the pooler keeps.
	require.NoError(t, conn.Close(ctx))
	p := params("first")
	p.Lookup = absent
	_, err = boundedOpen(t, l, p)
	require.ErrorIs(t, err, ledger.ErrTransactionPooling)
	txn, err := l.Get(ctx, first.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusOpen, txn.Status, "nothing was reconciled through the shared backend")
}

// With LivenessOff, the documented setup for transaction mode, a dead
// writer's intent is recovered through the pooler by the next Open once
// it is older than RecoverAfter.
func TestLivenessOffThroughTransactionPooling(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, pool := bouncedLedger(t, "transaction", &ledger.Config{Liveness: ledger.LivenessOff, WaitTimeout: 300 * time.Millisecond})
	ensure(t, l, "off")
	dead, err := l.Open(ctx, params("off"))
	require.NoError(t, err)
	dead.Release() // its writer died: nothing but its age tells
	p := params("off")
	p.Lookup, p.RecoverAfter = absent, time.Minute
	_, err = l.Open(ctx, p)
	require.ErrorIs(t, err, ledger.ErrBusy, "younger than RecoverAfter")
	_, err = pool.Exec(ctx, `UPDATE lakewrite.pipeline_build_transactions SET created_at = created_at - interval '2 minutes' WHERE id = $1`, dead.ID)
	require.NoError(t, err)
	in, err := l.Open(ctx, p)
	require.NoError(t, err)
	require.NoError(t, l.Commit(ctx, in, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}))
	txn, err := l.Get(ctx, dead.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusAborted, txn.Status)
}
