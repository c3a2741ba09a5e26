package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
)

// A failed writer whose held session broke (its backend is terminated
// here; a deadline interrupting a query on it closes it the same way)
// ends its intent before Abort returns, even with every other connection
// of the pool taken by other work: the abort runs on a connection opened
// in the broken session's place, so the writer stays within the
// connections it holds and does not wait for the pool.
func TestAbortOnBrokenHoldWithPoolExhausted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	l, err := ledger.New(pool, &ledger.Config{WaitTimeout: time.Second})
	require.NoError(t, err)
	ensure(t, l, "broken")

	in := held(t, mustOpen(t, l, params("broken")))
	busy, err := pool.Acquire(ctx) // the pool's other connection, taken elsewhere
	require.NoError(t, err)
	t.Cleanup(busy.Release)
	direct := pgtest.Conn(t, url)
	var pid int32
	require.NoError(t, direct.QueryRow(ctx, `SELECT k.pid FROM pg_locks k
		JOIN lakewrite.pipeline_build_transactions t ON ((k.classid::bigint << 32) | k.objid::bigint) = t.lock_key
		WHERE t.id = $1 AND k.locktype = 'advisory' AND k.objsubid = 1 AND k.granted`, in.ID).Scan(&pid))
	var ok bool
	require.NoError(t, direct.QueryRow(ctx, `SELECT pg_terminate_backend($1, 5000)`, pid).Scan(&ok))
	require.True(t, ok)

	// The pool has no connection to give within this bound: only the
	// connection in the broken session's place can end the intent.
	actx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	require.NoError(t, l.Abort(actx, in, errors.New("the write failed")))
	var status string
	require.NoError(t, direct.QueryRow(ctx, `SELECT status FROM lakewrite.pipeline_build_transactions WHERE id = $1`, in.ID).Scan(&status))
	require.Equal(t, string(ledger.StatusAborted), status)
	require.Equal(t, int32(1), pool.Stat().AcquiredConns(), "the broken session's place is back in the pool")
	var conns int
	require.NoError(t, direct.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&conns))
	require.LessOrEqual(t, conns, 2, "no more server connections than the pool's")
}
