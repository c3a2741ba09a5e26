package writestrategy_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"iter"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/facadetest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

var (
	shadowRuns    = flag.Int("shadow-runs", 100, "shadow: writes of each dataset in TestShadowRuns")
	shadowRowsPer = flag.Int("shadow-rows", 50, "shadow: source rows of TestShadowRuns' first write (each later write adds 1)")
)

// shadow sets the canary override of the datasets to shadow.
func (w *world) shadow(ids ...string) {
	w.t.Helper()
	require.NoError(w.t, w.flags.SetOverride(context.Background(), writer, sink.Shadow, ids...))
	w.resolver.Invalidate()
}

func (w *world) shadowStatus(id string) writestrategy.ShadowStatus {
	w.t.Helper()
	st, err := w.d.ShadowStatus(context.Background(), id)
	require.NoError(w.t, err)
	return st
}

// A transform and a Tier B strategy (append_new) in shadow through many
// runs: each run is a Postgres write of record plus an Iceberg replace of
// the same rows, recorded as matched with both checksums; readers keep
// reading Postgres. Promotion then flips both, and the next writes go to
// Iceberg with the same contents.
func TestShadowRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	n := *shadowRowsPer
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, n)
	ensureOutputs(t, w.pool, "st", "sb")
	w.shadow("st", "sb")
	transform := writestrategy.Transform{Output: "st", Source: "orders", Steps: []writestrategy.Step{
		{Name: "f", SQL: `SELECT id, upper(name) AS name, amount, category, ts FROM source`}}}
	tierB := writestrategy.Deploy{Mode: writestrategy.KindAppendNew, Source: "orders", Target: "sb", Key: []string{"id"}}
	for i := 1; i <= *shadowRuns; i++ {
		for _, s := range []writestrategy.WriteStrategy{transform, tierB} {
			out := s.Outputs()[0]
			res := w.mustWrite(s)
			require.Equal(t, sink.Postgres, res[0].Sink)
			ds, err := w.ledger.Dataset(ctx, out)
			require.NoError(t, err)
			require.Equal(t, sink.Postgres, ds.Sink, "readers still read Postgres")
			st := w.shadowStatus(out)
			require.Equal(t, int64(i), st.Runs, "%s run %d", out, i)
			require.Equal(t, int64(i), st.Matching, "%s run %d: %+v", out, i, st.Last)
			require.Nil(t, st.LastMismatch)
			require.Equal(t, res[0].TxnID, st.Last.TxnID)
			require.Equal(t, "matched", st.Last.Status)
			require.NotZero(t, writestrategy.RunSnapshotID(st.Last))
			require.Equal(t, w.checksum(out), st.Last.Postgres, "%s run %d: the row store", out, i)
			require.Equal(t, st.Last.Postgres, st.Last.Iceberg)
			require.Equal(t, st.Last.Postgres, lakeChecksum(t, w, out), "the table's current snapshot")
			require.False(t, writestrategy.RunFinishedAt(st.Last).Before(st.Last.StartedAt))
			if out == "sb" {
				require.Equal(t, w.checksum("orders"), st.Last.Postgres, "append_new: every row once")
			}
		}
		seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, n+i)
	}
	for _, out := range []string{"st", "sb"} {
		before := w.checksum(out)
		require.NoError(t, w.d.Promote(ctx, writer, out))
		ds, err := w.ledger.Dataset(ctx, out)
		require.NoError(t, err)
		require.Equal(t, sink.Iceberg, ds.Sink)
		require.Equal(t, before, w.checksum(out), "promoted: same contents, now read from Iceberg")
	}
	w.resolver.Invalidate()
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, n+*shadowRuns+3)
	for _, s := range []writestrategy.WriteStrategy{transform, tierB} {
		res := w.mustWrite(s)
		require.Equal(t, sink.Iceberg, res[0].Sink)
	}
	require.Equal(t, w.checksum("orders"), w.checksum("sb"))
	require.ErrorIs(t, w.d.Promote(ctx, writer, "st"), writestrategy.ErrNotPromoted, "already on Iceberg")
}

// mangler is a Lakehouse whose writes of one dataset replace every value of
// one text column while on is set: an Iceberg side that disagrees with
// Postgres on that column only.
type mangler struct {
	facade.Lakehouse
	dataset, column string
	on              atomic.Bool
}

func (m *mangler) Stage(ctx context.Context, t facade.Target, req facade.WriteRequest) (facade.Staged, error) {
	if t.DatasetID == m.dataset && m.on.Load() {
		req.Rows = mangle(req.Rows, req.Schema, m.column)
	}
	return m.Lakehouse.Stage(ctx, t, req)
}

