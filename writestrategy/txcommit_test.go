package writestrategy_test

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/facadetest"
	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// pgWorld is a world whose Iceberg catalog is the Postgres catalog on the
// ledger's own pool: the dispatcher commits snapshots and intents in one
// transaction.
type pgWorld struct {
	*world
	f         *facade.Facade
	warehouse string
}

func newPGWorld(t *testing.T, fc *facade.Config, lc *ledger.Config) *pgWorld {
	t.Helper()
	return newPGWorldOn(t, pgtest.URL(t), t.TempDir(), fc, lc)
}

func newPGWorldOn(t *testing.T, url, warehouse string, fc *facade.Config, lc *ledger.Config) *pgWorld {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	cat, err := facade.NewPostgresCatalog(ctx, pool, facade.CatalogConfig{Warehouse: warehouse})
	require.NoError(t, err)
	f, err := facade.New(cat, fc)
	require.NoError(t, err)
	return &pgWorld{world: wireWorld(t, pool, f, nil, lc), f: f, warehouse: warehouse}
}

// dispatcher returns a dispatcher of the world writing through lake.
func (w *world) dispatcher(lake facade.Lakehouse) *writestrategy.Dispatcher {
	w.t.Helper()
	d, err := writestrategy.NewDispatcher(w.pool, &writestrategy.DispatchConfig{Ledger: w.ledger, Resolver: w.resolver, Lakehouse: lake, Workspace: "test"})
	require.NoError(w.t, err)
	return d
}

// head is the current snapshot id of a dataset's table (0: none).
func (w *pgWorld) head(dataset string) int64 {
	w.t.Helper()
	tbl, err := w.f.LoadTable(context.Background(), dataset)
	if errors.Is(err, facade.ErrTableNotFound) {
		return 0
	}
	require.NoError(w.t, err)
	if s := tbl.CurrentSnapshot(); s != nil {
		return s.SnapshotID
	}
	return 0
}

