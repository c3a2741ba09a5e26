package cursor_test

import (
	"context"
	"runtime"
	"runtime/metrics"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// memQuery generates the benchmark shape server-side.
const memQuery = `SELECT g::bigint AS id, 'name-' || g AS name, ((g % 1000000) / 100.0)::numeric(12,2) AS amount,
  timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second' AS ts, g % 3 = 0 AS flag,
  jsonb_build_object('k', g, 'tag', 'abcdefghij', 'v', g % 7, 'note', 'xyzxyzxyz') AS attrs,
  (ARRAY['red', 'green', 'blue', 'black'])[g % 4 + 1] AS category
FROM generate_series(1, $1::int) g`

// peakHeap streams n rows at the default batch size and returns the
// highest heap size (live and not yet collected objects) seen between
// batches.
func peakHeap(t *testing.T, db cursor.DB, mode cursor.StreamMode, n int) uint64 {
	t.Helper()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	runtime.GC()
	var peak uint64
	read := func() {
		metrics.Read(sample)
		peak = max(peak, sample[0].Value.Uint64())
	}
	read()
	s, err := cursor.Batches(context.Background(), db, memQuery, []any{n}, &cursor.Options{Mode: mode})
	require.NoError(t, err)
	rows := 0
	for b, err := range s.All() {
		require.NoError(t, err)
		rows += int(b.NumRows())
		read()
		b.Release()
	}
	require.Equal(t, n, rows)
	return peak
}

// TestMemoryBounded: streaming 1M rows peaks no higher than streaming 100k
// rows plus a small constant, and under 64 MiB, at the default batch size.
func TestMemoryBounded(t *testing.T) {
	pool := pgtest.Pool(t)
	const slack = 8 << 20
	for _, mode := range []cursor.StreamMode{cursor.Direct, cursor.Staged} {
		small := peakHeap(t, pool, mode, 100_000)
		large := peakHeap(t, pool, mode, 1_000_000)
		t.Logf("%s: peak heap 100k rows %.1f MiB, 1M rows %.1f MiB", mode, float64(small)/(1<<20), float64(large)/(1<<20))
		require.LessOrEqual(t, large, small+slack, "memory grows with the number of rows")
		require.Less(t, large, uint64(64<<20))
	}
}
