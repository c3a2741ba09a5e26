package writestrategy_test

import (
	"context"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// TestSplitFilesOnIceberg: on tables whose data files iceberg-go plans as
// several scan tasks each (a tiny read.split.target-size stands in for
// files over 128 MiB), an Iceberg output is replaced three times, a Tier B
// write hydrates it as a source with every row exactly once on both sinks,
// and Verify finds the Iceberg checksum equal to the recomputed one.
func TestSplitFilesOnIceberg(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorldWith(t, nil, &facade.Config{RowGroupRows: 100,
		TableProperties: iceberg.Properties{table.ReadSplitTargetSizeKey: "1"}}, nil, nil)
	const n = 3000
	seedWorld(t, w, n)
	ensureOutputs(t, w.pool, "orders_ice", "from_ice_pg", "from_ice_ice")
	w.iceberg("orders_ice", "from_ice_ice")
	src := writestrategy.Transform{Output: "orders_ice", Source: "orders"}
	for range 4 { // a create and three replaces
		res := w.mustWrite(src)
		require.EqualValues(t, n, res[0].Rows)
		require.Equal(t, w.checksum("orders"), w.checksum("orders_ice"))
	}
	f := w.lake.(*facade.Facade)
	tbl, err := f.LoadTable(ctx, "orders_ice")
	require.NoError(t, err)
	tasks, err := tbl.Scan().PlanFiles(ctx)
	require.NoError(t, err)
	paths := map[string]bool{}
	for _, task := range tasks {
		paths[task.File.FilePath()] = true
	}
	require.Greater(t, len(tasks), len(paths), "the files are split into several scan tasks")

	for _, out := range []string{"from_ice_pg", "from_ice_ice"} {
		res := w.mustWrite(writestrategy.Transform{Output: out, Source: "orders_ice", Steps: []writestrategy.Step{
			{Name: "all", SQL: `SELECT * FROM source`}}})
		require.EqualValues(t, n, res[0].Rows, out)
		require.Equal(t, w.checksum("orders"), w.checksum(out), out)
	}
	ps, err := w.d.Verify(ctx, writestrategy.Request{Strategy: src})
	require.NoError(t, err)
	require.True(t, ps[0].OK(), "%+v", ps[0])
	require.EqualValues(t, n, ps[0].Computed.Rows)
}
