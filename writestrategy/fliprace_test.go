package writestrategy_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// racingResolver resolves as its Resolver does, then, on its first call,
// runs race before returning the decision: whatever race changes happens
// between the write's look at its output and its intent.
type racingResolver struct {
	writestrategy.Resolver
	race func()
	once sync.Once
}

func (r *racingResolver) Resolve(ctx context.Context, writerID, datasetID string) (sink.Decision, error) {
	dec, err := r.Resolver.Resolve(ctx, writerID, datasetID)
	r.once.Do(r.race)
	return dec, err
}

// A write that races a flag flip (the output flipped to Iceberg and
// rebuilt there after the write resolved the row store, before it opened
// its intent) fails with ErrSinkChanged, not ErrInvalid: nothing written,
// its intent aborted, and the same request retried as it is lands on the
// new storage.
func TestDispatchWriteRacingFlipRetryable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	seedWorld(t, w, 10)
	ensureOutputs(t, w.pool, "fr")
	always := writestrategy.Deploy{Mode: writestrategy.KindAppendAlways, Source: "orders", Target: "fr"}
	rs := w.mustWrite(always)
	require.Equal(t, sink.Postgres, rs[0].Sink)

	var rebuilt int64
	rr := &racingResolver{Resolver: w.resolver, race: func() {
		w.iceberg("fr")
		rs := w.mustWrite(always) // the flip's full rebuild
		require.Equal(t, sink.Iceberg, rs[0].Sink)
		require.Equal(t, facade.Replace, rs[0].Mode)
		rebuilt = rs[0].Rows
	}}
	d, err := writestrategy.NewDispatcher(w.pool, &writestrategy.DispatchConfig{Ledger: w.ledger, Resolver: rr, Lakehouse: w.lake, Workspace: "test"})
	require.NoError(t, err)
	req := writestrategy.Request{WriterID: writer, Strategy: always}
	_, err = d.Write(ctx, req)
	require.ErrorIs(t, err, writestrategy.ErrSinkChanged)
	require.NotErrorIs(t, err, writestrategy.ErrInvalid, "a raced flip is not the caller's bug")
	require.Equal(t, map[string]int{"committed/pg": 1, "committed/iceberg_native": 1, "aborted/pg": 1}, intentRows(t, w, "fr"))
	ds, err := w.ledger.Dataset(ctx, "fr")
	require.NoError(t, err)
	require.Equal(t, sink.Iceberg, ds.Sink)
	require.Equal(t, rebuilt, ds.RowCount, "the raced write wrote nothing")

	rs, err = d.Write(ctx, req) // retried as it is
	require.NoError(t, err)
	require.Equal(t, sink.Iceberg, rs[0].Sink)
	ds, err = w.ledger.Dataset(ctx, "fr")
	require.NoError(t, err)
	require.Equal(t, rebuilt+10, ds.RowCount)
	require.Zero(t, w.pool.Stat().AcquiredConns(), "nothing held")
	var open int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE status = $1`, string(ledger.StatusOpen)).Scan(&open))
	require.Zero(t, open)
}
