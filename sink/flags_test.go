package sink_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
)

// The resolution table against real flags in Postgres.
func TestResolutionTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, _ := newFlags(t, "ds.canary", "ds.plain", "ds.down")
	require.NoError(t, f.SetWriter(ctx, sink.WriterFlags{WriterID: "pipeline.output", Default: sink.Postgres, Max: sink.Iceberg}))
	require.NoError(t, f.SetWriter(ctx, sink.WriterFlags{WriterID: "sync.hubspot", Default: sink.Iceberg, Max: sink.Iceberg}))
	require.NoError(t, f.SetWriter(ctx, sink.WriterFlags{WriterID: "ingest.api", Default: sink.Postgres, Max: sink.Postgres}))
	require.NoError(t, f.SetOverride(ctx, "pipeline.output", sink.Iceberg, "ds.canary"))
	require.NoError(t, f.SetOverride(ctx, "sync.hubspot", sink.Postgres, "ds.down"))

	cases := []struct {
		name, writer, dataset string
		sink                  sink.Sink
		source                sink.Source
		clamped               bool
	}{
		{"default pg", "pipeline.output", "ds.plain", sink.Postgres, sink.SourceDefault, false},
		{"override wins over default", "pipeline.output", "ds.canary", sink.Iceberg, sink.SourceOverride, false},
		{"default iceberg", "sync.hubspot", "ds.plain", sink.Iceberg, sink.SourceDefault, false},
		{"override down below default", "sync.hubspot", "ds.down", sink.Postgres, sink.SourceOverride, false},
		{"unknown dataset gets the default", "pipeline.output", "ds.nowhere", sink.Postgres, sink.SourceDefault, false},
		{"overrides are per writer", "ingest.api", "ds.canary", sink.Postgres, sink.SourceDefault, false},
		{"unknown writer is pg", "sync.nobody", "ds.canary", sink.Postgres, sink.SourceUnknownWriter, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := f.Check(ctx, c.writer, c.dataset)
			require.NoError(t, err)
			assert.Equal(t, c.sink, d.Sink)
			assert.Equal(t, c.source, d.Source)
			assert.Equal(t, c.clamped, d.Clamped)
			assert.Equal(t, c.writer, d.WriterID)
			assert.Equal(t, c.dataset, d.DatasetID)
			assert.NotEmpty(t, d.Reason)
		})
	}

	// Ceiling: lowering the max below an existing override (the kill switch)
	// is allowed and caps the override, reported as clamped.
	require.NoError(t, f.SetWriter(ctx, sink.WriterFlags{WriterID: "pipeline.output", Default: sink.Postgres, Max: sink.Postgres}))
	d, err := f.Check(ctx, "pipeline.output", "ds.canary")
	require.NoError(t, err)
	assert.Equal(t, sink.Postgres, d.Sink)
	assert.Equal(t, sink.Iceberg, d.Requested)
	assert.Equal(t, sink.Postgres, d.Max)
	assert.True(t, d.Clamped)
	assert.Contains(t, d.Reason, "clamped")
}

func TestSetOverrideAboveCeilingRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, _ := newFlags(t, "ds.a", "ds.b")
	require.NoError(t, f.SetWriter(ctx, sink.WriterFlags{WriterID: "pipeline.output", Default: sink.Postgres, Max: sink.Postgres}))

	err := f.SetOverride(ctx, "pipeline.output", sink.Iceberg, "ds.a", "ds.b")
	require.ErrorIs(t, err, sink.ErrAboveCeiling)
	var ce *sink.CeilingError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "pipeline.output", ce.WriterID)
	assert.Equal(t, sink.Iceberg, ce.Sink)
	assert.Equal(t, sink.Postgres, ce.Max)
	os, err := f.Overrides(ctx, "")
	require.NoError(t, err)
	assert.Empty(t, os, "a refused override leaves nothing behind")

	// A default above the max is refused the same way.
	err = f.SetWriter(ctx, sink.WriterFlags{WriterID: "sync.x", Default: sink.Iceberg, Max: sink.Postgres})
	require.ErrorIs(t, err, sink.ErrAboveCeiling)
	_, err = f.Writer(ctx, "sync.x")
	require.ErrorIs(t, err, sink.ErrUnknownWriter)

	// Overrides at or below the ceiling are fine.
	require.NoError(t, f.SetOverride(ctx, "pipeline.output", sink.Postgres, "ds.a"))
}

func TestSetOverrideErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, _ := newFlags(t, "ds.a")
	require.NoError(t, f.SetWriter(ctx, sink.WriterFlags{WriterID: "pipeline.output", Default: sink.Postgres, Max: sink.Iceberg}))

	err := f.SetOverride(ctx, "sync.nobody", sink.Postgres, "ds.a")
	require.ErrorIs(t, err, sink.ErrUnknownWriter)

	err = f.SetOverride(ctx, "pipeline.output", sink.Iceberg, "ds.a", "ds.typo")
	require.ErrorIs(t, err, ledger.ErrDatasetNotFound)
	assert.Contains(t, err.Error(), "ds.typo")
	os, err := f.Overrides(ctx, "pipeline.output")
	require.NoError(t, err)
	assert.Empty(t, os, "all or none: ds.a was not set either")

	err = f.SetOverride(ctx, "pipeline.output", sink.Sink("dual"), "ds.a")
	require.ErrorIs(t, err, sink.ErrInvalidSink)
	err = f.SetOverride(ctx, "pipeline.output", sink.Postgres)
	require.ErrorIs(t, err, sink.ErrInvalidArgument)
	err = f.SetOverride(ctx, "", sink.Postgres, "ds.a")
	require.ErrorIs(t, err, sink.ErrInvalidArgument)
	err = f.SetWriter(ctx, sink.WriterFlags{WriterID: "w", Default: "", Max: sink.Postgres})
	require.ErrorIs(t, err, sink.ErrInvalidSink)
}

// The runbook: check -> set override -> (re-deploy, verify, smoke) -> revert.
func TestRunbookSetListClear(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, pool := newFlags(t, "ds.a", "ds.b", "ds.c")
	require.NoError(t, f.SetWriter(ctx, sink.WriterFlags{WriterID: "pipeline.output", Default: sink.Postgres, Max: sink.Iceberg}))
	require.NoError(t, f.SetWriter(ctx, sink.WriterFlags{WriterID: "ingest.api", Default: sink.Postgres, Max: sink.Iceberg}))

	d, err := f.Check(ctx, "pipeline.output", "ds.a")
	require.NoError(t, err)
	require.Equal(t, sink.Postgres, d.Sink)

	require.NoError(t, f.SetOverride(ctx, "pipeline.output", sink.Iceberg, "ds.a", "ds.b", "ds.a"))
	require.NoError(t, f.SetOverride(ctx, "ingest.api", sink.Iceberg, "ds.c"))
	require.NoError(t, f.SetOverride(ctx, "pipeline.output", sink.Iceberg, "ds.a")) // idempotent

	os, err := f.Overrides(ctx, "pipeline.output")
	require.NoError(t, err)
	require.Len(t, os, 2)
	assert.Equal(t, []string{"ds.a", "ds.b"}, []string{os[0].DatasetID, os[1].DatasetID})
	all, err := f.Overrides(ctx, "")
	require.NoError(t, err)
	assert.Len(t, all, 3)
	ws, err := f.Writers(ctx)
	require.NoError(t, err)
	require.Len(t, ws, 2)
	assert.Equal(t, "ingest.api", ws[0].WriterID)
	assert.False(t, ws[0].UpdatedAt.IsZero())

	n, err := f.ClearOverride(ctx, "pipeline.output", "ds.a", "ds.b", "ds.zzz")
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	d, err = f.Check(ctx, "pipeline.output", "ds.a")
	require.NoError(t, err)
	assert.Equal(t, sink.Postgres, d.Sink)
	d, err = f.Check(ctx, "ingest.api", "ds.c")
	require.NoError(t, err)
	assert.Equal(t, sink.Iceberg, d.Sink, "clearing pipeline.output leaves ingest.api alone")

	// Flags work inside the caller's transaction, and roll back with it.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	ft, err := sink.NewFlags(tx, nil)
	require.NoError(t, err)
	require.NoError(t, ft.SetOverride(ctx, "pipeline.output", sink.Iceberg, "ds.a"))
	require.NoError(t, tx.Rollback(ctx))
	d, err = f.Check(ctx, "pipeline.output", "ds.a")
	require.NoError(t, err)
	assert.Equal(t, sink.Postgres, d.Sink)
}

func TestNotMigrated(t *testing.T) {
	t.Parallel()
	_, pool := newFlags(t)
	f, err := sink.NewFlags(pool, &sink.FlagsConfig{Schema: "elsewhere"})
	require.NoError(t, err)
	_, err = f.Check(context.Background(), "pipeline.output", "ds")
	require.ErrorIs(t, err, sink.ErrNotMigrated)
	var dbe *sink.DBError
	require.True(t, errors.As(err, &dbe))

	_, err = sink.NewFlags(nil, nil)
	require.ErrorIs(t, err, sink.ErrInvalidArgument)
}
