package sliced_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
)

// TestSlicesPartitionedOutputs: a partitioned output (truncate, bucket,
// hour with a sort order) written in N = 2, 4 slices holds the rows and
// checksum one stream writes, each partition in one data file (a slice
// writes whole partitions); a sorted unpartitioned output is cut by
// ranges, each slice's file in the sort order.
func TestSlicesPartitionedOutputs(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.seedTable("rel", "src_table", 12000)
	for _, layout := range []string{"part_trunc", "part_bucket", "part_hour", "sorted_"} {
		one := layout + "_1"
		res, err := w.write(ctx, nil, transform(one, "rel"), 0)
		require.NoError(t, err)
		for _, n := range []int{2, 4} {
			out := fmt.Sprintf("%s_%d", layout, n)
			res, err = w.write(ctx, nil, transform(out, "rel"), n)
			require.NoError(t, err)
			require.Empty(t, res.SliceNote, layout)
			require.Equal(t, n, res.Slices, layout)
			w.requireSameRowsAnyOrder(one, out)
			tbl, err := w.f.LoadTable(ctx, out)
			require.NoError(t, err)
			tasks, err := tbl.Scan().PlanFiles(ctx)
			require.NoError(t, err)
			if layout == "sorted_" {
				require.Len(t, tasks, n, "a file per slice")
				for _, task := range tasks { // each file in the sort order: amount ascending, id descending
					_, recs, err := tbl.Scan(table.WithSelectedFields("amount", "id")).ReadTasks(ctx, []table.FileScanTask{task})
					require.NoError(t, err)
					var prev [2]float64
					first := true
					for rec, err := range recs {
						require.NoError(t, err)
						amt, id := rec.Column(rec.Schema().FieldIndices("amount")[0]), rec.Column(rec.Schema().FieldIndices("id")[0])
						for i := range int(rec.NumRows()) {
							a, err := strconv.ParseFloat(amt.ValueStr(i), 64)
							require.NoError(t, err)
							b, err := strconv.ParseFloat(id.ValueStr(i), 64)
							require.NoError(t, err)
							cur := [2]float64{a, b}
							if !first {
								require.True(t, prev[0] < cur[0] || (prev[0] == cur[0] && prev[1] > cur[1]), "%v after %v", cur, prev)
							}
							prev, first = cur, false
						}
						rec.Release()
					}
				}
				continue
			}
			parts := map[string]int{}
			for _, task := range tasks {
				parts[fmt.Sprint(task.File.Partition())]++
			}
			for p, files := range parts {
				require.Equal(t, 1, files, "%s: partition %s in one file", out, p)
			}
		}
	}
}
