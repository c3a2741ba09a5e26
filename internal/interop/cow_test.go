package interop

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/writestrategy"
)

// TestDuckDBCopyOnWriteMerge reads with DuckDB tables whose merges changed
// enough of the rows to be copy-on-write: the touched files are rewritten
// with the merge's and the earlier deletes applied, so the data files
// alone hold exactly the source's rows, on format v2 and on v3 (where
// DuckDB without the Iceberg extension cannot apply deletion vectors).
func TestDuckDBCopyOnWriteMerge(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{"cow_snap", "v3_cow_snap"} {
		t.Run(id, func(t *testing.T) {
			e.t = t
			src := id + "_src"
			snap := writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: src, Target: id, Key: []string{"id"}}
			src1 := `SELECT g AS id, 'v1-' || g AS txt, (g * 1.25)::numeric(10,2) AS amount FROM generate_series(1, 400) g`
			// a small change first: merge-on-read (3 keys leave)
			src2 := `SELECT g AS id, 'v1-' || g AS txt, (g * 1.25)::numeric(10,2) AS amount FROM generate_series(4, 400) g`
			// then most rows: 100 keys leave, every other row changes; on
			// v3 every row changes (a v3 merge is copy-on-write only when
			// it removes every live row of the files it touches)
			src3 := `SELECT g AS id, CASE WHEN g % 2 = 0 THEN 'v3-' ELSE 'v1-' END || g AS txt, (g * 1.25)::numeric(10,2) AS amount
				FROM generate_series(101, 420) g`
			if id == "v3_cow_snap" {
				src3 = `SELECT g AS id, 'v3-' || g AS txt, (g * 1.25)::numeric(10,2) AS amount FROM generate_series(101, 420) g`
			}
			e.load(src, src1)
			e.write(snap)
			e.load(src, src2)
			e.write(snap)
			tbl, err := e.lw.Facade.LoadTable(e.ctx, id)
			require.NoError(t, err)
			tasks, err := tbl.Scan().PlanFiles(e.ctx)
			require.NoError(t, err)
			dels := 0
			for _, task := range tasks {
				dels += len(task.DeleteFiles) + len(task.DeletionVectorFiles)
			}
			require.Positive(t, dels, "the small change deleted by position")

			e.load(src, src3)
			e.write(snap)
			tbl, err = e.lw.Facade.LoadTable(e.ctx, id)
			require.NoError(t, err)
			tasks, err = tbl.Scan().PlanFiles(e.ctx)
			require.NoError(t, err)
			for _, task := range tasks {
				require.Empty(t, task.DeleteFiles, "copy-on-write leaves no deletes")
				require.Empty(t, task.DeletionVectorFiles, "copy-on-write leaves no deletes")
			}
			e.check(id, src3)
			var n int
			require.NoError(t, e.duck.QueryRowContext(e.ctx, `SELECT count(*) FROM `+readParquet(e.dataFiles(id))).Scan(&n))
			require.Equal(t, 320, n, "the data files alone hold the source's rows")
		})
	}
}