func (m *mangler) Write(ctx context.Context, t facade.Target, req facade.WriteRequest) (facade.CommitResult, error) {
	st, err := m.Stage(ctx, t, req)
	if err != nil {
		return facade.CommitResult{}, err
	}
	return st.Commit(ctx)
}

func mangle(rows iter.Seq2[arrow.RecordBatch, error], sc *arrow.Schema, column string) iter.Seq2[arrow.RecordBatch, error] {
	idx := sc.FieldIndices(column)[0]
	return func(yield func(arrow.RecordBatch, error) bool) {
		for rec, err := range rows {
			if err != nil {
				yield(nil, err)
				return
			}
			b := array.NewStringBuilder(memory.DefaultAllocator)
			for i := 0; i < int(rec.NumRows()); i++ {
				b.Append(fmt.Sprintf("mangled %d", i))
			}
			col := b.NewArray()
			cols := append([]arrow.Array(nil), rec.Columns()...)
			cols[idx] = col
			out := array.NewRecordBatch(rec.Schema(), cols, rec.NumRows())
			col.Release()
			b.Release()
			more := yield(out, nil)
			out.Release()
			if !more {
				return
			}
		}
	}
}

// A column mangled on the Iceberg side is found by the parity check of
// every run (with the column named), blocks the automatic promotion and a
// manual one; once the sinks agree again, the policy's matching runs
// promote the dataset by themselves.
func TestShadowMismatchBlocksPromotion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := newWorld(t, nil)
	m := &mangler{Lakehouse: base.lake, dataset: "out", column: "name"}
	m.on.Store(true)
	d, err := writestrategy.NewDispatcher(base.pool, &writestrategy.DispatchConfig{Ledger: base.ledger, Resolver: base.resolver,
		Lakehouse: m, Workspace: "test", Shadow: writestrategy.ShadowConfig{PromoteAfterRuns: 2}})
	require.NoError(t, err)
	w := *base
	w.d = d
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 40)
	ensureOutputs(t, w.pool, "out")
	w.shadow("out")
	copyOrders := writestrategy.Transform{Output: "out", Source: "orders"}
	for i := 1; i <= 3; i++ {
		res := w.mustWrite(copyOrders)
		require.Equal(t, sink.Postgres, res[0].Sink)
		st := w.shadowStatus("out")
		require.Equal(t, int64(i), st.Runs)
		require.Zero(t, st.Matching)
		require.NotNil(t, st.LastMismatch, "%+v", st.Last)
		require.Equal(t, "mismatch", st.LastMismatch.Status)
		require.Equal(t, []string{"name"}, st.LastMismatch.Columns)
		require.Equal(t, []string{"postgres: id=1", "postgres: id=10", "postgres: id=11", "iceberg: id=1", "iceberg: id=10", "iceberg: id=11"},
			st.LastMismatch.Examples, "the rows on one side only, by their first column")
		require.Equal(t, res[0].TxnID, st.LastMismatch.TxnID)
		require.Equal(t, st.LastMismatch.Postgres.Rows, st.LastMismatch.Iceberg.Rows)
		require.NotEqual(t, st.LastMismatch.Postgres, st.LastMismatch.Iceberg)
		ds, err := w.ledger.Dataset(ctx, "out")
		require.NoError(t, err)
		require.Equal(t, sink.Postgres, ds.Sink, "not promoted")
	}
	err = d.Promote(ctx, writer, "out")
	require.ErrorIs(t, err, writestrategy.ErrNotPromoted)
	require.ErrorContains(t, err, "mismatch")
	require.ErrorContains(t, err, "name")

	m.on.Store(false)
	w.mustWrite(copyOrders)
	st := w.shadowStatus("out")
	require.Equal(t, int64(1), st.Matching)
	ds, err := w.ledger.Dataset(ctx, "out")
	require.NoError(t, err)
	require.Equal(t, sink.Postgres, ds.Sink, "one matching run is not enough")
	w.mustWrite(copyOrders)
	ds, err = w.ledger.Dataset(ctx, "out")
	require.NoError(t, err)
	require.Equal(t, sink.Iceberg, ds.Sink, "promoted after two matching runs")
	require.Equal(t, w.checksum("orders"), w.checksum("out"))
}

