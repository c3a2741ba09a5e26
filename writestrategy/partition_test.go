package writestrategy_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// fileIDs reads the id column of one data file, in file order.
func fileIDs(t *testing.T, path string) []int64 {
	t.Helper()
	rd, err := file.OpenParquetFile(strings.TrimPrefix(path, "file://"), false)
	require.NoError(t, err)
	defer rd.Close()
	fr, err := pqarrow.NewFileReader(rd, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
	require.NoError(t, err)
	tbl, err := fr.ReadTable(context.Background())
	require.NoError(t, err)
	defer tbl.Release()
	col := tbl.Column(tbl.Schema().FieldIndices("id")[0])
	var ids []int64
	for _, chunk := range col.Data().Chunks() {
		ids = append(ids, chunk.(*array.Int64).Int64Values()...)
	}
	return ids
}

// TestDispatchPartitionedOutput: an output declared partitioned by
// identity(category) and day(ts), sorted by id descending, gets its compute
// ordered by the partition and sort keys (the source order interleaves the
// categories, which the facade would refuse): one data file per
// (category, day), rows sorted by id descending within each, the same
// checksum as the row-store output. A bucket-partitioned output cannot be
// ordered by the query: the write fails and nothing is committed.
func TestDispatchPartitionedOutput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorldWith(t, nil, &facade.Config{PartitionFor: func(id string) (facade.Partitioning, bool) {
		switch id {
		case "part_ice":
			return facade.Partitioning{
				Fields:    []facade.PartitionField{{Column: "category"}, {Column: "ts", Transform: "day"}},
				SortOrder: []facade.SortField{{Column: "id", Descending: true}},
			}, true
		case "bucket_ice":
			return facade.Partitioning{Fields: []facade.PartitionField{{Column: "id", Transform: "bucket[4]"}}}, true
		}
		return facade.Partitioning{}, false
	}}, nil, nil)
	seedWorld(t, w, 2000)
	ensureOutputs(t, w.pool, "part_pg", "part_ice", "bucket_ice")
	w.iceberg("part_ice", "bucket_ice")
	mk := func(out string) writestrategy.WriteStrategy {
		return writestrategy.Transform{Output: out, Source: "orders"}
	}
	pg := w.mustWrite(mk("part_pg"))
	ice := w.mustWrite(mk("part_ice"))
	require.Equal(t, pg[0].Rows, ice[0].Rows)
	require.Equal(t, w.checksum("part_pg"), w.checksum("part_ice"))

	tbl, err := w.lake.(*facade.Facade).LoadTable(ctx, "part_ice")
	require.NoError(t, err)
	tasks, err := tbl.Scan().PlanFiles(ctx)
	require.NoError(t, err)
	require.Len(t, tasks, 6) // 3 categories x 2 days
	parts := map[string]bool{}
	var total int
	for _, task := range tasks {
		key := fmt.Sprint(task.File.Partition())
		require.False(t, parts[key], "one file per partition")
		parts[key] = true
		ids := fileIDs(t, task.File.FilePath())
		require.True(t, slices.IsSortedFunc(ids, func(a, b int64) int { return int(b - a) }), "id descending within the file")
		total += len(ids)
	}
	require.Equal(t, 2000, total)

	// bucket: refused before writing, nothing committed
	_, err = w.write(mk("bucket_ice"))
	require.ErrorIs(t, err, facade.ErrInvalidRequest)
	_, err = w.lake.(*facade.Facade).LoadTable(ctx, "bucket_ice")
	require.ErrorIs(t, err, facade.ErrTableNotFound)
}
