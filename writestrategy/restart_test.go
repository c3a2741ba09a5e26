package writestrategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade/facadetest"
	"github.com/lakewrite/lakewrite/internal/pgcluster"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// Postgres restarts (every session ends) in the middle of an Iceberg
// write: the writer errors promptly, nothing is visible, and the next write
// of the dataset, with the default configuration, reconciles the intent
// the restart left open by itself and writes.
//
// The restart is a crash restart of a cluster of the test's own: SIGKILL of
// one backend makes the postmaster end every session and reinitialise
// shared memory, as pg_ctl restart -m immediate does, without the
// postmaster exiting (the cluster's supervisor removes the cluster when it
// exits).
func TestPostgresRestartDuringWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, cluster := newCrashableWorld(t)
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 3000)
	ensureOutputs(t, w.pool, "out")
	w.iceberg("out")
	copyOrders := writestrategy.Transform{Output: "out", Source: "orders"}
	w.mustWrite(copyOrders)
	before := w.checksum("out")

	reached, resume := make(chan struct{}), make(chan struct{})
	lake := facadetest.Wrap(w.lake, facadetest.Fault{Point: facadetest.MidStream, AfterRows: 100, Times: 1,
		Do: func(ctx context.Context) error {
			close(reached)
			<-resume
			return nil // go on streaming, from a server that restarted
		}})
	dA, err := writestrategy.NewDispatcher(w.pool, &writestrategy.DispatchConfig{Ledger: w.ledger, Resolver: w.resolver, Lakehouse: lake, Workspace: "test"})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := dA.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: copyOrders})
		done <- err
	}()
	select {
	case <-reached:
	case err := <-done:
		t.Fatalf("the write ended before its fault point: %v", err)
	}
	var dead string
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT id::text FROM lakewrite.pipeline_build_transactions
		WHERE dataset_id = 'out' AND status = 'open'`).Scan(&dead))

	require.NoError(t, cluster.CrashRestart(ctx))
	close(resume)
	t0 := time.Now()
	select {
	case err := <-done:
		require.Error(t, err, "the write cannot succeed across the restart")
	case <-time.After(time.Minute):
		t.Fatal("the writer did not error within a minute of the restart")
	}
	t.Logf("the writer errored %s after the restart", time.Since(t0).Round(time.Millisecond))
	// pgxpool checks a connection idle for more than a second before
	// handing it out: the next write comes a moment later.
	time.Sleep(1100 * time.Millisecond)

	require.Equal(t, before, w.checksum("out"), "nothing visible")
	res, took, err := timedWrite(w.d, copyOrders)
	require.NoError(t, err, "the next write (after %s)", took)
	require.Less(t, took, 20*time.Second)
	require.EqualValues(t, 3000, res[0].Rows)
	txn, err := w.ledger.Get(ctx, dead)
	require.NoError(t, err)
	require.NotEqual(t, ledger.StatusOpen, txn.Status, "the intent the restart left open was reconciled")
	require.Equal(t, w.checksum("orders"), w.checksum("out"))
}

// Writes running at once on a pool too small for them (each open intent
// holds a pool connection) never wait on each other for ever: a write that
// cannot get a connection fails with a clear error after its bound and
// leaves nothing open, and the others go through.
func TestSmallPoolDoesNotDeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 3
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	w := newWorldOn(t, url, nil, nil, nil, &ledger.Config{WaitTimeout: time.Second})
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 500)
	outs := []string{"a1", "a2", "b1", "b2", "c1", "c2"}
	ensureOutputs(t, w.pool, outs...)
	w.iceberg(outs...)
	l, err := ledger.New(pool, &ledger.Config{WaitTimeout: time.Second})
	require.NoError(t, err)
	d, err := writestrategy.NewDispatcher(pool, &writestrategy.DispatchConfig{Ledger: l, Resolver: w.resolver, Lakehouse: w.lake, Workspace: "test"})
	require.NoError(t, err)

	errs := make(chan error, 3)
	for _, p := range [][2]string{{"a1", "a2"}, {"b1", "b2"}, {"c1", "c2"}} {
		go func() {
			_, err := d.Write(ctx, writestrategy.Request{WriterID: writer,
				Strategy: writestrategy.Split{Source: "orders", Predicate: "amount > 500", Matched: p[0], Unmatched: p[1]}})
			errs <- err
		}()
	}
	ok := 0
	for range 3 {
		select {
		case err := <-errs:
			if err == nil {
				ok++
			}
		case <-time.After(3 * time.Minute):
			t.Fatal("writes on a small pool are waiting on each other")
		}
	}
	require.Positive(t, ok)
	var open int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE status = 'open'`).Scan(&open))
	require.Zero(t, open)
	require.Zero(t, pool.Stat().AcquiredConns())
}

// newCrashableWorld is a world on a migrated cluster of the test's own
// (synchronous commit on), which the test can crash-restart.
func newCrashableWorld(t *testing.T) (*world, *pgcluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{Settings: map[string]string{"synchronous_commit": "on"}})
	require.NoError(t, err)
	t.Cleanup(cluster.Stop)
	conn, err := pgx.Connect(ctx, cluster.URL("postgres"))
	require.NoError(t, err)
	_, err = ledger.Migrate(ctx, conn, "")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	return newWorldOn(t, cluster.URL("postgres"), nil, nil, nil, nil), cluster
}