// A failing shadow write leaves the write of record committed, is recorded
// as failed, and fails the Write only with ShadowConfig.Fatal.
func TestShadowFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := newWorld(t, nil)
	boom := errors.New("boom")
	seedRowStore(t, base.pool, "orders", ordersSchema, ordersSQL, 30)
	ensureOutputs(t, base.pool, "out")
	base.shadow("out")
	copyOrders := writestrategy.Transform{Output: "out", Source: "orders"}
	for _, fatal := range []bool{false, true} {
		lh := facadetest.Wrap(base.lake, facadetest.Fault{Point: facadetest.MidStream, Dataset: "out", AfterRows: 10, Err: boom})
		d, err := writestrategy.NewDispatcher(base.pool, &writestrategy.DispatchConfig{Ledger: base.ledger, Resolver: base.resolver,
			Lakehouse: lh, Workspace: "test", Shadow: writestrategy.ShadowConfig{Fatal: fatal}})
		require.NoError(t, err)
		res, err := d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: copyOrders})
		if fatal {
			var se *writestrategy.ShadowError
			require.ErrorAs(t, err, &se)
			require.ErrorIs(t, err, boom)
			require.Equal(t, res[0].TxnID, se.TxnID)
		} else {
			require.NoError(t, err)
		}
		require.Len(t, res, 1)
		txn, err := base.ledger.Get(ctx, res[0].TxnID)
		require.NoError(t, err)
		require.Equal(t, "committed", string(txn.Status), "the write of record committed")
		require.Equal(t, base.checksum("orders"), base.checksum("out"))
		st := base.shadowStatus("out")
		require.Equal(t, "failed", st.Last.Status)
		require.Contains(t, st.Last.Error, "boom")
		require.Equal(t, st.Last, st.LastMismatch)
	}
	st := base.shadowStatus("out")
	require.Equal(t, int64(2), st.Runs)
	require.Equal(t, int64(2), st.Failed)
}

// A writer killed in the middle of its shadow stream: its write of record
// is committed, nothing of the shadow is visible in the table, and the
// next write of the dataset reconciles the dead shadow (its intent aborted,
// its run recorded as aborted) and shadows again.
func TestShadowKilledMidStream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 300)
	ensureOutputs(t, w.pool, "out")
	w.shadow("out")
	copyOrders := crashStrategy(writestrategy.KindTransform, "out")
	first := w.mustWrite(copyOrders)[0]
	before := lakeChecksum(t, w, "out")
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 600)

	crashWriter(t, crashSpec{url: w.pool.Config().ConnString(), warehouse: t.TempDir(),
		dataset: "out", kind: writestrategy.KindTransform, point: facadetest.MidStream, afterRows: 100})
	ds, err := w.ledger.Dataset(ctx, "out")
	require.NoError(t, err)
	require.Equal(t, sink.Postgres, ds.Sink)
	require.Equal(t, int64(600), ds.RowCount, "the write of record committed")
	st := w.shadowStatus("out")
	require.Equal(t, "running", st.Last.Status)
	require.NotEqual(t, first.TxnID, st.Last.TxnID)
	txn, err := w.ledger.Get(ctx, st.Last.TxnID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusCommitted, txn.Status)
	dead := openIntent(t, w, "out")
	require.Equal(t, ledger.Maintenance, dead.WriteMode, "the shadow's intent")
	require.Equal(t, before, lakeChecksum(t, w, "out"), "nothing of the shadow is visible")

	res := w.mustWrite(copyOrders)[0]
	aborted, err := w.ledger.Get(ctx, dead.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusAborted, aborted.Status)
	st = w.shadowStatus("out")
	require.Equal(t, int64(3), st.Runs)
	require.Equal(t, int64(1), st.Failed)
	require.Equal(t, "aborted", st.LastMismatch.Status)
	require.Equal(t, txn.ID, st.LastMismatch.TxnID)
	require.Equal(t, "matched", st.Last.Status)
	require.Equal(t, res.TxnID, st.Last.TxnID)
	require.Equal(t, int64(1), st.Matching)
	require.Equal(t, w.checksum("out"), lakeChecksum(t, w, "out"))
}

// Schema changes in shadow: the next shadow write replaces the table with
// the new columns (a column added, one retyped, one dropped), and parity
// holds after each.
func TestShadowSchemaChange(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 20)
	ensureOutputs(t, w.pool, "out")
	w.shadow("out")
	for i, sql := range []string{
		`SELECT id, name, amount FROM source`,
		`SELECT id, name, amount, category FROM source`,
		`SELECT id, name, amount::numeric(20,4) AS amount, category FROM source`,
		`SELECT id, amount::numeric(20,4) AS amount, category FROM source`,
	} {
		w.mustWrite(writestrategy.Transform{Output: "out", Source: "orders", Steps: []writestrategy.Step{{Name: "f", SQL: sql}}})
		st := w.shadowStatus("out")
		require.Equal(t, "matched", st.Last.Status, "step %d: %+v", i, st.Last)
		require.Equal(t, w.checksum("out"), lakeChecksum(t, w, "out"))
	}
}

