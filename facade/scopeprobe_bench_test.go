//go:build unix

package facade

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// BenchmarkProbeScope: the probe of a scoped replace (probeScope) of 1,000
// random keys of a table of the bench's incremental shape
// (-probe-bench-rows rows), what an affected-key refresh pays to find the
// output rows of its keys: reading the files (read) and with the files'
// scope indexes kept (indexed, Config.ScopeIndexBytes). Reports wall and
// CPU seconds per probe, and the first probe's (which builds the indexes).
func BenchmarkProbeScope(b *testing.B) {
	rows := *probeBenchRows
	cat, err := OpenSQLCatalog(context.Background(), CatalogConfig{DatabaseURL: pgtest.URL(b), Warehouse: b.TempDir()})
	require.NoError(b, err)
	b.Cleanup(func() { cat.Close() })
	f, err := New(cat, nil)
	require.NoError(b, err)
	sc, recs, release := incShapeRows(rows, false)
	_, err = f.Write(context.Background(), Target{DatasetID: "scoped"}, WriteRequest{Mode: Replace, Schema: sc, Rows: batchesOf(recs)})
	release()
	require.NoError(b, err)
	kb := array.NewInt64Builder(memory.DefaultAllocator)
	rnd := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		kb.Append(1 + rnd.Int64N(int64(rows)))
	}
	keys := array.NewRecordBatch(arrow.NewSchema(incShape[:1], nil), []arrow.Array{kb.NewArray()}, 1000)
	defer keys.Release()
	tbl, err := f.LoadTable(context.Background(), "scoped")
	require.NoError(b, err)
	req := WriteRequest{Mode: Replace, Schema: sc, Scope: &Scope{Columns: []string{"id"}, Keys: keys}}
	for _, arm := range []struct {
		name  string
		cache int64
	}{{"read", 0}, {"indexed", 64 << 20}} {
		b.Run(arm.name, func(b *testing.B) {
			f, err := New(cat, &Config{ScopeIndexBytes: arm.cache})
			require.NoError(b, err)
			probe := func() {
				p, err := f.probeScope(context.Background(), tbl, "scoped", req)
				require.NoError(b, err)
				require.Len(b, p.entries, 1000-dupes(keys))
			}
			t0 := time.Now()
			probe() // the first probe builds the indexes
			first := time.Since(t0)
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				probe()
			}
			b.StopTimer()
			b.ReportMetric(first.Seconds(), "s/first-probe")
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/probe")
			b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/probe")
		})
	}
}

// dupes counts the repeated values of keys' first (int64) column.
func dupes(keys arrow.RecordBatch) int {
	seen := map[int64]bool{}
	n := 0
	for _, v := range keys.Column(0).(*array.Int64).Int64Values() {
		if seen[v] {
			n++
		}
		seen[v] = true
	}
	return n
}
