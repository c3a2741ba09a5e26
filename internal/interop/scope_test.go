package interop

import (
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
)

// TestDuckDBScopedReplace reads with DuckDB tables written by scoped
// replaces: on format v2 the position deletes of two scoped writes (the
// second on the rows of the first), then the table compacted; on v3 the
// table once compaction applied its deletion vectors. DuckDB reads the
// rows iceberg-go reads, duplicates included.
func TestDuckDBScopedReplace(t *testing.T) {
	e := newEnv(t)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "grp", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "txt", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	batch := func(grps []int64, txts []string) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).AppendValues(grps, nil)
		b.Field(1).(*array.StringBuilder).AppendValues(txts, nil)
		return b.NewRecordBatch()
	}
	for _, id := range []string{"scoped_duck", "v3_scoped_duck"} {
		t.Run(id, func(t *testing.T) {
			e.t = t
			write := func(keys []int64, grps []int64, txts []string) {
				t.Helper()
				rec := batch(grps, txts)
				defer rec.Release()
				req := facade.WriteRequest{Mode: facade.Replace, Schema: sc, Rows: func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }}
				if keys != nil {
					kb := array.NewInt64Builder(memory.DefaultAllocator)
					kb.AppendValues(keys, nil)
					ka := kb.NewArray()
					kb.Release()
					req.Scope = &facade.Scope{Columns: []string{"grp"}, Keys: array.NewRecordBatch(arrow.NewSchema(sc.Fields()[:1], nil), []arrow.Array{ka}, int64(ka.Len()))}
					ka.Release()
					defer req.Scope.Keys.Release()
				}
				_, err := e.lw.Facade.Write(e.ctx, facade.Target{DatasetID: id}, req)
				require.NoError(t, err)
			}
			same := func() {
				t.Helper()
				var ice, duck []string
				for rec, err := range e.lw.Facade.Scan(e.ctx, id, facade.ScanOptions{Columns: []string{"grp", "txt"}}) {
					require.NoError(t, err)
					for i := range int(rec.NumRows()) {
						ice = append(ice, rec.Column(0).ValueStr(i)+" "+rec.Column(1).ValueStr(i))
					}
				}
				rows, err := e.duck.QueryContext(e.ctx, `SELECT CAST(grp AS VARCHAR) || ' ' || txt FROM `+e.liveRows(id))
				require.NoError(t, err)
				for rows.Next() {
					var s string
					require.NoError(t, rows.Scan(&s))
					duck = append(duck, s)
				}
				require.NoError(t, rows.Err())
				rows.Close()
				slices.Sort(ice)
				slices.Sort(duck)
				require.NotEmpty(t, ice)
				require.Equal(t, ice, duck)
			}
			var grps []int64
			var txts []string
			for i := range int64(300) {
				grps, txts = append(grps, i%30), append(txts, fmt.Sprintf("v1-%d", i/60)) // each (grp, txt) twice
			}
			write(nil, grps, txts)
			// 1 unchanged, 2 loses a duplicate and changes a row, 3 goes, 40 arrives
			write([]int64{1, 2, 3, 40}, []int64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 40},
				[]string{"v1-0", "v1-0", "v1-1", "v1-1", "v1-2", "v1-2", "v1-3", "v1-3", "v1-4", "v1-4",
					"v1-0", "v1-1", "v1-1", "v1-2", "v1-2", "v1-3", "v1-3", "changed", "new"})
			// 2 again: the row the first write added goes too
			write([]int64{2, 5}, []int64{2, 5}, []string{"again", "v1-0"})
			if id == "scoped_duck" {
				require.Positive(t, e.deleteFiles(id))
				same()
			}
			rep, err := e.lw.Facade.MaintainWith(e.ctx, id, facade.Lifecycle{CompactMinFiles: 2, KeepLast: 1, FileGrace: -1, EveryCommits: 1})
			require.NoError(t, err)
			require.Positive(t, rep.CompactedFiles)
			require.Zero(t, e.deleteFiles(id))
			same()
		})
	}
}
