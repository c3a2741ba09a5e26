//go:build unix

package facade

import (
	"context"
	"flag"
	"fmt"
	"iter"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// probeBenchRows sizes BenchmarkProbe1M and BenchmarkHashColumn1M.
var probeBenchRows = flag.Int("probe-bench-rows", 1<<20, "rows of the table BenchmarkProbe1M probes and BenchmarkHashColumn1M writes")

// incShape is the table shape of the bench's incremental mode
// (examples/bench): id, name 'name '||id, amount numeric(12,2), ts.
var incShape = []arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "amount", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
}

// hashField is a stored 64-bit row hash, as a stored-hash design would add
// to every table.
var hashField = arrow.Field{Name: "h", Type: arrow.PrimitiveTypes.Int64, Nullable: true}

// incShapeRows makes n rows of the incremental shape in batches of 64Ki
// rows, with a random int64 column h when withHash; release frees them.
func incShapeRows(n int, withHash bool) (sc *arrow.Schema, recs []arrow.RecordBatch, release func()) {
	fields := incShape
	if withHash {
		fields = append(fields[:len(fields):len(fields)], hashField)
	}
	sc = arrow.NewSchema(fields, nil)
	rnd := rand.New(rand.NewPCG(1, 2))
	for from := 1; from <= n; from += 64 << 10 {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		for g := from; g < min(from+64<<10, n+1); g++ {
			b.Field(0).(*array.Int64Builder).Append(int64(g))
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("name %d", g))
			b.Field(2).(*array.Decimal128Builder).Append(decimal128.FromI64(int64(g % 10000)))
			b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(1_767_225_600_000_000 + int64(g)*1_000_000))
			if withHash {
				b.Field(4).(*array.Int64Builder).Append(int64(rnd.Uint64()))
			}
		}
		recs = append(recs, b.NewRecordBatch())
		b.Release()
	}
	return sc, recs, func() {
		for _, r := range recs {
			r.Release()
		}
	}
}

// batchesOf yields recs (borrowed).
func batchesOf(recs []arrow.RecordBatch) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}
}

// cpuTime is the user+system CPU time of the process, all threads.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// tableBytes is the size of the data files of the dataset's current
// snapshot.
func tableBytes(tb testing.TB, f *Facade, ds string) int64 {
	tbl, err := f.LoadTable(context.Background(), ds)
	require.NoError(tb, err)
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	require.NoError(tb, err)
	var n int64
	for _, t := range tasks {
		n += t.File.FileSizeBytes()
	}
	return n
}

// BenchmarkProbe1M: the probe of a merge (probeMerge) of a table of the
// bench's incremental shape, reading and hashing every business column
// (all, what a merge does), the key column alone (key), and the key with
// a stored 64-bit hash column (key+hash, on a table that has one; the
// probe hashes both columns where a stored-hash probe would take the
// stored value as it is). Reports wall and CPU seconds per probe.
func BenchmarkProbe1M(b *testing.B) {
	rows := *probeBenchRows
	cat, err := OpenSQLCatalog(context.Background(), CatalogConfig{DatabaseURL: pgtest.URL(b), Warehouse: b.TempDir()})
	require.NoError(b, err)
	b.Cleanup(func() { cat.Close() })
	f, err := New(cat, &Config{TableProperties: map[string]string{dictColumnKey + hashField.Name: "false"}})
	require.NoError(b, err)
	for _, ds := range []string{"plain", "hashed"} {
		sc, recs, release := incShapeRows(rows, ds == "hashed")
		_, err := f.Write(context.Background(), Target{DatasetID: ds}, WriteRequest{Mode: Replace, Schema: sc, Rows: batchesOf(recs)})
		release()
		require.NoError(b, err)
	}
	for _, arm := range []struct {
		name, ds string
		cols     []arrow.Field
	}{
		{"all", "plain", incShape},
		{"key", "plain", incShape[:1]},
		{"key+hash", "hashed", []arrow.Field{incShape[0], hashField}},
	} {
		b.Run(arm.name, func(b *testing.B) {
			tbl, err := f.LoadTable(context.Background(), arm.ds)
			require.NoError(b, err)
			req := arrow.NewSchema(arm.cols, nil)
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p, err := f.probeMerge(context.Background(), tbl, []string{"id"}, req)
				require.NoError(b, err)
				require.Len(b, p.entries, rows)
			}
			b.StopTimer()
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/probe")
			b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/probe")
		})
	}
}

// BenchmarkHashColumn1M: a full write (Replace) of rows of the bench's
// incremental shape through the facade's own writer, without and with a
// random int64 column h (no dictionary, the table's zstd), as a stored row
// hash would add to every write. Reports wall and CPU seconds per write
// and the data file bytes.
func BenchmarkHashColumn1M(b *testing.B) {
	rows := *probeBenchRows
	cat, err := OpenSQLCatalog(context.Background(), CatalogConfig{DatabaseURL: pgtest.URL(b), Warehouse: b.TempDir()})
	require.NoError(b, err)
	b.Cleanup(func() { cat.Close() })
	f, err := New(cat, &Config{TableProperties: map[string]string{dictColumnKey + hashField.Name: "false"}})
	require.NoError(b, err)
	for _, arm := range []struct {
		name string
		hash bool
	}{{"without", false}, {"with", true}} {
		b.Run(arm.name, func(b *testing.B) {
			sc, recs, release := incShapeRows(rows, arm.hash)
			defer release()
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, err := f.Write(context.Background(), Target{DatasetID: "hash_" + arm.name}, WriteRequest{Mode: Replace, Schema: sc, Rows: batchesOf(recs)})
				require.NoError(b, err)
			}
			b.StopTimer()
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/write")
			b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/write")
			b.ReportMetric(float64(tableBytes(b, f, "hash_"+arm.name)), "file-bytes")
		})
	}
}