// requireAgree checks that the ledger and the Iceberg table of a dataset
// tell the same story without any reconciliation: every committed Iceberg
// intent's snapshot is in the table, no open or aborted intent's snapshot
// is, and the dataset's row count is the table's.
func requireAgree(t *testing.T, pool *pgxpool.Pool, lake facade.Lakehouse, dataset, msg string) {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT id::text, status, coalesce(snapshot_id, 0) FROM lakewrite.pipeline_build_transactions
		WHERE dataset_id = $1 AND sink = $2 ORDER BY committed_at NULLS FIRST, created_at`, dataset, sink.Iceberg)
	require.NoError(t, err)
	type txn struct {
		id, status string
		snap       int64
	}
	txns, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (txn, error) {
		var x txn
		return x, r.Scan(&x.id, &x.status, &x.snap)
	})
	require.NoError(t, err)
	var last int64
	for _, x := range txns {
		res, found, err := lake.FindTxn(ctx, dataset, x.id)
		require.NoError(t, err, msg)
		if x.status == string(ledger.StatusCommitted) {
			require.True(t, found, "%s: committed intent %s has no snapshot", msg, x.id)
			require.Equal(t, x.snap, res.SnapshotID, "%s: intent %s", msg, x.id)
			last = x.snap
		} else {
			require.False(t, found, "%s: %s intent %s has a snapshot", msg, x.status, x.id)
		}
	}
	if last == 0 {
		return
	}
	l, err := ledger.New(pool, nil)
	require.NoError(t, err)
	ds, err := l.Dataset(ctx, dataset)
	require.NoError(t, err)
	sum, err := lake.Checksum(ctx, dataset, 0)
	require.NoError(t, err)
	require.Equal(t, ds.RowCount, sum.Rows, "%s: ledger row count = rows in the table", msg)
}

// parquetFiles counts the data files under the warehouse.
func parquetFiles(t *testing.T, root string) int {
	t.Helper()
	n := 0
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			n++
		}
		return err
	}))
	return n
}

// On the Postgres catalog a write's snapshot and its ledger commit land in
// one transaction: the result's snapshot is the table's head and the
// intent's snapshot, for one output and for a split pair.
func TestTxCommitLandsTogether(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPGWorld(t, nil, nil)
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 300)
	ensureOutputs(t, w.pool, "out", "big", "small")
	w.iceberg("out", "big", "small")
	for range 2 {
		res := w.mustWrite(writestrategy.Transform{Output: "out", Source: "orders"})
		require.Equal(t, w.head("out"), res[0].SnapshotID)
		txn, err := w.ledger.Get(ctx, res[0].TxnID)
		require.NoError(t, err)
		require.Equal(t, ledger.StatusCommitted, txn.Status)
		require.Equal(t, res[0].SnapshotID, txn.SnapshotID)
		require.True(t, txn.CommittedAt.Equal(res[0].CommittedAt))
		requireAgree(t, w.pool, w.lake, "out", "transform")
	}
	require.Equal(t, w.checksum("orders"), w.checksum("out"))
	split := writestrategy.Split{Source: "orders", Predicate: "amount >= $1", Args: []any{20}, Matched: "big", Unmatched: "small"}
	res := w.mustWrite(split)
	require.Len(t, res, 2)
	for _, r := range res {
		require.Equal(t, w.head(r.DatasetID), r.SnapshotID)
		requireAgree(t, w.pool, w.lake, r.DatasetID, "split")
	}
	big, small := w.checksum("big"), w.checksum("small")
	require.EqualValues(t, 300, big.Rows+small.Rows)
	res = w.mustWrite(writestrategy.Deploy{Mode: writestrategy.KindAppendAlways, Source: "orders", Target: "out"})
	require.Equal(t, w.head("out"), res[0].SnapshotID)
	requireAgree(t, w.pool, w.lake, "out", "append")
	require.Equal(t, 2*w.checksum("orders").Rows, w.checksum("out").Rows)
}

// A failure after the pointer swap and before the transaction commits (a
// fault right after the swap, the intent fenced by a sweeper, a ledger
// veto), on one output or on either output of a split pair, leaves neither
// snapshot visible nor any intent committed, deletes the staged data files,
// and the next write goes through.
func TestTxCommitFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	split := writestrategy.Split{Source: "orders", Predicate: "amount >= $1", Args: []any{20}, Matched: "big", Unmatched: "small"}
	transform := writestrategy.Transform{Output: "out", Source: "orders"}
	fence := func(pool *pgxpool.Pool, dataset string) func(context.Context) error {
		return func(ctx context.Context) error {
			// A sweeper claims the intent while the swap waits uncommitted.
			_, err := pool.Exec(ctx, `UPDATE lakewrite.pipeline_build_transactions SET attempt = attempt + 1
				WHERE dataset_id = $1 AND status = 'open'`, dataset)
			return err
		}
	}
	cases := []struct {
		name     string
		strategy writestrategy.WriteStrategy
		dataset  string // where the fault fires
		kind     string // fault, fence, veto
	}{
		{"fault_single", transform, "out", "fault"},
		{"fault_split_first", split, "big", "fault"},
		{"fault_split_second", split, "small", "fault"},
		{"fence_single", transform, "out", "fence"},
		{"fence_split_second", split, "small", "fence"},
		{"veto_split_second", split, "small", "veto"},
		{"veto_single", transform, "out", "veto"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var veto atomic.Bool
			lc := &ledger.Config{Expectations: []ledger.Expectation{func(_ context.Context, _ pgx.Tx, cm ledger.Commit) error {
				if veto.Load() && cm.Intent.DatasetID == c.dataset {
					return errors.New("vetoed by the test")
				}
				return nil
			}}}
			w := newPGWorld(t, nil, lc)
			seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 300)
			outs := c.strategy.Outputs()
			ensureOutputs(t, w.pool, outs...)
			w.iceberg(outs...)
			w.mustWrite(c.strategy)
			seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 500)
			before := map[string]int64{}
			sums := map[string]facade.Checksum{}
			for _, o := range outs {
				before[o], sums[o] = w.head(o), w.checksum(o)
			}
			files := parquetFiles(t, w.warehouse)

			injected := errors.New("injected after the swap")
			action := func(context.Context) error { return injected }
			switch c.kind {
			case "fence":
				action = fence(w.pool, c.dataset)
			case "veto":
				veto.Store(true)
				action = func(context.Context) error { return nil }
			}
			var hits atomic.Int32
			lake := facadetest.Wrap(w.f, facadetest.Fault{Point: facadetest.AfterCommit, Dataset: c.dataset, Times: 1,
				Do: func(ctx context.Context) error { hits.Add(1); return action(ctx) }})
			_, err := w.dispatcher(lake).Write(ctx, writestrategy.Request{WriterID: writer, Strategy: c.strategy})
			require.Error(t, err)
			require.NotErrorIs(t, err, ledger.ErrOutcomeUnknown)
			switch c.kind {
			case "fault":
				require.ErrorIs(t, err, injected)
			case "fence":
				require.ErrorIs(t, err, ledger.ErrFenced)
			case "veto":
				require.ErrorIs(t, err, ledger.ErrVetoed)
			}
			require.Equal(t, int32(1), hits.Load())
			for _, o := range outs {
				require.Equal(t, before[o], w.head(o), "%s: head unchanged", o)
				require.Equal(t, sums[o], w.checksum(o), "%s: contents unchanged", o)
				requireAgree(t, w.pool, w.lake, o, c.name)
				var committed int
				require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions
					WHERE dataset_id = $1 AND status = 'committed' AND sink = $2`, o, sink.Iceberg).Scan(&committed))
				require.Equal(t, 1, committed, "%s: only the first write committed", o)
			}
			require.Equal(t, files, parquetFiles(t, w.warehouse), "the staged data files were deleted")

			veto.Store(false)
			res := w.mustWrite(c.strategy)
			for _, r := range res {
				require.Equal(t, w.head(r.DatasetID), r.SnapshotID)
				requireAgree(t, w.pool, w.lake, r.DatasetID, c.name+": next write")
			}
		})
	}
}

