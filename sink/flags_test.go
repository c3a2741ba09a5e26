package sink

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/ledger"
)

// The resolution table against real flags in Postgres.
func TestResolutionTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, _ := newFlags(t, "ds.canary", "ds.plain", "ds.down")
	require.NoError(t, f.SetWriter(ctx, WriterFlags{WriterID: "pipeline.output", Default: Postgres, Max: Iceberg}))
	require.NoError(t, f.SetWriter(ctx, WriterFlags{WriterID: "sync.hubspot", Default: Iceberg, Max: Iceberg}))
	require.NoError(t, f.SetWriter(ctx, WriterFlags{WriterID: "ingest.api", Default: Postgres, Max: Postgres}))
	require.NoError(t, f.SetOverride(ctx, "pipeline.output", Iceberg, "ds.canary"))
	require.NoError(t, f.SetOverride(ctx, "sync.hubspot", Postgres, "ds.down"))

	cases := []struct {
		name, writer, dataset string
		sink                  Sink
		source                Source
		clamped               bool
	}{
		{"default pg", "pipeline.output", "ds.plain", Postgres, SourceDefault, false},
		{"override wins over default", "pipeline.output", "ds.canary", Iceberg, SourceOverride, false},
		{"default iceberg", "sync.hubspot", "ds.plain", Iceberg, SourceDefault, false},
		{"override down below default", "sync.hubspot", "ds.down", Postgres, SourceOverride, false},
		{"unknown dataset gets the default", "pipeline.output", "ds.nowhere", Postgres, SourceDefault, false},
		{"overrides are per writer", "ingest.api", "ds.canary", Postgres, SourceDefault, false},
		{"unknown writer is pg", "sync.nobody", "ds.canary", Postgres, SourceUnknownWriter, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := f.Check(ctx, c.writer, c.dataset)
			require.NoError(t, err)
			assert.Equal(t, c.sink, d.Sink)
			assert.Equal(t, c.source, d.Source)
			assert.Equal(t, c.clamped, d.Clamped)
			assert.Equal(t, c.writer, d.writerID)
			assert.Equal(t, c.dataset, d.DatasetID)
			assert.NotEmpty(t, d.Reason)
		})
	}

	// Ceiling: lowering the max below an existing override (the kill switch)
	// is allowed and caps the override, reported as clamped.
	require.NoError(t, f.SetWriter(ctx, WriterFlags{WriterID: "pipeline.output", Default: Postgres, Max: Postgres}))
	d, err := f.Check(ctx, "pipeline.output", "ds.canary")
	require.NoError(t, err)
	assert.Equal(t, Postgres, d.Sink)
	assert.Equal(t, Iceberg, d.requested)
	assert.Equal(t, Postgres, d.max)
	assert.True(t, d.Clamped)
	assert.Contains(t, d.Reason, "clamped")
}

func TestSetOverrideAboveCeilingRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, _ := newFlags(t, "ds.a", "ds.b")
	require.NoError(t, f.SetWriter(ctx, WriterFlags{WriterID: "pipeline.output", Default: Postgres, Max: Postgres}))

	err := f.SetOverride(ctx, "pipeline.output", Iceberg, "ds.a", "ds.b")
	require.ErrorIs(t, err, ErrAboveCeiling)
	require.ErrorContains(t, err, `writer "pipeline.output": override for dataset "ds.a" iceberg_native is above the writer's max pg`)
	os, err := f.Overrides(ctx, "")
	require.NoError(t, err)
	assert.Empty(t, os, "a refused override leaves nothing behind")

	// A default above the max is refused the same way.
	err = f.SetWriter(ctx, WriterFlags{WriterID: "sync.x", Default: Iceberg, Max: Postgres})
	require.ErrorIs(t, err, ErrAboveCeiling)
	_, err = f.Writer(ctx, "sync.x")
	require.ErrorIs(t, err, ErrUnknownWriter)

	// Overrides at or below the ceiling are fine.
	require.NoError(t, f.SetOverride(ctx, "pipeline.output", Postgres, "ds.a"))
}

func TestSetOverrideErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, _ := newFlags(t, "ds.a")
	require.NoError(t, f.SetWriter(ctx, WriterFlags{WriterID: "pipeline.output", Default: Postgres, Max: Iceberg}))

	err := f.SetOverride(ctx, "sync.nobody", Postgres, "ds.a")
	require.ErrorIs(t, err, ErrUnknownWriter)

	err = f.SetOverride(ctx, "pipeline.output", Iceberg, "ds.a", "ds.typo")
	require.ErrorIs(t, err, ledger.ErrDatasetNotFound)
	assert.Contains(t, err.Error(), "ds.typo")
	os, err := f.Overrides(ctx, "pipeline.output")
	require.NoError(t, err)
	assert.Empty(t, os, "all or none: ds.a was not set either")

	err = f.SetOverride(ctx, "pipeline.output", Sink("dual"), "ds.a")
	require.ErrorIs(t, err, errInvalidSink)
	err = f.SetOverride(ctx, "pipeline.output", Postgres)
	require.ErrorIs(t, err, errInvalidArgument)
	err = f.SetOverride(ctx, "", Postgres, "ds.a")
	require.ErrorIs(t, err, errInvalidArgument)
	err = f.SetWriter(ctx, WriterFlags{WriterID: "w", Default: "", Max: Postgres})
	require.ErrorIs(t, err, errInvalidSink)
}

// The runbook: check -> set override -> (re-deploy, verify, smoke) -> revert.
func TestRunbookSetListClear(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, pool := newFlags(t, "ds.a", "ds.b", "ds.c")
	require.NoError(t, f.SetWriter(ctx, WriterFlags{WriterID: "pipeline.output", Default: Postgres, Max: Iceberg}))
	require.NoError(t, f.SetWriter(ctx, WriterFlags{WriterID: "ingest.api", Default: Postgres, Max: Iceberg}))

	d, err := f.Check(ctx, "pipeline.output", "ds.a")
	require.NoError(t, err)
	require.Equal(t, Postgres, d.Sink)

	require.NoError(t, f.SetOverride(ctx, "pipeline.output", Iceberg, "ds.a", "ds.b", "ds.a"))
	require.NoError(t, f.SetOverride(ctx, "ingest.api", Iceberg, "ds.c"))
	require.NoError(t, f.SetOverride(ctx, "pipeline.output", Iceberg, "ds.a")) // idempotent

	os, err := f.Overrides(ctx, "pipeline.output")
	require.NoError(t, err)
	require.Len(t, os, 2)
	assert.Equal(t, []string{"ds.a", "ds.b"}, []string{os[0].DatasetID, os[1].DatasetID})
	all, err := f.Overrides(ctx, "")
	require.NoError(t, err)
	assert.Len(t, all, 3)
	ws, err := f.writers(ctx)
	require.NoError(t, err)
	require.Len(t, ws, 2)
	assert.Equal(t, "ingest.api", ws[0].WriterID)
	assert.False(t, ws[0].updatedAt.IsZero())

	n, err := f.ClearOverride(ctx, "pipeline.output", "ds.a", "ds.b", "ds.zzz")
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	d, err = f.Check(ctx, "pipeline.output", "ds.a")
	require.NoError(t, err)
	assert.Equal(t, Postgres, d.Sink)
	d, err = f.Check(ctx, "ingest.api", "ds.c")
	require.NoError(t, err)
	assert.Equal(t, Iceberg, d.Sink, "clearing pipeline.output leaves ingest.api alone")

	// Flags work inside the caller's transaction, and roll back with it.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	ft, err := NewFlags(tx, nil)
	require.NoError(t, err)
	require.NoError(t, ft.SetOverride(ctx, "pipeline.output", Iceberg, "ds.a"))
	require.NoError(t, tx.Rollback(ctx))
	d, err = f.Check(ctx, "pipeline.output", "ds.a")
	require.NoError(t, err)
	assert.Equal(t, Postgres, d.Sink)
}

func TestNotMigrated(t *testing.T) {
	t.Parallel()
	_, pool := newFlags(t)
	f, err := NewFlags(pool, &FlagsConfig{Schema: "elsewhere"})
	require.NoError(t, err)
	_, err = f.Check(context.Background(), "pipeline.output", "ds")
	require.ErrorIs(t, err, errNotMigrated)
	require.True(t, strings.HasPrefix(err.Error(), "sink: look up flags: "), err.Error())
	var pe *pgconn.PgError
	require.ErrorAs(t, err, &pe, "a database failure, unwrapped")

	_, err = NewFlags(nil, nil)
	require.ErrorIs(t, err, errInvalidArgument)
}
