package interop

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
)

// TestDuckDBFindsEmptyStrings: the Parquet statistics DuckDB reads (and
// prunes row groups by) count the empty string in the minimum of a text
// column whose first batch held only empty strings over a value buffer
// with nil bytes (what a builder that never appended a byte leaves), on
// the facade's own writer (an unpartitioned table) and on iceberg-go's (a
// partitioned one); DuckDB finds every row of txt = "".
func TestDuckDBFindsEmptyStrings(t *testing.T) {
	e := newEnv(t)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "txt", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	ids := func(n int) arrow.Array {
		b := array.NewInt64Builder(memory.DefaultAllocator)
		defer b.Release()
		for range n {
			b.Append(1) // one bucket
		}
		return b.NewArray()
	}
	empties := func(n int) arrow.RecordBatch {
		offsets := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(make([]int32, n+1)))
		txt := array.MakeFromData(array.NewData(arrow.BinaryTypes.String, n,
			[]*memory.Buffer{nil, offsets, memory.NewBufferBytes(nil)}, nil, 0, 0))
		defer txt.Release()
		id := ids(n)
		defer id.Release()
		return array.NewRecordBatch(sc, []arrow.Array{id, txt}, int64(n))
	}
	texts := func(vals ...string) arrow.RecordBatch {
		b := array.NewStringBuilder(memory.DefaultAllocator)
		defer b.Release()
		b.AppendValues(vals, nil)
		txt := b.NewArray()
		defer txt.Release()
		id := ids(len(vals))
		defer id.Release()
		return array.NewRecordBatch(sc, []arrow.Array{id, txt}, int64(len(vals)))
	}
	for _, id := range []string{"empty_txt", "part_bucket"} {
		t.Run(id, func(t *testing.T) {
			e.t = t
			recs := []arrow.RecordBatch{empties(3), texts("b", "c")}
			_, err := e.lw.Facade.Write(e.ctx, facade.Target{DatasetID: id}, facade.WriteRequest{Mode: facade.Replace, Schema: sc,
				Rows: func(yield func(arrow.RecordBatch, error) bool) {
					for _, r := range recs {
						if !yield(r, nil) {
							return
						}
					}
				}})
			for _, r := range recs {
				r.Release()
			}
			require.NoError(t, err)
			// Every row group holding '' says so in its statistics, as
			// DuckDB reads them.
			for _, f := range e.dataFiles(id) {
				var rgs int
				require.NoError(t, e.duck.QueryRowContext(e.ctx, `SELECT count(*) FROM parquet_metadata('`+f+`')
					WHERE path_in_schema = 'txt' AND stats_min_value IS DISTINCT FROM ''`).Scan(&rgs))
				require.Zero(t, rgs, "row groups of %s whose minimum of txt is not ''", f)
			}
			var n int
			require.NoError(t, e.duck.QueryRowContext(e.ctx, `SELECT count(*) FROM `+e.liveRows(id)+` WHERE txt = ''`).Scan(&n))
			require.Equal(t, 3, n)
		})
	}
}
