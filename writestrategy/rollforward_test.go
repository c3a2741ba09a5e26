package writestrategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// refuseLedgerCommits makes every ledger commit fail (the snapshot lands,
// the ledger row stays open) until the returned function is called.
func refuseLedgerCommits(t *testing.T, w *world) (allow func()) {
	t.Helper()
	ctx := context.Background()
	_, err := w.pool.Exec(ctx, `
		CREATE FUNCTION lakewrite.refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'ledger down'; END $$;
		CREATE TRIGGER refuse BEFORE UPDATE ON lakewrite.pipeline_build_transactions
			FOR EACH ROW WHEN (NEW.status = 'committed') EXECUTE FUNCTION lakewrite.refuse();`)
	require.NoError(t, err)
	return func() {
		_, err := w.pool.Exec(ctx, `DROP TRIGGER refuse ON lakewrite.pipeline_build_transactions; DROP FUNCTION lakewrite.refuse()`)
		require.NoError(t, err)
	}
}

// A write rolled forward after its ledger commit was lost stamps the
// dataset exactly as a normal commit does (schema, row count, sink, status,
// watermark = the snapshot's commit time), for every kind of Iceberg
// write, first writes of a new dataset included; and the next write of an
// append_new dataset then skips every row already there.
func TestDispatchRollForwardIsFullCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	seedWorld(t, w, 300)
	kinds := map[string]func(out string) writestrategy.WriteStrategy{
		"transform": func(o string) writestrategy.WriteStrategy {
			return writestrategy.Transform{Output: o, Source: "orders"}
		},
		"append_new": func(o string) writestrategy.WriteStrategy {
			return writestrategy.Deploy{Mode: writestrategy.KindAppendNew, Source: "orders", Target: o, Key: []string{"id"}}
		},
		"append_always": func(o string) writestrategy.WriteStrategy {
			return writestrategy.Deploy{Mode: writestrategy.KindAppendAlways, Source: "orders", Target: o}
		},
		"snapshot_replace": func(o string) writestrategy.WriteStrategy {
			return writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "orders", Target: o, Key: []string{"id"}}
		},
	}
	for name, mk := range kinds {
		ref, rolled := "ref_"+name, "rolled_"+name
		ensureOutputs(t, w.pool, ref, rolled)
		w.iceberg(ref, rolled)
		w.mustWrite(mk(ref))

		allow := refuseLedgerCommits(t, w)
		_, err := w.write(mk(rolled))
		require.ErrorIs(t, err, ledger.ErrOutcomeUnknown, name)
		allow()
		rep, err := w.ledger.Recover(ctx, rolled, time.Nanosecond, w.d.Lookup)
		require.NoError(t, err)
		require.Len(t, rep.RolledForward, 1, name)

		want, err := w.ledger.Dataset(ctx, ref)
		require.NoError(t, err)
		got, err := w.ledger.Dataset(ctx, rolled)
		require.NoError(t, err)
		require.JSONEq(t, string(want.Schema), string(got.Schema), name)
		require.Equal(t, want.RowCount, got.RowCount, name)
		require.Equal(t, want.Sink, got.Sink, name)
		require.Equal(t, want.Status, got.Status, name)
		found, ok, err := w.lake.FindTxn(ctx, rolled, rep.RolledForward[0].ID)
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, got.SourceWatermark.Equal(found.CommittedAt), name)
		txn, err := w.ledger.Get(ctx, rep.RolledForward[0].ID)
		require.NoError(t, err)
		require.Equal(t, found.SnapshotID, txn.SnapshotID, name)
		require.Equal(t, found.Rows, txn.RowCount, name)
		require.Equal(t, w.checksum(ref), w.checksum(rolled), name)
	}

	// The retry of the append_new after the roll-forward appends nothing.
	res := w.mustWrite(kinds["append_new"]("rolled_append_new"))
	require.Equal(t, int64(0), res[0].Rows)
	require.Equal(t, int64(300), res[0].Skipped)
	ds, err := w.ledger.Dataset(ctx, "rolled_append_new")
	require.NoError(t, err)
	require.Equal(t, int64(300), ds.RowCount)
}
