package sink_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/sink"
)

// Shadow sits between Postgres and Iceberg: it resolves to Postgres, the
// sink of record, with Shadow set; a max of Postgres stops it; a max of
// Shadow allows it but caps Iceberg to it; the database accepts it.
func TestShadowFlag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, _ := newFlags(t, "ds.a", "ds.b")
	s, err := sink.ParseSink("shadow")
	require.NoError(t, err)
	require.Equal(t, sink.Shadow, s)

	require.NoError(t, f.SetWriter(ctx, sink.WriterFlags{WriterID: "w", Default: sink.Postgres, Max: sink.Iceberg}))
	require.NoError(t, f.SetOverride(ctx, "w", sink.Shadow, "ds.a"))
	d, err := f.Check(ctx, "w", "ds.a")
	require.NoError(t, err)
	assert.Equal(t, sink.Postgres, d.Sink)
	assert.True(t, d.Shadow)
	assert.Equal(t, sink.Shadow, d.Requested)
	assert.False(t, d.Clamped)
	d, err = f.Check(ctx, "w", "ds.b")
	require.NoError(t, err)
	assert.False(t, d.Shadow)

	// Max shadow: the shadow, not the flip.
	require.NoError(t, f.SetWriter(ctx, sink.WriterFlags{WriterID: "w", Default: sink.Shadow, Max: sink.Shadow}))
	require.NoError(t, f.SetOverride(ctx, "w", sink.Shadow, "ds.a"))
	var ce *sink.CeilingError
	require.ErrorAs(t, f.SetOverride(ctx, "w", sink.Iceberg, "ds.b"), &ce)
	d, err = f.Check(ctx, "w", "ds.b")
	require.NoError(t, err)
	assert.Equal(t, sink.Postgres, d.Sink)
	assert.True(t, d.Shadow, "the default shadow")
	require.ErrorAs(t, f.SetWriter(ctx, sink.WriterFlags{WriterID: "w", Default: sink.Iceberg, Max: sink.Shadow}), &ce)

	// Max pg: the kill switch stops the shadow too.
	require.NoError(t, f.SetWriter(ctx, sink.WriterFlags{WriterID: "w", Default: sink.Postgres, Max: sink.Postgres}))
	d, err = f.Check(ctx, "w", "ds.a")
	require.NoError(t, err)
	assert.Equal(t, sink.Postgres, d.Sink)
	assert.False(t, d.Shadow)
	assert.True(t, d.Clamped)
	require.ErrorAs(t, f.SetOverride(ctx, "w", sink.Shadow, "ds.b"), &ce)

	// A decision claiming Shadow as its sink is not a resolved one.
	_, err = sink.RowSink[int]{Postgres: func(context.Context) (int, error) { return 1, nil }}.Run(ctx,
		sink.Decision{WriterID: "w", DatasetID: "ds.a", Sink: sink.Shadow, Max: sink.Iceberg})
	require.ErrorIs(t, err, sink.ErrUnresolved)
}
