package facade

import (
	"context"
	"flag"
	"fmt"
	"iter"
	"runtime"
	"strconv"
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

// mergeShareRows yields the rows of mergeBenchRows, rows whose id%1000 is
// below perMille carrying version v in name.
func mergeShareRows(n, perMille, v int, preserved *int64) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for from := 0; from < n; from += 64 << 10 {
			b := array.NewRecordBuilder(memory.DefaultAllocator, mergeBenchSchema)
			for i := from; i < min(from+64<<10, n); i++ {
				b.Field(0).(*array.Int64Builder).Append(int64(i))
				if v > 0 && i%1000 < perMille {
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
	cat, err := OpenSQLCatalog(context.Background(), CatalogConfig{DatabaseURL: pgtest.URL(b), Warehouse: b.TempDir()})
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

var (
	crossoverRows   = flag.Int("merge-crossover-rows", 1<<20, "BenchmarkMergeCrossover: rows of the target")
	crossoverFormat = flag.Int("merge-crossover-format", 2, "BenchmarkMergeCrossover: format version of the target, 2 or 3")
)

// BenchmarkMergeCrossover measures merge-on-read against copy-on-write:
// for each share of rows changed (that share of every 1,000 rows, spread
// over the target's files), a fresh target of -merge-crossover-rows rows, one merge
// forced each way, then a full read of the table (iceberg-go's scan, every
// column). It logs, per share, the merge's time and bytes written and the
// read's time, for both, and their ratios in the same run.
//
//	go test ./facade/ -run '^$' -bench BenchmarkMergeCrossover -benchtime 1x [-args -merge-crossover-format 3]
func BenchmarkMergeCrossover(b *testing.B) {
	rows := *crossoverRows
	cat, err := OpenSQLCatalog(context.Background(), CatalogConfig{DatabaseURL: pgtest.URL(b), Warehouse: b.TempDir()})
	require.NoError(b, err)
	b.Cleanup(func() { cat.Close() })
	version := *crossoverFormat
	f, err := New(cat, &Config{FormatVersionFor: func(string) (int, bool) { return version, true }})
	require.NoError(b, err)
	type arm struct {
		write, read time.Duration
		bytes       int64
	}
	run := func(ds string, perMille int, share float64) arm {
		var preserved int64
		write := func(v int) CommitResult {
			res, err := f.Write(context.Background(), Target{DatasetID: ds}, WriteRequest{Mode: Replace, Schema: mergeBenchSchema,
				Rows: mergeShareRows(rows, perMille, v, &preserved)})
			require.NoError(b, err)
			return res
		}
		write(0)
		f.s.mergeCoWShare = share
		runtime.GC()
		t0 := time.Now()
		res := write(1)
		var a arm
		a.write = time.Since(t0)
		a.bytes, _ = strconv.ParseInt(res.Summary["added-files-size"], 10, 64)
		changed := rows / 1000 * perMille
		if rest := rows % 1000; rest < perMille {
			changed += rest
		} else {
			changed += perMille
		}
		require.Equal(b, int64(rows-changed), preserved)
		tbl, err := f.LoadTable(context.Background(), ds)
		require.NoError(b, err)
		for range 2 { // the faster of two reads
			runtime.GC()
			t1 := time.Now()
			_, recs, err := tbl.Scan().ToArrowRecords(context.Background())
			require.NoError(b, err)
			var n int64
			for rec, err := range recs {
				require.NoError(b, err)
				n += rec.NumRows()
				rec.Release()
			}
			require.Equal(b, int64(rows), n)
			if d := time.Since(t1); a.read == 0 || d < a.read {
				a.read = d
			}
		}
		return a
	}
	for i := 0; i < b.N; i++ {
		b.Logf("%d rows, format v%d; per share changed: merge-on-read (MoR) and copy-on-write (CoW) write time, bytes written, full read after", rows, version)
		b.Logf("%7s | %9s %9s %5s | %10s %10s %5s | %9s %9s %5s | %s", "share", "MoR write", "CoW write", "x", "MoR bytes", "CoW bytes", "x",
			"MoR read", "CoW read", "x", "CoW/MoR write+read")
		for n, pct := range []float64{0.1, 1, 5, 10, 15, 20, 30, 50, 70, 90} {
			perMille := int(pct*10 + 0.5)
			mor := run(fmt.Sprintf("mor_%d", n), perMille, 2)
			cow := run(fmt.Sprintf("cow_%d", n), perMille, 1e-9)
			b.Logf("%6.1f%% | %8.3fs %8.3fs %5.2f | %10d %10d %5.2f | %8.3fs %8.3fs %5.2f | %.2f", pct,
				mor.write.Seconds(), cow.write.Seconds(), cow.write.Seconds()/mor.write.Seconds(),
				mor.bytes, cow.bytes, float64(cow.bytes)/float64(mor.bytes),
				mor.read.Seconds(), cow.read.Seconds(), cow.read.Seconds()/mor.read.Seconds(),
				(cow.write+cow.read).Seconds()/(mor.write+mor.read).Seconds())
		}
	}
}
