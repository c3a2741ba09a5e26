package facade_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
)

// TestCompactOlderSpecs: a table whose declaration went from unpartitioned
// to day(ts) to month(ts) holds small files of three specs; compaction
// rewrites each spec's files within that spec and partition (one file for
// the unpartitioned ones, one per day for the day spec, one for the month),
// every row reads back the same, with the same checksum.
func TestCompactOlderSpecs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var decl *facade.Partitioning
	e := newIcebergEnv(t, func(c *facade.Config) {
		c.PartitionFor = func(string) (facade.Partitioning, bool) {
			if decl == nil {
				return facade.Partitioning{}, false
			}
			return *decl, true
		}
	})
	next := int64(0)
	appends := func(n, per int, day func(int64) int64) {
		t.Helper()
		for range n {
			ids := make([]int64, per)
			for i := range ids {
				ids[i] = next
				next++
			}
			_, err := e.f.Write(ctx, facade.Target{DatasetID: "spec-c"}, facade.WriteRequest{
				Mode: facade.Append, Schema: partSchema(), Rows: partRows(e.mem, ids, day, per)})
			require.NoError(t, err)
		}
	}
	layoutOf := func() map[string]int { // "spec/partition" -> files
		t.Helper()
		tbl, err := e.f.LoadTable(ctx, "spec-c")
		require.NoError(t, err)
		tasks, err := tbl.Scan().PlanFiles(ctx)
		require.NoError(t, err)
		out := map[string]int{}
		for _, task := range tasks {
			out[fmt.Sprint(task.File.SpecID(), task.File.Partition())]++
		}
		return out
	}

	appends(8, 50, func(int64) int64 { return 0 })
	decl = &facade.Partitioning{Fields: []facade.PartitionField{{Column: "ts", Transform: "day"}}}
	appends(8, 60, func(id int64) int64 { return (id - 8*50) % 60 / 30 }) // days 0 and 1, in order
	decl = &facade.Partitioning{Fields: []facade.PartitionField{{Column: "ts", Transform: "month"}}}
	appends(8, 40, func(id int64) int64 { return 3 + id%2 }) // days 3 and 4: January

	before := layoutOf()
	require.Len(t, before, 4) // spec 0, two days of the day spec, one month
	total := 0
	for _, n := range before {
		total += n
	}
	require.Equal(t, 32, total)
	sum, err := e.f.Checksum(ctx, "spec-c", 0)
	require.NoError(t, err)
	require.EqualValues(t, 8*50+8*60+8*40, sum.Rows)
	rows := scanAll(t, e, "spec-c")

	rep, err := e.f.MaintainWith(ctx, "spec-c", facade.Lifecycle{FileGrace: -1})
	require.NoError(t, err)
	require.Equal(t, 32, rep.CompactedFiles)
	require.Equal(t, 4, rep.WrittenFiles)
	after := layoutOf()
	require.Len(t, after, 4)
	for k := range before {
		require.Equal(t, 1, after[k], "one file for %s", k)
	}
	sum2, err := e.f.Checksum(ctx, "spec-c", 0)
	require.NoError(t, err)
	require.Equal(t, sum, sum2)
	require.Equal(t, rows, scanAll(t, e, "spec-c"))

	// the files keep their specs' partition values
	epochDay := partEpoch.Unix() / 86400
	tbl, err := e.f.LoadTable(ctx, "spec-c")
	require.NoError(t, err)
	tasks, err := tbl.Scan().PlanFiles(ctx)
	require.NoError(t, err)
	for _, task := range tasks {
		if task.File.Partition() == nil || len(task.File.Partition()) == 0 {
			continue
		}
		for _, v := range task.File.Partition() {
			p := partInt(t, v)
			require.True(t, p == epochDay || p == epochDay+1 || p == 54*12, "partition %d", p)
		}
	}
	e.mem.AssertSize(t, 0)
}
