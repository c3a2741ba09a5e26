package sink

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// Prefetch reads the flags in a caller's batch and caches the resolution:
// the next Resolve needs no read (a flag change made after the batch is not
// seen until the entry expires, as for any cached resolution) and is logged
// as read; a cached resolution has nothing to prefetch, nor has a Resolver
// over another Lookuper.
func TestPrefetch(t *testing.T) {
	ctx := context.Background()
	f, pool := newFlags(t, "a", "b")
	require.NoError(t, f.SetWriter(ctx, WriterFlags{WriterID: "w", Default: Iceberg, Max: Iceberg}))
	var logs bytes.Buffer
	r, err := NewResolver(f, &ResolverConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)

	queue := r.Prefetch("w", "a", "b")
	require.NotNil(t, queue)
	b := &pgx.Batch{}
	b.Queue(`SELECT 1`)
	read := queue(b)
	br := pool.SendBatch(ctx, b)
	_, err = br.Exec()
	require.NoError(t, err)
	require.NoError(t, read(br))
	require.NoError(t, br.Close())
	require.Equal(t, 1, r.len())

	require.NoError(t, f.SetWriter(ctx, WriterFlags{WriterID: "w", Default: Postgres, Max: Iceberg}))
	pair, err := r.ResolvePair(ctx, "w", "a", "b")
	require.NoError(t, err)
	require.Equal(t, Iceberg, pair.First.Sink, "answered from the prefetched read")
	require.Contains(t, logs.String(), "cached=false")
	require.NotContains(t, logs.String(), "cached=true")
	logs.Reset()
	_, err = r.ResolvePair(ctx, "w", "a", "b")
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(logs.String(), "cached=true"))

	require.Nil(t, r.Prefetch("w", "a", "b"), "cached: nothing to read")
	require.NotNil(t, r.Prefetch("w", "b", "a"), "another resolution")
	require.Nil(t, r.Prefetch("", "a"))
	require.Nil(t, r.Prefetch("w"))
	other, err := NewResolver(&countingLookuper{}, nil)
	require.NoError(t, err)
	require.Nil(t, other.Prefetch("w", "a"))

	// A failed read caches nothing and is not reported.
	r.Invalidate()
	queue = r.Prefetch("w", "a")
	b = &pgx.Batch{}
	b.Queue(`SELECT 1/0`)
	read = queue(b)
	br = pool.SendBatch(ctx, b)
	_, err = br.Exec()
	require.Error(t, err)
	require.NoError(t, read(br))
	require.Error(t, br.Close())
	require.Zero(t, r.len())
}
