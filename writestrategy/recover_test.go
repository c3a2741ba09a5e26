package writestrategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/facadetest"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// Through PgBouncer in transaction mode, with the default configuration
// (a lease holds each intent), a dead writer's intent (opened, never
// renewed) is recovered by the next write once its lease lapsed, long
// before RecoverAfter, on either sink and on every write path (a
// single-output replace, an append, a split pair), with its flags
// uncached; no write is refused for the pooler, and no advisory lock is
// left on any server connection.
func TestDispatchThroughTransactionPoolingRecoversOnEveryPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	paths := []struct {
		name     string
		strategy writestrategy.WriteStrategy
		dead     string // the output the dead writer held
		mode     facade.WriteMode
	}{
		{"replace", writestrategy.Transform{Output: "r1", Source: "orders"}, "r1", facade.Replace},
		{"append", writestrategy.Deploy{Mode: writestrategy.KindAppendAlways, Source: "orders", Target: "a1"}, "a1", facade.Append},
		{"split", writestrategy.Split{Source: "orders", Predicate: "amount >= $1", Args: []any{5}, Matched: "m1", Unmatched: "u1"}, "u1", facade.Replace},
	}
	for _, sk := range []sink.Sink{sink.Postgres, sink.Iceberg} {
		t.Run(string(sk), func(t *testing.T) {
			t.Parallel()
			url := pgtest.URL(t)
			pool, err := pgxpool.New(ctx, pgtest.PgBouncer(t, url, "transaction"))
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			cat, err := facade.OpenSQLCatalog(ctx, facade.CatalogConfig{DatabaseURL: url, Warehouse: t.TempDir()})
			require.NoError(t, err)
			t.Cleanup(func() { _ = cat.Close() })
			f, err := facade.New(cat, nil)
			require.NoError(t, err)
			w := wireWorld(t, pool, f, nil, &ledger.Config{Lease: 300 * time.Millisecond, WaitTimeout: 10 * time.Second})
			direct, err := pgxpool.New(ctx, url) // the fixtures' own ledger holds session locks
			require.NoError(t, err)
			t.Cleanup(direct.Close)
			seedRowStore(t, direct, "orders", ordersSchema, ordersSQL, 10)
			ensureOutputs(t, direct, "r1", "a1", "m1", "u1")
			if sk == sink.Iceberg {
				w.iceberg("r1", "a1", "m1", "u1")
			}
			d, err := writestrategy.NewDispatcher(w.pool, &writestrategy.DispatchConfig{Ledger: w.ledger, Resolver: w.resolver,
				Lakehouse: w.lake, Workspace: "test", RecoverAfter: time.Hour})
			require.NoError(t, err)
			for _, p := range paths {
				write := func() ([]writestrategy.WriteResult, error) {
					w.resolver.Invalidate() // uncached flags: read with the output's row
					return d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: p.strategy})
				}
				_, err = write()
				require.NoError(t, err, p.name)

				// A writer that died with its intent open: its lease is no
				// longer renewed.
				dead, err := w.ledger.Open(ctx, ledger.OpenParams{DatasetID: p.dead, WriterID: writer, Sink: sk, WriteMode: p.mode})
				require.NoError(t, err, p.name)
				t.Cleanup(dead.Release)
				res, err := write()
				require.NoError(t, err, p.name)
				for _, r := range res {
					require.Equal(t, sk, r.Sink, p.name)
				}
				txn, err := w.ledger.Get(ctx, dead.ID)
				require.NoError(t, err)
				require.Equal(t, ledger.StatusAborted, txn.Status, "%s: the dead writer's intent was reconciled", p.name)
				require.Equal(t, map[string]int{"committed/" + sinkName(sk): 2, "aborted/" + sinkName(sk): 1}, intentRows(t, w, p.dead), p.name)
			}
			var open, locked int
			require.NoError(t, direct.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE status = 'open'`).Scan(&open))
			require.Zero(t, open)
			require.NoError(t, direct.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE lock_key IS NOT NULL
				AND writer_id = $1`, writer).Scan(&locked))
			require.Zero(t, locked, "no intent of the pooled writers holds a session lock")
			require.NoError(t, direct.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
				AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&open))
			require.Zero(t, open, "no advisory lock outlives its intent")
		})
	}
}

// sinkName is a sink as the ledger stores it.
func sinkName(s sink.Sink) string {
	if s == sink.Iceberg {
		return "iceberg_native"
	}
	return "pg"
}

// A write whose intent is held by a lease and taken over by another
// process mid-stream (what a reconciler's claim does once the lease
// lapsed: it bumps the intent's attempt) is fenced: on a catalog in the
// ledger's database the pointer swap and the ledger commit share one
// transaction, the ledger commit is refused with an error matching
// ledger.ErrFenced, and nothing of the write becomes visible.
func TestLeaseTakeoverFencesIcebergCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPGWorld(t, nil, &ledger.Config{Liveness: ledger.LivenessLease})
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 100)
	ensureOutputs(t, w.pool, "out")
	w.iceberg("out")
	copyOrders := writestrategy.Transform{Output: "out", Source: "orders"}
	w.mustWrite(copyOrders)
	before := w.head("out")
	ds, err := w.ledger.Dataset(ctx, "out")
	require.NoError(t, err)

	lake := facadetest.Wrap(w.f, facadetest.Fault{Point: facadetest.MidStream, Dataset: "out", AfterRows: 10, Times: 1,
		Do: func(ctx context.Context) error {
			_, err := w.pool.Exec(ctx, `UPDATE lakewrite.pipeline_build_transactions SET attempt = attempt + 1
				WHERE dataset_id = 'out' AND status = 'open'`)
			return err
		}})
	_, err = w.dispatcher(lake).Write(ctx, writestrategy.Request{WriterID: writer, Strategy: copyOrders})
	require.ErrorIs(t, err, ledger.ErrFenced)
	require.Equal(t, before, w.head("out"), "no snapshot of the fenced write is visible")
	after, err := w.ledger.Dataset(ctx, "out")
	require.NoError(t, err)
	require.Equal(t, ds.RowCount, after.RowCount)
	require.Equal(t, ds.SourceWatermark, after.SourceWatermark)
}
