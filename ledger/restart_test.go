package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgcluster"
	"github.com/lakewrite/lakewrite/ledger"
)

// A Postgres restart ends every session, and with them every writer's
// hold: the writer learns it at once (Commit and Alive fail with
// ErrLostHold instead of hanging), and the next Open with a Lookup
// reconciles the intent by itself.
//
// The restart is a crash restart of a cluster of the test's own (the
// shared test cluster is left alone): SIGKILL of one backend makes the
// postmaster end every session and reinitialise shared memory (the lock
// table included), as an immediate restart does, without the postmaster
// exiting (the cluster's supervisor removes the cluster when it exits, so
// pg_ctl restart is not an option here).
func TestServerRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{Settings: map[string]string{
		"synchronous_commit": "on", // the open intent must survive the crash
	}})
	require.NoError(t, err)
	t.Cleanup(cluster.Stop)
	url := cluster.URL("postgres")
	pool := poolOn(t, url)
	_, err = ledger.Migrate(ctx, pool, "")
	require.NoError(t, err)
	l, err := ledger.New(pool, &ledger.Config{WaitTimeout: longWait})
	require.NoError(t, err)
	ensure(t, l, "d")

	in, err := l.Open(ctx, params("d"))
	require.NoError(t, err)
	held(t, in)
	writerPID := holderPID(t, pool, in.ID)

	require.NoError(t, cluster.CrashRestart(ctx))
	check, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	var n int
	require.NoError(t, check.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, writerPID).Scan(&n))
	require.NoError(t, check.Close(ctx))
	require.Zero(t, n, "the writer's session ended with the restart")
	// The pool's idle connections died with the server; pgxpool only
	// pings those idle for over a second before handing them out.
	pool.Reset()

	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = l.Commit(cctx, in, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()})
	require.ErrorIs(t, err, ledger.ErrLostHold)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "Commit hung on the dead connection")
	require.ErrorIs(t, in.Alive(cctx), ledger.ErrLostHold)
	got, err := l.Get(ctx, in.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusOpen, got.Status, "the intent survived the restart, open")

	at := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	p := params("d")
	p.Lookup = landedAt(at, 9)
	next, took := openTimed(t, l, p)
	require.Less(t, took, livenessBound, "Open waited for a writer the restart ended")
	got, err = l.Get(ctx, in.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusCommitted, got.Status)
	require.Equal(t, int64(9), got.RowCount)
	require.NoError(t, l.Abort(ctx, next, nil))
	noLeak(t, pool)
}
