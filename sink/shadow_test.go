package sink

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Shadow sits between Postgres and Iceberg: it resolves to Postgres, the
// sink of record, with Shadow set; a max of Postgres stops it; a max of
// Shadow allows it but caps Iceberg to it; the database accepts it.
func TestShadowFlag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, _ := newFlags(t, "ds.a", "ds.b")
	s, err := ParseSink("shadow")
	require.NoError(t, err)
	require.Equal(t, Shadow, s)

	require.NoError(t, f.SetWriter(ctx, WriterFlags{WriterID: "w", Default: Postgres, Max: Iceberg}))
	require.NoError(t, f.SetOverride(ctx, "w", Shadow, "ds.a"))
	d, err := f.Check(ctx, "w", "ds.a")
	require.NoError(t, err)
	assert.Equal(t, Postgres, d.Sink)
	assert.True(t, d.Shadow)
	assert.Equal(t, Shadow, d.requested)
	assert.False(t, d.Clamped)
	d, err = f.Check(ctx, "w", "ds.b")
	require.NoError(t, err)
	assert.False(t, d.Shadow)

	// Max shadow: the shadow, not the flip.
	require.NoError(t, f.SetWriter(ctx, WriterFlags{WriterID: "w", Default: Shadow, Max: Shadow}))
	require.NoError(t, f.SetOverride(ctx, "w", Shadow, "ds.a"))
	require.ErrorIs(t, f.SetOverride(ctx, "w", Iceberg, "ds.b"), ErrAboveCeiling)
	d, err = f.Check(ctx, "w", "ds.b")
	require.NoError(t, err)
	assert.Equal(t, Postgres, d.Sink)
	assert.True(t, d.Shadow, "the default shadow")
	require.ErrorIs(t, f.SetWriter(ctx, WriterFlags{WriterID: "w", Default: Iceberg, Max: Shadow}), ErrAboveCeiling)

	// Max pg: the kill switch stops the shadow too.
	require.NoError(t, f.SetWriter(ctx, WriterFlags{WriterID: "w", Default: Postgres, Max: Postgres}))
	d, err = f.Check(ctx, "w", "ds.a")
	require.NoError(t, err)
	assert.Equal(t, Postgres, d.Sink)
	assert.False(t, d.Shadow)
	assert.True(t, d.Clamped)
	require.ErrorIs(t, f.SetOverride(ctx, "w", Shadow, "ds.b"), ErrAboveCeiling)

	// A decision claiming Shadow as its sink is not a resolved one.
	_, err = RowSink[int]{Postgres: func(context.Context) (int, error) { return 1, nil }}.Run(ctx,
		Decision{writerID: "w", DatasetID: "ds.a", Sink: Shadow, max: Iceberg})
	require.ErrorIs(t, err, errUnresolved)
}
