package writestrategy_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/facadetest"
	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

const writer = "pipeline.output"

type world struct {
	t        *testing.T
	pool     *pgxpool.Pool
	ledger   *ledger.Ledger
	flags    *sink.Flags
	resolver *sink.Resolver
	lake     facade.Lakehouse
	d        *writestrategy.Dispatcher
}

// newWorld wires the dispatcher on a fresh database. lake nil means the
// real thing: iceberg-go's SQL catalog in the same database and a local
// warehouse.
func newWorld(t *testing.T, lake facade.Lakehouse) *world {
	t.Helper()
	return newWorldWith(t, lake, nil, nil, nil)
}

// newWorldWith is newWorld with a facade config (for the real facade),
// cursor options for the dispatcher and a ledger config.
func newWorldWith(t *testing.T, lake facade.Lakehouse, fc *facade.Config, co *cursor.Options, lc *ledger.Config) *world {
	t.Helper()
	return newWorldOn(t, pgtest.URL(t), lake, fc, co, lc)
}

// newWorldOn is newWorldWith on the migrated database at url.
func newWorldOn(t *testing.T, url string, lake facade.Lakehouse, fc *facade.Config, co *cursor.Options, lc *ledger.Config) *world {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	if lake == nil {
		cat, err := facade.OpenSQLCatalog(ctx, facade.CatalogConfig{DatabaseURL: url, Warehouse: t.TempDir()})
		require.NoError(t, err)
		t.Cleanup(func() { _ = cat.Close() })
		f, err := facade.New(cat, fc)
		require.NoError(t, err)
		lake = f
	}
	return wireWorld(t, pool, lake, co, lc)
}

// wireWorld wires the ledger, the writer flags (writer: the row store by
// default, Iceberg at most), the resolver and the dispatcher on pool.
func wireWorld(t *testing.T, pool *pgxpool.Pool, lake facade.Lakehouse, co *cursor.Options, lc *ledger.Config) *world {
	t.Helper()
	l, err := ledger.New(pool, lc)
	require.NoError(t, err)
	flags, err := sink.NewFlags(pool, nil)
	require.NoError(t, err)
	require.NoError(t, flags.SetWriter(context.Background(), sink.WriterFlags{WriterID: writer, Default: sink.Postgres, Max: sink.Iceberg}))
	res, err := sink.NewResolver(flags, nil)
	require.NoError(t, err)
	d, err := writestrategy.NewDispatcher(pool, &writestrategy.DispatchConfig{Ledger: l, Resolver: res, Lakehouse: lake, Workspace: "test", Cursor: co})
	require.NoError(t, err)
	return &world{t: t, pool: pool, ledger: l, flags: flags, resolver: res, lake: lake, d: d}
}

// iceberg sets the canary override of the datasets to iceberg_native.
func (w *world) iceberg(ids ...string) {
	w.t.Helper()
	require.NoError(w.t, w.flags.SetOverride(context.Background(), writer, sink.Iceberg, ids...))
	w.resolver.Invalidate()
}

func (w *world) write(s writestrategy.WriteStrategy) ([]writestrategy.WriteResult, error) {
	return w.d.Write(context.Background(), writestrategy.Request{WriterID: writer, Strategy: s})
}

// writeThrough writes with a dispatcher of the world on lake (e.g. the
// world's lakehouse wrapped with faults).
func (w *world) writeThrough(lake facade.Lakehouse, s writestrategy.WriteStrategy) ([]writestrategy.WriteResult, error) {
	return w.dispatcher(lake).Write(context.Background(), writestrategy.Request{WriterID: writer, Strategy: s})
}

func (w *world) mustWrite(s writestrategy.WriteStrategy) []writestrategy.WriteResult {
	w.t.Helper()
	res, err := w.write(s)
	require.NoError(w.t, err)
	return res
}

// checksum of a dataset's business rows, wherever it lives.
func (w *world) checksum(id string) facade.Checksum {
	w.t.Helper()
	c, err := writestrategy.DatasetChecksum(context.Background(), w.d, id)
	require.NoError(w.t, err)
	return c
}

