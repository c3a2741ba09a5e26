package facade_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// BenchmarkWritePartitioned1M: a replace of 1,048,576 in-memory rows (the
// shape of BenchmarkWriteReplace1M, ts ascending over ~12 days) into an
// unpartitioned table, by day(ts) (12 files) and by hour(ts) (~290 files),
// in the same run. Reports rows/s and the ratio to the unpartitioned write.
func BenchmarkWritePartitioned1M(b *testing.B) {
	const rows = 1 << 20
	mem := memory.NewGoAllocator()
	sc := benchSchema()
	var bs []arrow.RecordBatch
	for from := 0; from < rows; from += benchBatchRows {
		bs = append(bs, benchBatch(mem, sc, from, benchBatchRows))
	}
	defer func() {
		for _, x := range bs {
			x.Release()
		}
	}()
	cat, err := facade.OpenSQLCatalog(context.Background(), facade.CatalogConfig{DatabaseURL: pgtest.URL(b), Warehouse: b.TempDir()})
	require.NoError(b, err)
	b.Cleanup(func() { cat.Close() })
	f, err := facade.New(cat, &facade.Config{Allocator: mem, PartitionFor: func(id string) (facade.Partitioning, bool) {
		switch id {
		case "day":
			return facade.Partitioning{Fields: []facade.PartitionField{{Column: "ts", Transform: "day"}}}, true
		case "hour":
			return facade.Partitioning{Fields: []facade.PartitionField{{Column: "ts", Transform: "hour"}}}, true
		}
		return facade.Partitioning{}, false
	}})
	require.NoError(b, err)
	write := func(dataset string) (time.Duration, int) {
		t0 := time.Now()
		res, err := f.Write(context.Background(), facade.Target{DatasetID: dataset}, facade.WriteRequest{
			Mode: facade.Replace, Schema: sc, Rows: func(yield func(arrow.RecordBatch, error) bool) {
				for _, x := range bs {
					if !yield(x, nil) {
						return
					}
				}
			}})
		require.NoError(b, err)
		return time.Since(t0), len(res.DataFiles)
	}
	var plain, day, hour time.Duration
	var dayFiles, hourFiles int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, _ := write("plain")
		plain += d
		d, dayFiles = write("day")
		day += d
		d, hourFiles = write("hour")
		hour += d
	}
	b.StopTimer()
	n := float64(b.N) * rows
	b.ReportMetric(n/plain.Seconds(), "plain_rows/s")
	b.ReportMetric(n/day.Seconds(), "day_rows/s")
	b.ReportMetric(n/hour.Seconds(), "hour_rows/s")
	b.ReportMetric(plain.Seconds()/day.Seconds(), "day_ratio")
	b.ReportMetric(plain.Seconds()/hour.Seconds(), "hour_ratio")
	b.ReportMetric(float64(dayFiles), "day_files")
	b.ReportMetric(float64(hourFiles), "hour_files")
}
