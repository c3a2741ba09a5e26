package writestrategy_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// A retried write carrying the same idempotency key returns the earlier
// result and writes nothing, on both sinks; also when the earlier attempt's
// outcome was unknown to its caller (the snapshot landed, the ledger commit
// was lost): the retry reconciles that attempt first, then replays it.
func TestDispatchIdempotencyKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	seedWorld(t, w, 200)
	ensureOutputs(t, w.pool, "pg_out", "ice_out", "unknown_out")
	w.iceberg("ice_out", "unknown_out")
	appendAll := func(o string) writestrategy.WriteStrategy {
		return writestrategy.Deploy{Mode: writestrategy.KindAppendAlways, Source: "orders", Target: o}
	}
	write := func(o, key string) ([]writestrategy.WriteResult, error) {
		return w.d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: appendAll(o), IdempotencyKey: key})
	}
	rowCount := func(id string) int64 {
		ds, err := w.ledger.Dataset(ctx, id)
		require.NoError(t, err)
		return ds.RowCount
	}

	for _, o := range []string{"pg_out", "ice_out"} {
		first, err := write(o, "run-1")
		require.NoError(t, err, o)
		require.False(t, writestrategy.Replayed(first[0]), o)
		require.EqualValues(t, 200, first[0].Rows, o)
		sum := w.checksum(o)

		again, err := write(o, "run-1")
		require.NoError(t, err, o)
		require.True(t, writestrategy.Replayed(again[0]), o)
		require.Equal(t, first[0].TxnID, again[0].TxnID, o)
		require.Equal(t, first[0].SnapshotID, again[0].SnapshotID, o)
		require.Equal(t, first[0].Rows, again[0].Rows, o)
		require.True(t, first[0].CommittedAt.Equal(again[0].CommittedAt), o)
		require.EqualValues(t, 200, rowCount(o), o)
		require.Equal(t, sum, w.checksum(o), o)

		// Another key is another write.
		other, err := write(o, "run-2")
		require.NoError(t, err, o)
		require.False(t, writestrategy.Replayed(other[0]), o)
		require.EqualValues(t, 400, rowCount(o), o)
	}

	// Outcome unknown to the caller: the retry neither duplicates nor loses.
	allow := refuseLedgerCommits(t, w)
	_, err := write("unknown_out", "run-1")
	require.ErrorIs(t, err, ledger.ErrOutcomeUnknown)
	allow()
	res, err := write("unknown_out", "run-1")
	require.NoError(t, err)
	require.True(t, writestrategy.Replayed(res[0]))
	require.EqualValues(t, 200, res[0].Rows)
	require.EqualValues(t, 200, rowCount("unknown_out"))
	c, err := w.lake.Checksum(ctx, "unknown_out", 0)
	require.NoError(t, err)
	require.EqualValues(t, 200, c.Rows)
}
