package facade_test

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
)

// TestEmptyStringBounds: a batch whose text values are all "" and whose
// value buffer holds a nil byte slice (as a builder that never appended a
// byte leaves it) still counts "" in the file's Parquet minimum and its
// Iceberg lower bound, so that a scan for k = "" (and any engine pruning
// by these statistics) finds the file: on a write, a scoped replace and a
// compaction.
func TestEmptyStringBounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newIcebergEnv(t)
	defer e.mem.AssertSize(t, 0)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	// emptyKeys is n rows of k = "" over a value buffer with nil bytes.
	emptyKeys := func(v0 int64, n int) arrow.RecordBatch {
		offsets := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(make([]int32, n+1)))
		k := array.MakeFromData(array.NewData(arrow.BinaryTypes.String, n,
			[]*memory.Buffer{nil, offsets, memory.NewBufferBytes(nil)}, nil, 0, 0))
		defer k.Release()
		require.Nil(t, k.(*array.String).ValueBytes())
		vb := array.NewInt64Builder(e.mem)
		defer vb.Release()
		for i := range n {
			vb.Append(v0 + int64(i))
		}
		v := vb.NewArray()
		defer v.Release()
		return array.NewRecordBatch(sc, []arrow.Array{k, v}, int64(n))
	}
	keys := func(v0 int64, ks ...string) arrow.RecordBatch {
		b := array.NewRecordBuilder(e.mem, sc)
		defer b.Release()
		for i, k := range ks {
			b.Field(0).(*array.StringBuilder).Append(k)
			b.Field(1).(*array.Int64Builder).Append(v0 + int64(i))
		}
		return b.NewRecordBatch()
	}
	// rows yields recs, released once the write has read them.
	rows := func(recs ...arrow.RecordBatch) func(func(arrow.RecordBatch, error) bool) {
		return func(yield func(arrow.RecordBatch, error) bool) {
			defer func() {
				for _, r := range recs {
					r.Release()
				}
			}()
			for _, r := range recs {
				if !yield(r, nil) {
					return
				}
			}
		}
	}
	// emptyRows counts the rows of k = '' a filtered scan returns.
	emptyRows := func() int {
		n := 0
		for _, opts := range []facade.ScanOptions{
			{In: []facade.In{{Column: "k", Values: []any{""}}}},
			{Filter: []facade.Range{{Column: "k", Min: "", Max: ""}}},
		} {
			got := 0
			for rec, err := range e.f.Scan(ctx, "empties", opts) {
				require.NoError(t, err)
				got += int(rec.NumRows())
			}
			if n == 0 {
				n = got
			}
			require.Equal(t, n, got, "In and Range agree")
		}
		return n
	}
	// checkBounds: every data file holding "" has a Parquet minimum of ""
	// in each row group holding it, and no Iceberg lower bound above "".
	checkBounds := func() {
		tbl, err := e.f.LoadTable(ctx, "empties")
		require.NoError(t, err)
		tasks, err := tbl.Scan().PlanFiles(ctx)
		require.NoError(t, err)
		fsys, err := tbl.FS(ctx)
		require.NoError(t, err)
		f, ok := tbl.Schema().FindFieldByName("k")
		require.True(t, ok)
		withEmpty := 0
		for _, task := range tasks {
			r, err := fsys.Open(task.File.FilePath())
			require.NoError(t, err)
			rdr, err := file.NewParquetReader(r)
			require.NoError(t, err)
			fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, e.mem)
			require.NoError(t, err)
			col := rdr.MetaData().Schema.ColumnIndexByName("k")
			fileHas := false
			for g := range rdr.NumRowGroups() {
				tab, err := fr.ReadRowGroups(ctx, []int{col}, []int{g})
				require.NoError(t, err)
				has := false
				for _, c := range tab.Column(0).Data().Chunks() {
					for i := range c.Len() {
						has = has || (c.IsValid(i) && c.(*array.String).Value(i) == "")
					}
				}
				tab.Release()
				if !has {
					continue
				}
				fileHas = true
				cc, err := rdr.MetaData().RowGroup(g).ColumnChunk(col)
				require.NoError(t, err)
				st, err := cc.Statistics()
				require.NoError(t, err)
				if st != nil && st.HasMinMax() {
					require.Empty(t, st.(*metadata.ByteArrayStatistics).Min(), "Parquet minimum of k in %s", task.File.FilePath())
				}
			}
			require.NoError(t, rdr.Close())
			if fileHas {
				withEmpty++
				if lo, ok := task.File.LowerBoundValues()[f.ID]; ok {
					require.Empty(t, lo, "lower bound of k in %s", task.File.FilePath())
				}
			}
		}
		require.Positive(t, withEmpty, "a file holds k = ''")
	}

	_, err := e.f.Write(ctx, facade.Target{DatasetID: "empties"}, facade.WriteRequest{Mode: facade.Replace, Schema: sc,
		Rows: rows(emptyKeys(0, 2), keys(10, "b", "c"))})
	require.NoError(t, err)
	require.Equal(t, 2, emptyRows())
	checkBounds()

	// A scoped replace of k = '' and 'b' writes "" again, and deletes the
	// old rows of ''.
	scope := keys(0, "", "b") // k and v: project to k
	scopeKeys := array.NewRecordBatch(arrow.NewSchema(sc.Fields()[:1], nil), scope.Columns()[:1], scope.NumRows())
	defer scopeKeys.Release()
	defer scope.Release()
	_, err = e.f.Write(ctx, facade.Target{DatasetID: "empties"}, facade.WriteRequest{Mode: facade.Replace, Schema: sc,
		Scope: &facade.Scope{Columns: []string{"k"}, Keys: scopeKeys},
		Rows:  rows(emptyKeys(20, 3), keys(30, "b"))})
	require.NoError(t, err)
	require.Equal(t, 3, emptyRows())
	checkBounds()

	// Enough small files for compaction to rewrite them.
	for i := range 3 {
		_, err = e.f.Write(ctx, facade.Target{DatasetID: "empties"}, facade.WriteRequest{Mode: facade.Append, Schema: sc,
			Rows: rows(emptyKeys(int64(100+10*i), 1), keys(int64(105+10*i), "d"))})
		require.NoError(t, err)
	}
	require.Equal(t, 6, emptyRows())
	rep, err := e.f.MaintainWith(ctx, "empties", facade.Lifecycle{CompactMinFiles: 2, FileGrace: -1, OrphanEvery: -1})
	require.NoError(t, err)
	require.Positive(t, rep.CompactedFiles, "compacted")
	require.Equal(t, 6, emptyRows())
	checkBounds()
}
