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

// A pooler hands its clients a startup key of its own: behind PgBouncer, in
// session mode as in transaction mode, the process id a connection was
// given is not its backend's (pg_backend_pid), while on a direct connection
// it is. That is how the ledger tells a connection that can hold a session
// lock from one that cannot.
func TestPoolerKeyIsNotBackendPID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	for _, c := range []struct {
		url    string
		direct bool
	}{{url, true}, {pgtest.PgBouncer(t, url, "session"), false}, {pgtest.PgBouncer(t, url, "transaction"), false}} {
		conn, err := pgx.Connect(ctx, c.url)
		require.NoError(t, err)
		for range 3 {
			var pid uint32
			require.NoError(t, conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
			require.Equal(t, c.direct, pid == conn.PgConn().PID(), c.url)
		}
		require.NoError(t, conn.Close(ctx))
	}
}

// advisoryLocks counts the advisory locks granted in the database of pool,
// by any backend.
func advisoryLocks(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n))
	return n
}

// leaseOf is the intent's lock key and lease expiry (NULL when it has none).
func leaseOf(t *testing.T, pool *pgxpool.Pool, id string) (key *int64, until *time.Time) {
	t.Helper()
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT lock_key, lease_until
		FROM lakewrite.pipeline_build_transactions WHERE id = $1`, id).Scan(&key, &until))
	return key, until
}

// Behind PgBouncer, in transaction mode and in session mode, the default
// configuration holds an intent by a lease, never by a session lock: Open
// takes no advisory lock that could stay on a pooled server connection,
// Alive renews the lease, and the intent commits. On a direct connection
// the session lock stays the fast path.
func TestPoolerHoldsByLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, mode := range []string{"transaction", "session"} {
		l, pool := bouncedLedger(t, mode, nil)
		ensure(t, l, "pooled")
		in, err := boundedOpen(t, l, params("pooled"))
		require.NoError(t, err, mode)
		key, until := leaseOf(t, pool, in.ID)
		require.Nil(t, key, "%s: no session lock", mode)
		require.NotNil(t, until, "%s: a lease", mode)
		require.Zero(t, advisoryLocks(t, pool), "%s: no advisory lock", mode)
		require.NoError(t, in.Alive(ctx))
		_, renewed := leaseOf(t, pool, in.ID)
		require.True(t, renewed.After(*until), "%s: Alive renewed the lease", mode)
		require.NoError(t, l.Commit(ctx, in, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}), mode)
		require.Zero(t, advisoryLocks(t, pool), mode)
	}

	url := pgtest.URL(t)
	pool := poolOn(t, url)
	l, err := ledger.New(pool, nil)
	require.NoError(t, err)
	ensure(t, l, "direct")
	in, err := boundedOpen(t, l, params("direct"))
	require.NoError(t, err)
	key, until := leaseOf(t, pool, in.ID)
	require.NotNil(t, key, "a direct connection holds a session lock")
	require.Nil(t, until)
	require.NoError(t, l.Commit(ctx, in, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}))
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

// Behind PgBouncer in transaction mode with a single server connection
// (every client's statements run on the one backend), with the default
// configuration: intents of other datasets open while one is held, and a
// writer that died holding an intent (its connection closed, its lease no
// longer renewed) frees its dataset once its lease lapses: the next Open
// with a Lookup reconciles it within Config.Lease and the backoff's last
// step (the Open below is bounded by that).
func TestTransactionPoolingOneServerLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const lease = time.Second
	through := pgtest.PgBouncerPool(t, pgtest.URL(t), "transaction", 1)
	pool, err := pgxpool.New(ctx, through)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	l, err := ledger.New(pool, &ledger.Config{WaitTimeout: lease + 2*time.Second, Lease: lease})
	require.NoError(t, err)
	ensure(t, l, "first", "second")

	// The first writer, on a connection of its own (so that it can die
	// without its pool waiting for it).
	conn, err := pgx.Connect(ctx, through)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	fl, err := ledger.New(conn, &ledger.Config{Lease: lease})
	require.NoError(t, err)
	first, err := boundedOpen(t, fl, params("first"))
	require.NoError(t, err)

	second, err := boundedOpen(t, l, params("second"))
	require.NoError(t, err, "the shared backend holds no lock of the first intent")
	require.NoError(t, l.Commit(ctx, second, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}))
	require.Zero(t, advisoryLocks(t, pool))

	// The first writer dies: its client connection closes; nothing renews
	// its lease.
	require.NoError(t, conn.Close(ctx))
	p := params("first")
	p.Lookup = absent
	next, err := boundedOpen(t, l, p)
	require.NoError(t, err, "reconciled once the lease lapsed")
	txn, err := l.Get(ctx, first.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusAborted, txn.Status)
	require.NoError(t, l.Commit(ctx, next, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}))
	require.Zero(t, advisoryLocks(t, pool))
}

// LivenessOff is LivenessLease: no session lock even on a direct
// connection, and a dead writer's intent (opened, never renewed) is
// reconciled through the pooler once its lease lapsed, without waiting for
// RecoverAfter.
func TestLivenessOffIsLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const lease = 300 * time.Millisecond
	l, _ := bouncedLedger(t, "transaction", &ledger.Config{Liveness: ledger.LivenessOff, Lease: lease, WaitTimeout: 5 * time.Second})
	ensure(t, l, "off")
	dead, err := l.Open(ctx, params("off"))
	require.NoError(t, err)
	held(t, dead) // never renewed: its writer is taken for dead once the lease lapses
	p := params("off")
	p.Lookup, p.RecoverAfter = absent, time.Hour
	in, err := l.Open(ctx, p)
	require.NoError(t, err)
	require.NoError(t, l.Commit(ctx, in, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}))
	txn, err := l.Get(ctx, dead.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusAborted, txn.Status)

	dpool := poolOn(t, pgtest.URL(t))
	direct, err := ledger.New(dpool, &ledger.Config{Liveness: ledger.LivenessLease})
	require.NoError(t, err)
	ensure(t, direct, "lease")
	in, err = boundedOpen(t, direct, params("lease"))
	require.NoError(t, err)
	key, until := leaseOf(t, dpool, in.ID)
	require.Nil(t, key)
	require.NotNil(t, until)
	require.NoError(t, direct.Abort(ctx, in, nil))
}