func seedWorld(t *testing.T, w *world, n int) {
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, n)
	cats := writestrategy.Schema{Columns: []writestrategy.Column{{Name: "code", Type: "text"}, {Name: "label", Type: "text"}}}
	seedRowStore(t, w.pool, "cats", cats, `SELECT * FROM (VALUES ('a', 'Apples'), ('b', 'Bananas'), ('c', NULL)) v(code, label)`)
}

// Every strategy on both sinks with the same input gives the same business
// rows and counts, also on a second deploy.
func TestDispatchParityAcrossSinks(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	seedWorld(t, w, 2000)
	cases := map[string]func(out ...string) writestrategy.WriteStrategy{
		"transform": func(o ...string) writestrategy.WriteStrategy {
			return writestrategy.Transform{Output: o[0], Source: "orders", Steps: []writestrategy.Step{
				{Name: "f", SQL: `SELECT id, upper(name) AS name, amount * 2 AS amount2, ts FROM source WHERE category <> 'c'`}}}
		},
		"join": func(o ...string) writestrategy.WriteStrategy {
			return writestrategy.Join{Output: o[0], Left: "orders", Right: "cats", Type: writestrategy.LeftJoin,
				On: []writestrategy.JoinOn{{Left: "category", Right: "code"}}}
		},
		"split": func(o ...string) writestrategy.WriteStrategy {
			return writestrategy.Split{Source: "orders", Predicate: "amount > $1", Args: []any{1000}, Matched: o[0], Unmatched: o[1]}
		},
		"append_always": func(o ...string) writestrategy.WriteStrategy {
			return writestrategy.Deploy{Mode: writestrategy.KindAppendAlways, Source: "orders", Target: o[0]}
		},
		"append_new": func(o ...string) writestrategy.WriteStrategy {
			return writestrategy.Deploy{Mode: writestrategy.KindAppendNew, Source: "orders", Target: o[0], Key: []string{"category", "name"}}
		},
		"snapshot_replace": func(o ...string) writestrategy.WriteStrategy {
			return writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "orders", Target: o[0], Key: []string{"category", "name"}}
		},
	}
	for name, mk := range cases {
		outs := func(suffix string) []string {
			if name == "split" {
				return []string{name + "_m_" + suffix, name + "_u_" + suffix}
			}
			return []string{name + "_" + suffix}
		}
		pgOuts, iceOuts := outs("pg"), outs("ice")
		ensureOutputs(t, w.pool, append(pgOuts, iceOuts...)...)
		w.iceberg(iceOuts...)
		for run := 1; run <= 2; run++ {
			pgRes := w.mustWrite(mk(pgOuts...))
			iceRes := w.mustWrite(mk(iceOuts...))
			require.Len(t, iceRes, len(pgRes))
			for i := range pgRes {
				p, c := pgRes[i], iceRes[i]
				msg := fmt.Sprintf("%s run %d output %d", name, run, i)
				require.Equal(t, sink.Postgres, p.Sink, msg)
				require.Equal(t, sink.Iceberg, c.Sink, msg)
				require.Equal(t, p.Rows, c.Rows, msg)
				require.Equal(t, p.Skipped, c.Skipped, msg)
				require.Equal(t, p.Preserved, c.Preserved, msg)
				require.Equal(t, writestrategy.ResultColumns(p), writestrategy.ResultColumns(c), msg)
				require.NotZero(t, c.SnapshotID, msg)
				require.Equal(t, w.checksum(pgOuts[i]), w.checksum(iceOuts[i]), msg)
				ds, err := w.ledger.Dataset(context.Background(), iceOuts[i])
				require.NoError(t, err)
				require.True(t, ds.SourceWatermark.Equal(c.CommittedAt), "watermark = snapshot commit time")
			}
			switch {
			case name == "append_always" && run == 2:
				require.Equal(t, int64(2000), iceRes[0].Rows)
				require.Equal(t, int64(4000), w.checksum(iceOuts[0]).Rows)
			case name == "append_new" && run == 1:
				require.Equal(t, int64(21), iceRes[0].Rows) // 3 categories x 7 names
				require.Equal(t, int64(2000-21), iceRes[0].Skipped)
			case name == "append_new" && run == 2:
				require.Equal(t, int64(0), iceRes[0].Rows)
				require.Equal(t, int64(2000), iceRes[0].Skipped)
			case name == "snapshot_replace" && run == 2:
				require.Equal(t, int64(21), iceRes[0].Preserved)
			}
		}
	}
}

