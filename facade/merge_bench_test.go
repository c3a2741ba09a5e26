package facade

import (
	"context"
	"fmt"
	"iter"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// mergeBenchSchema is the schema of mergeBenchRows.
var mergeBenchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "amount", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
}, nil)

// mergeBenchRows yields rows (id, name, amount, ts) of ids 0..n-1 in
// batches of 64Ki rows; rows whose id%every == 0 carry version v in name.
func mergeBenchRows(n, every, v int, preserved *int64) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for from := 0; from < n; from += 64 << 10 {
			b := array.NewRecordBuilder(memory.DefaultAllocator, mergeBenchSchema)
			for i := from; i < min(from+64<<10, n); i++ {
				b.Field(0).(*array.Int64Builder).Append(int64(i))
				if i%every == 0 {
					b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("name %d v%d", i, v))
				} else {
					b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("name %d", i))
				}
				b.Field(2).(*array.Float64Builder).Append(float64(i%10000) / 100)
				b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + int64(i)*1_000_000))
			}
			rec := b.NewRecordBatch()
			b.Release()
			more := yield(keyedBatch{RecordBatch: rec, preserved: preserved}, nil)
			rec.Release()
			if !more {
				return
			}
		}
	}
}

// BenchmarkMerge1M: merges of 1,048,576 rows by key into a table holding
// them, 1,024 rows changed per merge (the facade's part of a
// snapshot_replace: the probe, the filter, the writes and the commit).
func BenchmarkMerge1M(b *testing.B) {
	const rows, every = 1 << 20, 1 << 10
	cat, err := OpenSQLCatalog(context.Background(), SQLCatalogConfig{DatabaseURL: pgtest.URL(b), Warehouse: b.TempDir()})
	require.NoError(b, err)
	b.Cleanup(func() { cat.Close() })
	f, err := New(cat, nil)
	require.NoError(b, err)
	sc := mergeBenchSchema
	write := func(v int) (CommitResult, int64) {
		var preserved int64
		res, err := f.Write(context.Background(), Target{DatasetID: "merge_bench"}, WriteRequest{Mode: Replace, Schema: sc,
			Rows: mergeBenchRows(rows, every, v, &preserved)})
		require.NoError(b, err)
		return res, preserved
	}
	t0 := time.Now()
	write(0)
	full := time.Since(t0)
	var merge time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t1 := time.Now()
		res, preserved := write(i + 1)
		merge += time.Since(t1)
		require.Equal(b, int64(rows), res.Rows)
		require.Equal(b, int64(rows-rows/every), preserved)
	}
	b.ReportMetric(merge.Seconds()/float64(b.N), "s/merge")
	b.ReportMetric(merge.Seconds()/float64(b.N)/full.Seconds(), "x_full")
}
