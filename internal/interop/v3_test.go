package interop

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// TestDuckDBV3DeletionVectors documents what DuckDB makes of a format v3
// table whose merges wrote deletion vectors. The DuckDB linked here (the
// Go bindings' library) has no Iceberg extension (it is downloaded on
// first use, and the test runs offline), and its Parquet reader has no
// Puffin reader: it reads the data files whole, so the rows a deletion
// vector removed read as live. iceberg-go's scan applies the vectors and
// returns the right rows. Once maintenance has compacted the vectors away
// (every file rewritten with its deletes applied), DuckDB reads every
// value right again.
func TestDuckDBV3DeletionVectors(t *testing.T) {
	e := newEnv(t)
	const id = "v3_snap"
	src1 := `SELECT g AS id, 'v1-' || g AS txt, (g * 1.25)::numeric(10,2) AS amount FROM generate_series(1, 200) g`
	// 10 keys leave, 8 rows change, 5 keys arrive
	src2 := `SELECT g AS id, CASE WHEN g % 25 = 0 THEN 'v2-' ELSE 'v1-' END || g AS txt, (g * 1.25)::numeric(10,2) AS amount
		FROM generate_series(11, 205) g`
	snap := writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "v3_src", Target: id, Key: []string{"id"}}
	e.load("v3_src", src1)
	e.write(snap)
	tbl, err := e.lw.Facade.LoadTable(e.ctx, id)
	require.NoError(t, err)
	require.Equal(t, 3, tbl.Metadata().Version())
	e.check(id, src1) // no deletes yet: plain Parquet

	e.load("v3_src", src2)
	e.write(snap)
	tbl, err = e.lw.Facade.LoadTable(e.ctx, id)
	require.NoError(t, err)
	tasks, err := tbl.Scan().PlanFiles(e.ctx)
	require.NoError(t, err)
	dvs := 0
	for _, task := range tasks {
		require.Empty(t, task.DeleteFiles, "no position delete files on v3")
		dvs += len(task.DeletionVectorFiles)
	}
	require.Equal(t, 1, dvs, "the merge wrote a deletion vector")

	// iceberg-go applies the vector: exactly the source's rows.
	var want, got []string
	rows, err := e.pool.Query(e.ctx, `SELECT id || ' ' || txt FROM (`+src2+`) q`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		want = append(want, s)
	}
	require.NoError(t, rows.Err())
	for rec, err := range e.lw.Facade.Scan(e.ctx, id, facade.ScanOptions{Columns: []string{"id", "txt"}}) {
		require.NoError(t, err)
		for i := range int(rec.NumRows()) {
			got = append(got, rec.Column(0).ValueStr(i)+" "+rec.Column(1).ValueStr(i))
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	require.Equal(t, want, got, "iceberg-go's scan")

	// DuckDB's read_parquet of the data files: the 18 rows the vector
	// removed (10 gone, 8 old versions) read as live.
	var n int
	require.NoError(t, e.duck.QueryRowContext(e.ctx, `SELECT count(*) FROM `+readParquet(e.dataFiles(id))).Scan(&n))
	require.Equal(t, len(want)+18, n, "DuckDB without the Iceberg extension does not apply deletion vectors")

	// Compaction applies the vector: DuckDB reads the right rows again.
	rep, err := e.lw.Facade.MaintainWith(e.ctx, id, facade.Lifecycle{CompactMinFiles: 2, KeepLast: 1, FileGrace: -1, EveryCommits: 1})
	require.NoError(t, err)
	require.Positive(t, rep.CompactedFiles)
	e.check(id, src2)
}