// A snapshot_replace keeps the identity (__row_id, __created_at) of rows
// whose key and content are unchanged.
func TestDispatchSnapshotReplacePreservesIdentity(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	kv := writestrategy.Schema{Columns: []writestrategy.Column{{Name: "k", Type: "integer"}, {Name: "v", Type: "text"}}}
	seedRowStore(t, w.pool, "src", kv, `SELECT * FROM (VALUES (1, 'a'), (2, 'b'), (3, 'c'), (3, 'dup')) v(k, v)`)
	ensureOutputs(t, w.pool, "dst")
	w.iceberg("dst")
	deploy := writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "src", Target: "dst", Key: []string{"k"}}
	first := w.mustWrite(deploy)[0]
	require.Equal(t, int64(3), first.Rows)
	require.Equal(t, int64(1), first.Skipped)
	before := identities(t, w.lake, "dst")

	time.Sleep(5 * time.Millisecond) // a later commit time
	seedRowStore(t, w.pool, "src", kv, `SELECT * FROM (VALUES (1, 'a'), (2, 'changed'), (3, 'c'), (4, 'new')) v(k, v)`)
	second := w.mustWrite(deploy)[0]
	require.Equal(t, int64(4), second.Rows)
	require.Equal(t, int64(2), second.Preserved)
	after := identities(t, w.lake, "dst")
	require.Equal(t, before["1/a"], after["1/a"])
	require.Equal(t, before["3/c"], after["3/c"])
	require.NotEqual(t, before["2/b"].createdAt, after["2/changed"].createdAt)
	// New rows carry this write's time (stamped while staging, just before
	// the snapshot's commit time).
	require.WithinDuration(t, second.CommittedAt, after["4/new"].createdAt, 5*time.Second)
	require.True(t, after["4/new"].createdAt.After(before["1/a"].createdAt))
}

type identity struct {
	rowID     int64
	createdAt time.Time
}

func identities(t *testing.T, lake facade.Lakehouse, id string) map[string]identity {
	t.Helper()
	out := map[string]identity{}
	for rec, err := range lake.Scan(context.Background(), id, facade.ScanOptions{}) {
		require.NoError(t, err)
		sc := rec.Schema()
		col := func(name string) int { return sc.FieldIndices(name)[0] }
		k := rec.Column(col("k")).(*array.Int32)
		v := rec.Column(col("v")).(*array.String)
		rid := rec.Column(col(facade.ColRowID)).(*array.Int64)
		ca := rec.Column(col(facade.ColCreatedAt)).(*array.Timestamp)
		for i := 0; i < int(rec.NumRows()); i++ {
			out[fmt.Sprintf("%d/%s", k.Value(i), v.Value(i))] = identity{rid.Value(i), ca.Value(i).ToTime(arrow.Microsecond)}
		}
	}
	return out
}

