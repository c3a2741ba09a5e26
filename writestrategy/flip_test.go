package writestrategy_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// intentRows counts the ledger rows of a dataset's intents by status.
func intentRows(t *testing.T, w *world, id string) map[string]int {
	t.Helper()
	rows, err := w.pool.Query(context.Background(), `SELECT status, sink FROM lakewrite.pipeline_build_transactions WHERE dataset_id = $1`, id)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var st, sk string
		require.NoError(t, rows.Scan(&st, &sk))
		out[st+"/"+sk]++
	}
	require.NoError(t, rows.Err())
	return out
}

// A write whose flags say another sink than its writer's last write (a
// canary flip, and its revert) lands on the sink the flags say, with one
// intent in the ledger. A write to a registered relation is refused with
// no intent.
func TestDispatchFlipOneIntentPerWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	seedWorld(t, w, 20)
	ensureOutputs(t, w.pool, "p1", "p2", "p3", "p4")
	tr := func(out string) writestrategy.WriteStrategy {
		return writestrategy.Transform{Output: out, Source: "orders"}
	}

	rs := w.mustWrite(tr("p1")) // the writer's default: the row store
	require.Equal(t, sink.Postgres, rs[0].Sink)
	w.iceberg("p2") // p2 flipped: the writer's last write went to the row store
	rs = w.mustWrite(tr("p2"))
	require.Equal(t, sink.Iceberg, rs[0].Sink)
	require.EqualValues(t, 20, rs[0].Rows)
	require.Equal(t, map[string]int{"committed/iceberg_native": 1}, intentRows(t, w, "p2"))
	w.resolver.Invalidate()
	rs = w.mustWrite(tr("p3")) // the last write went to Iceberg, this one to the row store
	require.Equal(t, sink.Postgres, rs[0].Sink)
	require.Equal(t, map[string]int{"committed/pg": 1}, intentRows(t, w, "p3"))
	w.resolver.Invalidate()
	rs = w.mustWrite(tr("p4"))
	require.Equal(t, sink.Postgres, rs[0].Sink)
	require.Equal(t, map[string]int{"committed/pg": 1}, intentRows(t, w, "p4"))

	// Reverted: p2 goes back to the row store (a full rebuild).
	_, err := w.flags.ClearOverride(ctx, writer, "p2")
	require.NoError(t, err)
	w.resolver.Invalidate()
	rs = w.mustWrite(tr("p2"))
	require.Equal(t, sink.Postgres, rs[0].Sink)
	require.Equal(t, map[string]int{"committed/iceberg_native": 1, "committed/pg": 1}, intentRows(t, w, "p2"))
	require.Equal(t, w.checksum("p1"), w.checksum("p2"))

	_, err = writestrategy.RegisterRelation(ctx, w.pool, nil, "prel", "SELECT 1 AS x")
	require.NoError(t, err)
	w.resolver.Invalidate()
	_, err = w.write(tr("prel"))
	require.ErrorIs(t, err, writestrategy.ErrRelationDataset)
	require.Empty(t, intentRows(t, w, "prel"))
	require.Zero(t, w.pool.Stat().AcquiredConns(), "nothing held")
}

// A write that fails after its sink is resolved and before its arm runs
// (an Iceberg sink without a Lakehouse) leaves nothing held and no intent,
// whatever its writer's last write resolved to.
func TestDispatchFailsBeforeArmLeavesNoIntent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	seedWorld(t, w, 5)
	ensureOutputs(t, w.pool, "n1", "n2")
	require.NoError(t, w.flags.SetWriter(ctx, sink.WriterFlags{WriterID: "ice.only", Default: sink.Iceberg, Max: sink.Iceberg}))
	d, err := writestrategy.NewDispatcher(w.pool, &writestrategy.DispatchConfig{Ledger: w.ledger, Resolver: w.resolver, Workspace: "test"})
	require.NoError(t, err)
	for _, out := range []string{"n1", "n2"} { // n2: after a write resolved to Iceberg
		w.resolver.Invalidate()
		_, err := d.Write(ctx, writestrategy.Request{WriterID: "ice.only", Strategy: writestrategy.Transform{Output: out, Source: "orders"}})
		require.ErrorIs(t, err, writestrategy.ErrInvalid)
		require.Empty(t, intentRows(t, w, out))
		require.Zero(t, w.pool.Stat().AcquiredConns(), "nothing held")
	}
}

// openCounter counts the open phases of each write.
type openCounter struct{ opens int }

func (o *openCounter) PhaseStart(ctx context.Context, ev writestrategy.PhaseEvent) context.Context {
	if ev.Phase == writestrategy.PhaseOpen {
		o.opens++
	}
	return ctx
}

func (o *openCounter) PhaseEnd(context.Context, writestrategy.PhaseEvent) {}

// Every write opens its intent once, whichever sink the writer's last
// write went to: with one output flipped to Iceberg and one on the row
// store, writes alternating between them each open one intent.
func TestDispatchOneOpenPerWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	seedWorld(t, w, 5)
	ensureOutputs(t, w.pool, "q1", "q2")
	obs := &openCounter{}
	d, err := writestrategy.NewDispatcher(w.pool, &writestrategy.DispatchConfig{Ledger: w.ledger, Resolver: w.resolver,
		Lakehouse: w.lake, Workspace: "test", Observer: obs})
	require.NoError(t, err)
	w.iceberg("q2")
	write := func(out string, want sink.Sink) int {
		t.Helper()
		w.resolver.Invalidate()
		obs.opens = 0
		rs, err := d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: writestrategy.Transform{Output: out, Source: "orders"}})
		require.NoError(t, err)
		require.Equal(t, want, rs[0].Sink)
		return obs.opens
	}
	for range 4 {
		require.Equal(t, 1, write("q1", sink.Postgres))
		require.Equal(t, 1, write("q2", sink.Iceberg))
	}
	require.Equal(t, map[string]int{"committed/pg": 4}, intentRows(t, w, "q1"))
	require.Equal(t, map[string]int{"committed/iceberg_native": 4}, intentRows(t, w, "q2"))
}
