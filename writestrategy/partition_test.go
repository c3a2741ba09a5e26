package writestrategy_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/cursor"
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
// checksum as the row-store output.
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
		}
		return facade.Partitioning{}, false
	}}, nil, nil)
	seedWorld(t, w, 2000)
	ensureOutputs(t, w.pool, "part_pg", "part_ice")
	w.iceberg("part_ice")
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

}

// orderRow is the orders fixture's row for id (ordersSQL).
func orderRow(id int64) (name, category string, ts time.Time) {
	return fmt.Sprintf("name %d", id%7), []string{"a", "b", "c"}[id%3],
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(id) * time.Minute)
}

// TestDispatchBucketPartitionedOutput: outputs partitioned by bucket[8] of
// a bigint, identity(category) plus bucket[4] of a text column, bucket[5]
// of a timestamptz and bucket[3] of a smallint get their compute ordered by the Iceberg
// bucket computed in SQL (iceberg_bucket): one data file per partition,
// each recording the partition tuple iceberg-go computes for every one of
// its rows, and the same checksum as the row-store output. A bucket of a
// numeric column has no SQL bucket function: the write fails with a
// error matching ErrInvalid that names the column and its type, and
// nothing is committed.
func TestDispatchBucketPartitionedOutput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	layouts := map[string][]facade.PartitionField{
		"b_id":     {{Column: "id", Transform: "bucket[8]"}},
		"b_catnam": {{Column: "category"}, {Column: "name", Transform: "bucket[4]"}},
		"b_ts":     {{Column: "ts", Transform: "bucket[5]"}},
		"b_small":  {{Column: "small", Transform: "bucket[3]"}},
		"b_amount": {{Column: "amount", Transform: "bucket[4]"}},
	}
	w := newWorldWith(t, nil, &facade.Config{PartitionFor: func(id string) (facade.Partitioning, bool) {
		f, ok := layouts[id]
		return facade.Partitioning{Fields: f}, ok
	}}, nil, nil)
	const n = 2000
	seedWorld(t, w, n)
	ensureOutputs(t, w.pool, "b_pg", "b_id", "b_catnam", "b_ts", "b_small", "b_amount")
	w.iceberg("b_id", "b_catnam", "b_ts", "b_small", "b_amount")
	mk := func(out string) writestrategy.WriteStrategy {
		return writestrategy.Transform{Output: out, Source: "orders", Steps: []writestrategy.Step{
			{Name: "s", SQL: `SELECT *, (id % 1000 - 500)::smallint AS small FROM source`}}}
	}
	w.mustWrite(mk("b_pg"))
	want := w.checksum("b_pg")

	bucket := func(src iceberg.Type, nb int, v any) any {
		return iceberg.BucketTransform{NumBuckets: nb}.Transformer(src)(v).Val
	}
	// expected partition tuple of a row, by partition field name
	tuple := map[string]func(id int64) []any{
		"b_id": func(id int64) []any { return []any{bucket(iceberg.PrimitiveTypes.Int64, 8, id)} },
		"b_catnam": func(id int64) []any {
			name, cat, _ := orderRow(id)
			return []any{cat, bucket(iceberg.PrimitiveTypes.String, 4, name)}
		},
		"b_ts": func(id int64) []any {
			_, _, ts := orderRow(id)
			return []any{bucket(iceberg.PrimitiveTypes.TimestampTz, 5, iceberg.Timestamp(ts.UnixMicro()))}
		},
		"b_small": func(id int64) []any { return []any{bucket(iceberg.PrimitiveTypes.Int32, 3, int32(id%1000-500))} },
	}
	for _, out := range []string{"b_id", "b_catnam", "b_ts", "b_small"} {
		res := w.mustWrite(mk(out))
		require.EqualValues(t, n, res[0].Rows, out)
		require.Equal(t, want, w.checksum(out), out)

		tbl, err := w.lake.(*facade.Facade).LoadTable(ctx, out)
		require.NoError(t, err)
		tasks, err := tbl.Scan().PlanFiles(ctx)
		require.NoError(t, err)
		wantParts := map[string]bool{}
		for id := int64(1); id <= n; id++ {
			wantParts[fmt.Sprint(tuple[out](id))] = true
		}
		require.Len(t, tasks, len(wantParts), "%s: one file per partition", out)
		seen := map[string]bool{}
		var total int
		for _, task := range tasks {
			var got []any
			spec := tbl.Spec()
			for _, pf := range spec.Fields() {
				got = append(got, task.File.Partition()[pf.FieldID])
			}
			key := fmt.Sprint(got)
			require.False(t, seen[key], "%s: one file per partition", out)
			seen[key] = true
			ids := fileIDs(t, task.File.FilePath())
			for _, id := range ids {
				require.Equal(t, tuple[out](id), got, "%s: row %d in the file of its partition", out, id)
			}
			total += len(ids)
		}
		require.Equal(t, n, total, out)
	}

	_, err := w.write(mk("b_amount"))
	require.ErrorIs(t, err, writestrategy.ErrInvalid)
	require.False(t, errors.Is(err, writestrategy.ErrPartitionKey))
	require.Contains(t, err.Error(), `dataset "b_amount": bucket partition column "amount" has type numeric(12,2)`)
	_, err = w.lake.(*facade.Facade).LoadTable(ctx, "b_amount")
	require.ErrorIs(t, err, facade.ErrTableNotFound)
}