func TestDispatchSplitPairs(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	seedWorld(t, w, 100)
	ensureOutputs(t, w.pool, "m", "u")
	split := writestrategy.Split{Source: "orders", Predicate: "category = 'a'", Matched: "m", Unmatched: "u"}
	// Both Postgres: one combined statement, two committed intents.
	res := w.mustWrite(split)
	require.Equal(t, sink.Postgres, res[0].Sink)
	require.Equal(t, int64(100), res[0].Rows+res[1].Rows)
	require.NotEqual(t, res[0].TxnID, res[1].TxnID)
	// Mixed: refused before any work.
	w.iceberg("m")
	_, err := w.write(split)
	require.ErrorIs(t, err, sink.ErrMixedPair)
	// Both Iceberg: two snapshots.
	w.iceberg("u")
	res = w.mustWrite(split)
	require.Equal(t, sink.Iceberg, res[0].Sink)
	require.NotZero(t, res[0].SnapshotID)
	require.NotZero(t, res[1].SnapshotID)
	require.Equal(t, int64(100), res[0].Rows+res[1].Rows)
	var open int
	require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE status <> 'committed'`).Scan(&open))
	require.Zero(t, open)
}

// A split pair on Iceberg stages both outputs before committing either: a
// failing write or a veto of either output leaves both tables as they were.
func TestDispatchSplitPairStagesBoth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := facadetest.New(nil)
	t.Cleanup(lake.Close)
	veto := errors.New("no more than 70 rows per output")
	w := newWorldWith(t, lake, nil, nil, &ledger.Config{Expectations: []ledger.Expectation{
		func(ctx context.Context, tx pgx.Tx, c ledger.Commit) error {
			if c.Outcome.RowCount > 70 {
				return veto
			}
			return nil
		},
	}})
	seedWorld(t, w, 100)
	ensureOutputs(t, w.pool, "m", "u")
	w.iceberg("m", "u")
	split := writestrategy.Split{Source: "orders", Predicate: "category = 'a'", Matched: "m", Unmatched: "u"}
	w.mustWrite(split) // 33 and 67 rows
	unchanged := func(msg string) {
		t.Helper()
		require.Len(t, lake.Snapshots("m"), 1, msg)
		require.Len(t, lake.Snapshots("u"), 1, msg)
		var open int
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE status = 'open'`).Scan(&open))
		require.Zero(t, open, msg)
	}
	for _, id := range []string{"m", "u"} {
		_, err := w.writeThrough(facadetest.Wrap(lake, facadetest.Fault{Point: facadetest.MidStream, Dataset: id}), split)
		require.ErrorIs(t, err, facadetest.ErrInjected, id)
		unchanged("write of " + id + " failed")
	}
	// A veto of one output (all 100 rows in it) commits neither.
	_, err := w.write(writestrategy.Split{Source: "orders", Predicate: "true", Matched: "m", Unmatched: "u"})
	require.ErrorIs(t, err, ledger.ErrVetoed)
	require.ErrorIs(t, err, veto)
	unchanged("veto")
}

