package facade

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// BenchmarkChanges1M: Changes of a merge of 1,024 changed rows into a
// 1,048,576-row v2 table (position deletes), read as the id column; it
// reports the time per read and its ratio to a full scan of the same
// column.
//
//	go test ./facade/ -run '^$' -bench BenchmarkChanges1M -benchtime 5x
func BenchmarkChanges1M(b *testing.B) {
	const rows, every = 1 << 20, 1 << 10
	ctx := context.Background()
	cat, err := OpenSQLCatalog(ctx, CatalogConfig{DatabaseURL: pgtest.URL(b), Warehouse: b.TempDir()})
	require.NoError(b, err)
	b.Cleanup(func() { cat.Close() })
	f, err := New(cat, nil)
	require.NoError(b, err)
	write := func(v int) CommitResult {
		var preserved int64
		res, err := f.Write(ctx, Target{DatasetID: "changes_bench"}, WriteRequest{Mode: Replace, Schema: mergeBenchSchema,
			Rows: mergeBenchRows(rows, every, v, &preserved)})
		require.NoError(b, err)
		return res
	}
	from := write(0).SnapshotID
	to := write(1).SnapshotID
	cols := []string{"id"}
	t0 := time.Now()
	var n int64
	for rec, err := range f.Scan(ctx, "changes_bench", ScanOptions{Columns: cols}) {
		require.NoError(b, err)
		n += rec.NumRows()
	}
	scan := time.Since(t0)
	require.Equal(b, int64(rows), n)
	b.ResetTimer()
	t1 := time.Now()
	for range b.N {
		var removed, added int64
		for c, err := range f.Changes(ctx, "changes_bench", from, to, cols) {
			require.NoError(b, err)
			if c.Removed {
				removed += c.Rows.NumRows()
			} else {
				added += c.Rows.NumRows()
			}
			c.Rows.Release()
		}
		require.Equal(b, int64(rows/every), removed)
		require.Equal(b, int64(rows/every), added)
	}
	per := time.Since(t1).Seconds() / float64(b.N)
	b.ReportMetric(per*1000, "ms/changes")
	b.ReportMetric(per/scan.Seconds(), "x_scan")
}