// TestDispatchPartitionedTextUnderLinguisticCollation: an output
// partitioned by truncate[2] of a text column whose collation is a
// linguistic one (ICU: "ab" < "Ab" < "abc" < "Abd") is still written: the
// compute orders text partition keys by their bytes (COLLATE "C", the
// order Iceberg compares strings in), so each prefix arrives as one run.
func TestDispatchPartitionedTextUnderLinguisticCollation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorldWith(t, nil, &facade.Config{PartitionFor: func(id string) (facade.Partitioning, bool) {
		return facade.Partitioning{
			Fields:    []facade.PartitionField{{Column: "label", Transform: "truncate[2]"}},
			SortOrder: []facade.SortField{{Column: "label"}, {Column: "id"}},
		}, id == "coll_ice"
	}}, nil, nil)
	var icu bool
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_collation WHERE collname = 'und-x-icu')`).Scan(&icu))
	require.True(t, icu, "the test server has ICU collations")
	seedWorld(t, w, 600)
	ensureOutputs(t, w.pool, "coll_pg", "coll_ice")
	w.iceberg("coll_ice")
	mk := func(out string) writestrategy.WriteStrategy {
		return writestrategy.Transform{Output: out, Source: "orders", Steps: []writestrategy.Step{{Name: "labelled",
			SQL: `SELECT id, (CASE id % 6 WHEN 0 THEN 'ab' WHEN 1 THEN 'Ab' WHEN 2 THEN 'abc' WHEN 3 THEN 'Abd' WHEN 4 THEN 'a-b' ELSE 'ac' END) COLLATE "und-x-icu" AS label FROM source`}}}
	}
	pg := w.mustWrite(mk("coll_pg"))
	ice := w.mustWrite(mk("coll_ice"))
	require.Equal(t, pg[0].Rows, ice[0].Rows)
	require.Equal(t, w.checksum("coll_pg"), w.checksum("coll_ice"))
	tbl, err := w.lake.(*facade.Facade).LoadTable(ctx, "coll_ice")
	require.NoError(t, err)
	tasks, err := tbl.Scan().PlanFiles(ctx)
	require.NoError(t, err)
	require.Len(t, tasks, 4) // "ab", "Ab", "a-", "ac"
}

// TestDispatchPartitionedSortedAcrossBatches: with the compute streamed in
// batches much smaller than a partition, every data file is still sorted by
// the declared sort order: the compute orders by each partition field's
// value (day of a timestamp, truncated string, truncated integer), not by
// its source column, so the sort keys order the rows within a partition.
func TestDispatchPartitionedSortedAcrossBatches(t *testing.T) {
	t.Parallel()
	layouts := map[string]facade.Partitioning{
		"by_day": {Fields: []facade.PartitionField{{Column: "ts", Transform: "day"}},
			SortOrder: []facade.SortField{{Column: "id", Descending: true}}},
		"by_name": {Fields: []facade.PartitionField{{Column: "name", Transform: "truncate[6]"}},
			SortOrder: []facade.SortField{{Column: "id", Descending: true}}},
		"by_id": {Fields: []facade.PartitionField{{Column: "id", Transform: "truncate[500]"}},
			SortOrder: []facade.SortField{{Column: "ts", Descending: true}}},
	}
	w := newWorldWith(t, nil, &facade.Config{PartitionFor: func(id string) (facade.Partitioning, bool) {
		p, ok := layouts[id]
		return p, ok
	}}, &cursor.Options{BatchSize: 100}, nil)
	seedWorld(t, w, 2000)
	for out := range layouts {
		ensureOutputs(t, w.pool, out)
		w.iceberg(out)
		res := w.mustWrite(writestrategy.Transform{Output: out, Source: "orders"})
		require.EqualValues(t, 2000, res[0].Rows)
		tbl, err := w.lake.(*facade.Facade).LoadTable(context.Background(), out)
		require.NoError(t, err)
		tasks, err := tbl.Scan().PlanFiles(context.Background())
		require.NoError(t, err)
		require.Greater(t, len(tasks), 1, out)
		total := 0
		for _, task := range tasks {
			ids := fileIDs(t, task.File.FilePath())
			require.True(t, slices.IsSortedFunc(ids, func(a, b int64) int { return int(b - a) }), "%s: %s sorted by the sort order", out, task.File.FilePath())
			total += len(ids)
		}
		require.Equal(t, 2000, total, out)
	}
}