// A native upstream feeds a Postgres output and the other way round; the
// cross-join preflight reads the native source's recorded row count.
func TestDispatchNativeSources(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	seedWorld(t, w, 500)
	ensureOutputs(t, w.pool, "up", "down", "crossed")
	w.iceberg("up")
	up := w.mustWrite(writestrategy.Transform{Output: "up", Source: "orders"})[0]
	require.Equal(t, int64(500), up.Rows)
	down := w.mustWrite(writestrategy.Transform{Output: "down", Source: "up"})[0]
	require.Equal(t, sink.Postgres, down.Sink)
	require.Equal(t, int64(500), down.Rows)
	require.Equal(t, w.checksum("orders"), w.checksum("down"))
	require.Equal(t, w.checksum("orders"), w.checksum("up"))

	cross := writestrategy.Join{Output: "crossed", Left: "up", Right: "cats", Type: writestrategy.CrossJoin}
	d2, err := writestrategy.NewDispatcher(w.pool, &writestrategy.DispatchConfig{Ledger: w.ledger, Resolver: w.resolver, Lakehouse: w.lake, MaxCrossJoinRows: 1000})
	require.NoError(t, err)
	_, err = d2.Write(context.Background(), writestrategy.Request{WriterID: writer, Strategy: cross})
	require.ErrorIs(t, err, writestrategy.ErrCrossJoinTooLarge)
	require.Contains(t, err.Error(), `"up" (500 rows) and "cats" (3 rows)`, "the native source's recorded row count, not a count of the row store")
	txns, err := w.ledger.Committed(context.Background(), "crossed", time.Time{}, time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Empty(t, txns)
}

// An Iceberg sink clamps a requested delta read to a snapshot read.
func TestDispatchDeltaClamp(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	seedWorld(t, w, 50)
	ensureOutputs(t, w.pool, "pgout", "iceout")
	w.iceberg("iceout")
	delta := map[string][]string{"orders": {}} // an empty window: no rows
	req := func(out string) writestrategy.Request {
		return writestrategy.Request{WriterID: writer, Strategy: writestrategy.Transform{Output: out, Source: "orders"},
			ReadMode: incremental.ReadDelta, Delta: delta}
	}
	res, err := w.d.Write(context.Background(), req("pgout"))
	require.NoError(t, err)
	require.Equal(t, int64(0), res[0].Rows, "Postgres sink: the delta read applies")
	res, err = w.d.Write(context.Background(), req("iceout"))
	require.NoError(t, err)
	require.Equal(t, int64(50), res[0].Rows, "Iceberg sink: forced to a snapshot read")
}

func TestDispatchFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := facadetest.New(nil)
	t.Cleanup(lake.Close)
	w := newWorld(t, lake)
	seedWorld(t, w, 100)
	ensureOutputs(t, w.pool, "out")
	w.iceberg("out")
	good := writestrategy.Transform{Output: "out", Source: "orders"}
	first := w.mustWrite(good)[0]

	lastTxn := func() ledger.Txn {
		var id string
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT id::text FROM lakewrite.pipeline_build_transactions WHERE dataset_id = 'out' ORDER BY created_at DESC LIMIT 1`).Scan(&id))
		txn, err := w.ledger.Get(ctx, id)
		require.NoError(t, err)
		return txn
	}
	unchanged := func(msg string) {
		t.Helper()
		require.Len(t, lake.Snapshots("out"), 1, msg)
		ds, err := w.ledger.Dataset(ctx, "out")
		require.NoError(t, err)
		require.True(t, ds.SourceWatermark.Equal(first.CommittedAt), msg+": watermark unchanged")
		require.Equal(t, int64(100), ds.RowCount, msg)
	}

	// Compute error.
	_, err := w.write(writestrategy.Transform{Output: "out", Source: "orders", Steps: []writestrategy.Step{{Name: "z", SQL: `SELECT id / 0 AS x FROM source`}}})
	require.Error(t, err)
	require.Equal(t, ledger.StatusAborted, lastTxn().Status)
	unchanged("compute error")

	// Write error at batch 1.
	_, err = w.writeThrough(facadetest.Wrap(lake, facadetest.Fault{Point: facadetest.MidStream}), good)
	require.ErrorIs(t, err, facadetest.ErrInjected)
	require.Equal(t, ledger.StatusAborted, lastTxn().Status)
	unchanged("write error")

	// A clean commit conflict: aborted.
	_, err = w.writeThrough(facadetest.Wrap(lake, facadetest.Fault{Point: facadetest.BeforeCommit, Err: facade.ErrCommitConflict}), good)
	require.ErrorIs(t, err, facade.ErrCommitConflict)
	require.Equal(t, ledger.StatusAborted, lastTxn().Status)
	unchanged("commit conflict")

	// Commit state unknown, not landed: left open, then Recover aborts it.
	_, err = w.writeThrough(facadetest.Wrap(lake, facadetest.Fault{Point: facadetest.BeforeCommit, Err: facade.ErrCommitStateUnknown}), good)
	require.ErrorIs(t, err, ledger.ErrOutcomeUnknown)
	require.Equal(t, ledger.StatusOpen, lastTxn().Status)
	unchanged("commit unknown")
	rep, err := w.ledger.Recover(ctx, "out", time.Nanosecond, w.d.Lookup)
	require.NoError(t, err)
	require.Len(t, rep.Aborted, 1)

	// Commit state unknown but landed: Recover rolls it forward.
	// The snapshot lands, but the dispatcher hears "commit state unknown".
	_, err = w.writeThrough(facadetest.Wrap(lake, facadetest.Fault{Point: facadetest.AfterCommit}), good)
	require.ErrorIs(t, err, ledger.ErrOutcomeUnknown)
	open := lastTxn()
	require.Equal(t, ledger.StatusOpen, open.Status)
	rep, err = w.ledger.Recover(ctx, "out", time.Nanosecond, w.d.Lookup)
	require.NoError(t, err)
	require.Len(t, rep.RolledForward, 1)
	rolled, err := w.ledger.Get(ctx, open.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusCommitted, rolled.Status)
	require.Equal(t, int64(100), rolled.RowCount)
	snaps := lake.Snapshots("out")
	require.Len(t, snaps, 2)
	require.Equal(t, snaps[1].ID, rolled.SnapshotID)
}

// The ledger commit fails after the snapshot landed: the intent stays open
// (never aborted, the data is there) and Recover rolls it forward.
func TestDispatchLedgerCommitFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	seedWorld(t, w, 100)
	ensureOutputs(t, w.pool, "out")
	w.iceberg("out")
	_, err := w.pool.Exec(ctx, `
		CREATE FUNCTION lakewrite.refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'ledger down'; END $$;
		CREATE TRIGGER refuse BEFORE UPDATE ON lakewrite.pipeline_build_transactions
			FOR EACH ROW WHEN (NEW.status = 'committed') EXECUTE FUNCTION lakewrite.refuse();`)
	require.NoError(t, err)
	_, err = w.write(writestrategy.Transform{Output: "out", Source: "orders"})
	require.ErrorIs(t, err, ledger.ErrOutcomeUnknown)
	ds, err := w.ledger.Dataset(ctx, "out")
	require.NoError(t, err)
	require.True(t, ds.SourceWatermark.IsZero(), "no watermark before the ledger commit")

	_, err = w.pool.Exec(ctx, `DROP TRIGGER refuse ON lakewrite.pipeline_build_transactions`)
	require.NoError(t, err)
	rep, err := w.ledger.Recover(ctx, "out", time.Nanosecond, w.d.Lookup)
	require.NoError(t, err)
	require.Len(t, rep.RolledForward, 1)
	ds, err = w.ledger.Dataset(ctx, "out")
	require.NoError(t, err)
	require.Equal(t, int64(100), ds.RowCount)
	require.False(t, ds.SourceWatermark.IsZero())
	found, ok, err := w.lake.FindTxn(ctx, "out", rep.RolledForward[0].ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, ds.SourceWatermark.Equal(found.CommittedAt))
}

// An expectation that vetoes an Iceberg write is asked before the snapshot
// commit: the table keeps its previous snapshot, the staged files are
// deleted and the intent is aborted with the veto.
func TestDispatchVetoBeforeSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tooMany := errors.New("at most 150 rows")
	veto := func(ctx context.Context, tx pgx.Tx, c ledger.Commit) error {
		if c.Outcome.RowCount > 150 {
			return tooMany
		}
		return nil
	}
	for _, real := range []bool{true, false} {
		t.Run(fmt.Sprintf("real=%t", real), func(t *testing.T) {
			t.Parallel()
			var lake facade.Lakehouse
			if !real {
				lake = facadetest.New(nil)
			}
			w := newWorldWith(t, lake, nil, nil, &ledger.Config{Expectations: []ledger.Expectation{veto}})
			seedWorld(t, w, 100)
			ensureOutputs(t, w.pool, "out")
			w.iceberg("out")
			first := w.mustWrite(writestrategy.Transform{Output: "out", Source: "orders"})
			seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 200)

			_, err := w.write(writestrategy.Transform{Output: "out", Source: "orders"})
			require.ErrorIs(t, err, ledger.ErrVetoed)
			require.ErrorIs(t, err, tooMany)
			sum, err := w.lake.Checksum(ctx, "out", 0)
			require.NoError(t, err)
			require.EqualValues(t, 100, sum.Rows, "the vetoed rows never became visible")
			last, ok, err := w.lake.FindTxn(ctx, "out", first[0].TxnID)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, first[0].SnapshotID, last.SnapshotID)
			var status, reason string
			require.NoError(t, w.pool.QueryRow(ctx, `SELECT status, error FROM lakewrite.pipeline_build_transactions
				WHERE dataset_id = 'out' ORDER BY created_at DESC LIMIT 1`).Scan(&status, &reason))
			require.Equal(t, "aborted", status)
			require.Contains(t, reason, "at most 150 rows")
			if f, ok := w.lake.(*facade.Facade); ok {
				tbl, err := f.LoadTable(ctx, "out")
				require.NoError(t, err)
				require.Equal(t, first[0].SnapshotID, tbl.CurrentSnapshot().SnapshotID)
				require.Len(t, tbl.Metadata().Snapshots(), 1)
			}
		})
	}
}

// A dataset another writer owns (a manual table) is refused on both sinks
// before anything is computed or written.
func TestDispatchRefusesOwnedDataset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	seedWorld(t, w, 10)
	ensureOutputs(t, w.pool, "mine", "theirs")
	require.NoError(t, w.ledger.ClaimDataset(ctx, "theirs", "manual.table"))
	for _, iceberg := range []bool{false, true} {
		if iceberg {
			w.iceberg("theirs")
		}
		_, err := w.write(writestrategy.Transform{Output: "theirs", Source: "orders"})
		require.ErrorIs(t, err, ledger.ErrNotOwner, "iceberg=%t", iceberg)
		var n int
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE dataset_id = 'theirs'`).Scan(&n))
		require.Zero(t, n)
	}
	// The writer's own claim is no obstacle.
	require.NoError(t, w.ledger.ClaimDataset(ctx, "mine", writer))
	w.mustWrite(writestrategy.Transform{Output: "mine", Source: "orders"})
}

