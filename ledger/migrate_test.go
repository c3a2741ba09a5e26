package ledger_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
)

func TestMigrationsEmbedded(t *testing.T) {
	ms, err := ledger.Migrations()
	require.NoError(t, err)
	require.NotEmpty(t, ms)
	for i, m := range ms {
		require.Equal(t, i+1, m.Version)
		require.NotEmpty(t, m.SQL)
	}
}

func TestMigrateTwiceAndConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t) // already migrated into "lakewrite"
	applied, err := ledger.Migrate(ctx, pool, "")
	require.NoError(t, err)
	require.Empty(t, applied, "second run applies nothing")

	// A custom schema, migrated by 8 callers at once.
	ms, err := ledger.Migrations()
	require.NoError(t, err)
	var wg sync.WaitGroup
	results := make([][]int, 8)
	errs := make([]error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = ledger.Migrate(ctx, pool, "team schema")
		}()
	}
	wg.Wait()
	total := 0
	for i := range 8 {
		require.NoError(t, errs[i])
		total += len(results[i])
	}
	require.Equal(t, len(ms), total, "each migration applied exactly once")

	l, err := ledger.New(pool, &ledger.Config{Schema: "team schema"})
	require.NoError(t, err)
	_, err = l.EnsureDataset(ctx, "d", "d", nil)
	require.NoError(t, err)
	in, err := l.Open(ctx, params("d"))
	require.NoError(t, err)
	require.NoError(t, l.Abort(ctx, in, nil))
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM "team schema".pipeline_build_transactions`).Scan(&n))
	require.Equal(t, 1, n)
}
