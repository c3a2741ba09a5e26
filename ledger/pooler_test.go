package ledger_test

import (
	"context"
	"sync"
	"testing"
	"time"

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
	_, err := l.Open(ctx, params("pooled"))
	require.ErrorIs(t, err, ledger.ErrTransactionPooling)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions`).Scan(&n))
	require.Zero(t, n, "no intent")
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n))
	require.Zero(t, n, "no advisory lock")

	sl, _ := bouncedLedger(t, "session", nil)
	ensure(t, sl, "sessioned")
	in, err := sl.Open(ctx, params("sessioned"))
	require.NoError(t, err)
	require.NoError(t, in.Alive(ctx))
	require.NoError(t, sl.Commit(ctx, in, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}))
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
