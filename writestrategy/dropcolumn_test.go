package writestrategy_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// An append_new whose source drops a column between runs: the Iceberg
// table keeps the column (earlier rows keep their values, later ones read
// NULL) while the dataset declares only the remaining columns, as on the
// row store. Both sinks then hold the same rows and report the same
// checksum (the dispatcher's and Verify's).
func TestAppendNewDroppedColumnParity(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	src := &schemaSource{mergeSource: newMergeSource(t, w.pool, 50), w: w, schema: mergeSchema}
	ensureOutputs(t, w.pool, "an_pg", "an_ice")
	w.iceberg("an_ice")
	deploy := func(out string) writestrategy.Deploy {
		return writestrategy.Deploy{Mode: writestrategy.KindAppendNew, Source: "src", Target: out, Key: []string{"id"}}
	}
	stored := func(out string) (sink.Sink, any) {
		t.Helper()
		ps, err := w.d.Verify(context.Background(), writestrategy.Request{WriterID: writer, Strategy: deploy(out)})
		require.NoError(t, err)
		require.Len(t, ps, 1)
		return ps[0].Sink, ps[0].Stored
	}
	run := func(msg string, rows int64) {
		t.Helper()
		p := w.mustWrite(deploy("an_pg"))[0]
		c := w.mustWrite(deploy("an_ice"))[0]
		require.Equal(t, sink.Postgres, p.Sink, msg)
		require.Equal(t, sink.Iceberg, c.Sink, msg)
		require.Equal(t, rows, p.Rows, msg)
		require.Equal(t, p.Rows, c.Rows, msg)
		require.Equal(t, writestrategy.ResultColumns(p), writestrategy.ResultColumns(c), msg)
		require.Equal(t, soakDatasetRows(w, src.schema, "an_pg"), soakDatasetRows(w, src.schema, "an_ice"), msg)
		require.Equal(t, w.checksum("an_pg"), w.checksum("an_ice"), msg)
		pgSink, pgSum := stored("an_pg")
		iceSink, iceSum := stored("an_ice")
		require.Equal(t, sink.Postgres, pgSink, msg)
		require.Equal(t, sink.Iceberg, iceSink, msg)
		require.Equal(t, pgSum, iceSum, "%s: Verify's stored checksums", msg)
	}
	run("first", 50)
	src.alter(`ALTER TABLE merge_src DROP COLUMN category`, schemaOf("id", "bigint", "v", "text", "n", "integer"))
	src.change(0, 5, 0)
	run("column dropped", 5)
	src.change(0, 5, 0)
	run("run after", 5)
	// The column comes back: the earlier rows' values are visible again on
	// both sinks, the rows written without it read NULL.
	src.alter(`ALTER TABLE merge_src ADD COLUMN category text; UPDATE merge_src SET category = 'z' WHERE id > 55`,
		schemaOf("id", "bigint", "v", "text", "n", "integer", "category", "text"))
	src.change(0, 5, 0)
	run("column added back", 5)
}