// A shadow write that hangs (its stream never ends) is cut off at
// ShadowConfig.Timeout: the Write returns with its write of record
// committed, the run is recorded as failed for exceeding the bound, the
// shadow's intent is withdrawn (the dataset is free at once) and nothing
// of the shadow is visible in the table.
func TestShadowTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := newWorld(t, nil)
	seedRowStore(t, base.pool, "orders", ordersSchema, ordersSQL, 30)
	ensureOutputs(t, base.pool, "out")
	base.shadow("out")
	copyOrders := writestrategy.Transform{Output: "out", Source: "orders"}
	base.mustWrite(copyOrders)
	before := lakeChecksum(t, base, "out")
	seedRowStore(t, base.pool, "orders", ordersSchema, ordersSQL, 40)

	lh := facadetest.Wrap(base.lake, facadetest.Fault{Point: facadetest.MidStream, Dataset: "out", AfterRows: 10, Do: facadetest.Block})
	d, err := writestrategy.NewDispatcher(base.pool, &writestrategy.DispatchConfig{Ledger: base.ledger, Resolver: base.resolver,
		Lakehouse: lh, Workspace: "test", Shadow: writestrategy.ShadowConfig{Timeout: time.Second}})
	require.NoError(t, err)
	res, err := d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: copyOrders})
	require.NoError(t, err, "a shadow failure does not fail the write without Fatal")
	txn, err := base.ledger.Get(ctx, res[0].TxnID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusCommitted, txn.Status, "the write of record committed")
	require.Equal(t, base.checksum("orders"), base.checksum("out"))
	st := base.shadowStatus("out")
	require.Equal(t, "failed", st.Last.Status)
	require.Equal(t, res[0].TxnID, st.Last.TxnID)
	require.Contains(t, st.Last.Error, "shadow write bound (1s) exceeded")
	var open int
	require.NoError(t, base.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions
		WHERE dataset_id = 'out' AND status = 'open'`).Scan(&open))
	require.Zero(t, open, "the shadow's intent is withdrawn")
	require.Equal(t, before, lakeChecksum(t, base, "out"), "nothing of the shadow is visible")
	require.ErrorIs(t, base.d.Promote(ctx, writer, "out"), writestrategy.ErrNotPromoted, "a failed shadow run blocks promotion")

	base.mustWrite(copyOrders) // the next write shadows again, unhindered
	require.Equal(t, "matched", base.shadowStatus("out").Last.Status)
	require.Equal(t, base.checksum("out"), lakeChecksum(t, base, "out"))
}

// A schema change in shadow that the dataset's schema policy refuses (a
// dropped column under RefuseDrops): the write of record commits with the
// new columns, the shadow run is recorded as failed with the refusal, the
// table keeps its old schema and contents, and promotion is refused.
func TestShadowSchemaChangeRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorldWith(t, nil, &facade.Config{SchemaPolicy: facade.SchemaPolicy{RefuseDrops: true}}, nil, nil)
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 20)
	ensureOutputs(t, w.pool, "out")
	w.shadow("out")
	step := func(sql string) writestrategy.Transform {
		return writestrategy.Transform{Output: "out", Source: "orders", Steps: []writestrategy.Step{{Name: "f", SQL: sql}}}
	}
	w.mustWrite(step(`SELECT id, name, amount FROM source`))
	require.Equal(t, "matched", w.shadowStatus("out").Last.Status)
	before := lakeChecksum(t, w, "out")

	res := w.mustWrite(step(`SELECT id, amount FROM source`))
	txn, err := w.ledger.Get(ctx, res[0].TxnID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusCommitted, txn.Status, "the write of record committed")
	st := w.shadowStatus("out")
	require.Equal(t, "failed", st.Last.Status)
	require.Equal(t, res[0].TxnID, st.Last.TxnID)
	require.Contains(t, st.Last.Error, "name")
	require.Equal(t, before, lakeChecksum(t, w, "out"), "the table is left as it was")
	perr := w.d.Promote(ctx, writer, "out")
	require.ErrorIs(t, perr, writestrategy.ErrNotPromoted)
	require.ErrorContains(t, perr, "failed")
	ds, err := w.ledger.Dataset(ctx, "out")
	require.NoError(t, err)
	require.Equal(t, sink.Postgres, ds.Sink)
}
