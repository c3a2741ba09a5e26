package writestrategy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// An append_new output whose real columns widen to double precision keeps
// its older rows equal on both sinks: the row store widens the stored
// single precision values as Postgres' ALTER TABLE and Iceberg's
// float-to-double promotion do (0.1 reads 0.10000000149011612), instead of
// re-reading their short text as a double (0.1).
func TestAppendNewWidenRealToDouble(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	ctx := context.Background()
	w.exec(`CREATE TABLE widen_src (id bigint, f real, fa real[])`)
	w.exec(`INSERT INTO widen_src VALUES (1, 0.1, '{0.1,-0}'), (2, '-0', '{NaN,Infinity}'), (3, 1e-45, NULL), (4, NULL, '{NULL,3.3}'),
		(5, 'NaN', '{}'), (6, '-Infinity', '{1.17549435e-38}'), (7, 16777217, '{0.7}')`)
	narrow := schemaOf("id", "bigint", "f", "real")
	wide := schemaOf("id", "bigint", "f", "double precision")
	seedRowStore(t, w.pool, "wsrc", narrow, typedSelect(narrow, "widen_src"))
	// Arrays: Iceberg refuses to promote list<float> to list<double>, so
	// only the row store is checked, against Postgres' own widening.
	narrowA := schemaOf("id", "bigint", "fa", "real[]")
	wideA := schemaOf("id", "bigint", "fa", "double precision[]")
	seedRowStore(t, w.pool, "wsrca", narrowA, typedSelect(narrowA, "widen_src"))
	ensureOutputs(t, w.pool, "wda_pg")
	arrays := writestrategy.Deploy{Mode: writestrategy.KindAppendNew, Source: "wsrca", Target: "wda_pg", Key: []string{"id"}}
	w.mustWrite(arrays)
	ensureOutputs(t, w.pool, "wd_pg", "wd_ice")
	w.iceberg("wd_ice")
	deploy := func(out string) writestrategy.Deploy {
		return writestrategy.Deploy{Mode: writestrategy.KindAppendNew, Source: "wsrc", Target: out, Key: []string{"id"}}
	}
	run := func(msg string, rows int64, s writestrategy.Schema) {
		t.Helper()
		p := w.mustWrite(deploy("wd_pg"))[0]
		c := w.mustWrite(deploy("wd_ice"))[0]
		require.Equal(t, sink.Postgres, p.Sink, msg)
		require.Equal(t, sink.Iceberg, c.Sink, msg)
		require.Equal(t, rows, p.Rows, msg)
		require.Equal(t, rows, c.Rows, msg)
		require.Equal(t, soakDatasetRows(w, s, "wd_pg"), soakDatasetRows(w, s, "wd_ice"), msg)
		require.Equal(t, w.checksum("wd_pg"), w.checksum("wd_ice"), msg)
		for _, out := range []string{"wd_pg", "wd_ice"} {
			ps, err := w.d.Verify(ctx, writestrategy.Request{WriterID: writer, Strategy: deploy(out)})
			require.NoError(t, err)
			require.Len(t, ps, 1)
		}
	}
	run("first", 7, narrow)
	// The source widens its columns and gains rows: the rows already in
	// the outputs read as Postgres itself widens them.
	w.exec(`ALTER TABLE widen_src ALTER COLUMN f TYPE double precision, ALTER COLUMN fa TYPE double precision[]`)
	w.exec(`INSERT INTO widen_src VALUES (8, 0.1, '{0.1}')`)
	seedRowStore(t, w.pool, "wsrc", wide, typedSelect(wide, "widen_src"))
	run("widened", 1, wide)
	seedRowStore(t, w.pool, "wsrca", wideA, typedSelect(wideA, "widen_src"))
	w.mustWrite(arrays)
	var want []string
	rs, err := w.pool.Query(ctx, `SELECT id::text || ' ' || coalesce(fa::text, 'NULL') FROM widen_src ORDER BY 1`)
	require.NoError(t, err)
	for rs.Next() {
		var s string
		require.NoError(t, rs.Scan(&s))
		want = append(want, s)
	}
	require.NoError(t, rs.Err())
	var gotA []string
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT array_agg(r ORDER BY r) FROM (SELECT (d.data->>'id') || ' ' || coalesce((d.data->>'fa')::float8[]::text, 'NULL') r
		FROM lakewrite.dataset_rows d WHERE dataset_id = 'wda_pg') x`).Scan(&gotA))
	require.Equal(t, want, gotA, "the row store's arrays widen as Postgres widens them")
	var got string
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT string_agg(f::text, ',' ORDER BY id) FROM widen_src WHERE id IN (1, 8)`).Scan(&got))
	require.Equal(t, "0.10000000149011612,0.1", got, "the source itself, widened by Postgres")
	rows := soakDatasetRows(w, wide, "wd_pg")
	require.Contains(t, strings.Join(rows, "\n"), "0.10000000149011612")
	w.exec(`INSERT INTO widen_src VALUES (9, 2.5, NULL)`)
	seedRowStore(t, w.pool, "wsrc", wide, typedSelect(wide, "widen_src"))
	run("run after", 1, wide)
}