func TestDispatchBadRequests(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	seedWorld(t, w, 10)
	_, err := w.d.Write(context.Background(), writestrategy.Request{Strategy: writestrategy.Transform{Output: "x", Source: "orders"}})
	require.ErrorIs(t, err, writestrategy.ErrInvalid)
	_, err = w.write(writestrategy.Transform{Output: "missing", Source: "orders"})
	require.ErrorIs(t, err, ledger.ErrDatasetNotFound)
	_, err = w.write(nil)
	require.ErrorIs(t, err, writestrategy.ErrInvalid)
	_, err = writestrategy.NewDispatcher(w.pool, &writestrategy.DispatchConfig{})
	require.ErrorIs(t, err, writestrategy.ErrInvalid)
}

// Every Arrow batch of a write is released: the cursor's batches and the
// facade's stamped ones, on a checked allocator.
func TestDispatchReleasesArrowMemory(t *testing.T) {
	t.Parallel()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	w := newWorldWith(t, nil, &facade.Config{Allocator: mem}, &cursor.Options{Allocator: mem, BatchSize: 1000}, nil)
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 5000)
	ensureOutputs(t, w.pool, "out")
	w.iceberg("out")
	out := w.mustWrite(writestrategy.Transform{Output: "out", Source: "orders"})
	require.Equal(t, int64(5000), out[0].Rows)
	mem.AssertSize(t, 0)
}