// When the transaction fails at COMMIT itself (here a deferred constraint
// trigger on the ledger), the dispatcher learns from the ledger that it
// rolled back: the write fails cleanly (not an unknown outcome), the intents
// are aborted, the staged data files deleted, both tables of the split pair
// unchanged.
func TestTxCommitFailsAtCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPGWorld(t, nil, nil)
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 300)
	split := writestrategy.Split{Source: "orders", Predicate: "amount >= $1", Args: []any{20}, Matched: "big", Unmatched: "small"}
	ensureOutputs(t, w.pool, "big", "small")
	w.iceberg("big", "small")
	w.mustWrite(split)
	_, err := w.pool.Exec(ctx, `
		CREATE TABLE fail_at_commit (dataset_id text PRIMARY KEY);
		CREATE FUNCTION fail_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.status = 'committed' AND EXISTS (SELECT 1 FROM fail_at_commit f WHERE f.dataset_id = NEW.dataset_id) THEN
				RAISE EXCEPTION 'injected failure at commit';
			END IF;
			RETURN NULL;
		END $$;
		CREATE CONSTRAINT TRIGGER fail_at_commit AFTER UPDATE ON lakewrite.pipeline_build_transactions
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fail_at_commit();
		INSERT INTO fail_at_commit VALUES ('small')`)
	require.NoError(t, err)
	before := map[string]int64{"big": w.head("big"), "small": w.head("small")}
	files := parquetFiles(t, w.warehouse)

	_, err = w.write(split)
	require.ErrorContains(t, err, "injected failure at commit")
	require.NotErrorIs(t, err, ledger.ErrOutcomeUnknown)
	for _, o := range split.Outputs() {
		require.Equal(t, before[o], w.head(o), o)
		requireAgree(t, w.pool, w.lake, o, "failed at commit")
		var open int
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions
			WHERE dataset_id = $1 AND status = 'open'`, o).Scan(&open))
		require.Zero(t, open, "%s: the intent was aborted", o)
	}
	require.Equal(t, files, parquetFiles(t, w.warehouse), "the staged data files were deleted")

	_, err = w.pool.Exec(ctx, `DELETE FROM fail_at_commit`)
	require.NoError(t, err)
	for _, r := range w.mustWrite(split) {
		require.Equal(t, w.head(r.DatasetID), r.SnapshotID)
		requireAgree(t, w.pool, w.lake, r.DatasetID, "next write")
	}
}

// commitPaths are the ways a write's commit can go: on the held session of
// an intent (a session lock) or on a pool connection (a lease), with or
// without expectations.
var commitPaths = []struct {
	name     string
	liveness ledger.Liveness
	expect   bool
}{
	{"held", ledger.LivenessAuto, false},
	{"pool", ledger.LivenessLease, false},
	{"expectations", ledger.LivenessAuto, true},
}

// The Iceberg arm's commit on a catalog in the ledger's database, whichever
// way it goes: on the held session of an intent (a session lock: the owner's
// ledger commit ends the transaction) or on a pool connection (a lease), with
// or without expectations, one output or a split pair. Every snapshot is
// its intent's, nothing stays held (no connection, no advisory lock); a
// veto writes nothing and leaves no intent open.
func TestTxCommitPaths(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range commitPaths {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var veto atomic.Bool
			lc := &ledger.Config{Liveness: tc.liveness}
			if tc.expect {
				lc.Expectations = []ledger.Expectation{func(context.Context, pgx.Tx, ledger.Commit) error {
					if veto.Load() {
						return errors.New("vetoed")
					}
					return nil
				}}
			}
			w := newPGWorld(t, nil, lc)
			seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 100)
			ensureOutputs(t, w.pool, "one", "m", "u")
			w.iceberg("one", "m", "u")
			held := func() {
				t.Helper()
				require.Zero(t, w.pool.Stat().AcquiredConns(), "no connection held")
				var locks int
				require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
					AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&locks))
				require.Zero(t, locks, "no hold left")
			}
			check := func(res []writestrategy.WriteResult) {
				t.Helper()
				for _, r := range res {
					require.Equal(t, w.head(r.DatasetID), r.SnapshotID)
					txn, err := w.ledger.Get(ctx, r.TxnID)
					require.NoError(t, err)
					require.Equal(t, ledger.StatusCommitted, txn.Status)
					require.Equal(t, r.SnapshotID, txn.SnapshotID)
					requireAgree(t, w.pool, w.lake, r.DatasetID, tc.name)
				}
				held()
			}
			res := w.mustWrite(writestrategy.Transform{Output: "one", Source: "orders"})
			require.EqualValues(t, 100, res[0].Rows)
			check(res)
			split := writestrategy.Split{Source: "orders", Predicate: "amount >= $1", Args: []any{20}, Matched: "m", Unmatched: "u"}
			res = w.mustWrite(split)
			require.EqualValues(t, 100, res[0].Rows+res[1].Rows)
			check(res)
			if !tc.expect {
				return
			}
			veto.Store(true)
			before := map[string]int64{"m": w.head("m"), "u": w.head("u")}
			files := parquetFiles(t, w.warehouse)
			_, err := w.write(split)
			require.ErrorIs(t, err, ledger.ErrVetoed)
			require.NotErrorIs(t, err, ledger.ErrOutcomeUnknown)
			for _, o := range split.Outputs() {
				require.Equal(t, before[o], w.head(o), "a veto writes nothing")
				requireAgree(t, w.pool, w.lake, o, "vetoed")
			}
			require.Equal(t, files, parquetFiles(t, w.warehouse), "the staged data files were deleted")
			var open int
			require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE status = 'open'`).Scan(&open))
			require.Zero(t, open)
			held()
		})
	}
}

// TestTxCommitFirstWriteInRepeatableRead: the first write of a warehouse
// whose transaction runs REPEATABLE READ (a declared output's run, a
// shadow write) creates the Iceberg namespace outside its transaction,
// after its snapshot was taken; the table is still created and committed
// in the transaction.
func TestTxCommitFirstWriteInRepeatableRead(t *testing.T) {
	t.Parallel()
	w := newPGWorld(t, nil, nil)
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 300)
	ensureOutputs(t, w.pool, "by_id")
	w.iceberg("by_id")
	res := w.mustWrite(writestrategy.Transform{Output: "by_id", Source: "orders",
		Steps:   []writestrategy.Step{{Name: "g", SQL: `SELECT id, count(*) AS n FROM source GROUP BY id`}},
		Depends: &incremental.Dependency{Key: []string{"id"}, Sources: map[string][]string{"orders": {"id"}}}})
	require.Equal(t, w.head("by_id"), res[0].SnapshotID)
	require.Equal(t, incremental.RefreshFull, res[0].Refresh.Mode)
	requireAgree(t, w.pool, w.lake, "by_id", "declared")
	require.EqualValues(t, 300, w.checksum("by_id").Rows)
}