// A canary flip (and its revert) moves an append output to the other sink
// as a full rebuild: the new sink gets the whole target, not just new rows.
func TestDispatchFlipIsFullRebuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	kv := writestrategy.Schema{Columns: []writestrategy.Column{{Name: "k", Type: "integer"}, {Name: "v", Type: "text"}}}
	seedRowStore(t, w.pool, "src", kv, `SELECT g AS k, 'v' || g AS v FROM generate_series(1, 10) g`)
	ensureOutputs(t, w.pool, "tgt")
	deploy := writestrategy.Deploy{Mode: writestrategy.KindAppendNew, Source: "src", Target: "tgt", Key: []string{"k"}}
	res := w.mustWrite(deploy)[0]
	require.Equal(t, sink.Postgres, res.Sink)
	require.Equal(t, int64(10), res.Rows)

	// Flip: 5 new source rows; Iceberg gets all 15 as one replace.
	seedRowStore(t, w.pool, "src", kv, `SELECT g AS k, 'v' || g AS v FROM generate_series(6, 15) g`)
	w.iceberg("tgt")
	res = w.mustWrite(deploy)[0]
	require.Equal(t, sink.Iceberg, res.Sink)
	require.Equal(t, "replace", string(res.Mode))
	require.Equal(t, int64(15), res.Rows)
	require.Equal(t, int64(15), w.checksum("tgt").Rows)
	ds, err := w.ledger.Dataset(ctx, "tgt")
	require.NoError(t, err)
	require.Equal(t, int64(15), ds.RowCount)

	// Then appends again, on Iceberg.
	seedRowStore(t, w.pool, "src", kv, `SELECT g AS k, 'v' || g AS v FROM generate_series(14, 17) g`)
	res = w.mustWrite(deploy)[0]
	require.Equal(t, "append", string(res.Mode))
	require.Equal(t, int64(2), res.Rows)
	require.Equal(t, int64(2), res.Skipped)

	// Revert: back on Postgres as a full rebuild from the Iceberg table.
	require.NoError(t, func() error { _, err := w.flags.ClearOverride(ctx, writer, "tgt"); return err }())
	w.resolver.Invalidate()
	res = w.mustWrite(deploy)[0]
	require.Equal(t, sink.Postgres, res.Sink)
	require.Equal(t, "replace", string(res.Mode))
	require.Equal(t, int64(17), res.Rows)
	require.Len(t, rowStoreRows(t, w.pool, "tgt"), 17)
}
