package facade

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
)

// layoutSchema has a column of each kind whose Parquet layout the
// facade's writer chooses: decimals stored as INT32, INT64 and
// FIXED_LEN_BYTE_ARRAY, a low-cardinality string (dictionary), unique
// values (no dictionary), a timestamp and a double.
var layoutSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "amount", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}, Nullable: true},
	{Name: "small", Type: &arrow.Decimal128Type{Precision: 9, Scale: 2}, Nullable: true},
	{Name: "big", Type: &arrow.Decimal128Type{Precision: 30, Scale: 4}, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "payload", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
}, nil)

// layoutRows yields the rows ids (a version tag in name and payload) in
// batches of layoutBatchRows; keyed asks for a merge by id.
func layoutRows(ids []int64, tag func(int64) string, keyed bool) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for from := 0; from < len(ids); from += layoutBatchRows {
			b := array.NewRecordBuilder(memory.DefaultAllocator, layoutSchema)
			for _, id := range ids[from:min(from+layoutBatchRows, len(ids))] {
				b.Field(0).(*array.Int64Builder).Append(id)
				if id%11 == 0 {
					for c := 1; c < len(layoutSchema.Fields()); c++ {
						b.Field(c).AppendNull()
					}
					continue
				}
				b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("name-%d%s", id%37, tag(id)))
				b.Field(2).(*array.Decimal128Builder).Append(decimal128.FromI64(id*101 - 5000))
				b.Field(3).(*array.Decimal128Builder).Append(decimal128.FromI64(-id * 7))
				b.Field(4).(*array.Decimal128Builder).Append(decimal128.FromI64(id).Mul(decimal128.FromU64(1e17)))
				b.Field(5).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + id*1_000_003))
				b.Field(6).(*array.StringBuilder).Append(fmt.Sprintf("payload-%d-%s-%s", id, tag(id), strings.Repeat("p", int(id%17))))
				b.Field(7).(*array.Float64Builder).Append(float64(id) / 3)
			}
			rec := b.NewRecordBatch()
			b.Release()
			var out arrow.RecordBatch = rec
			if keyed {
				var preserved int64
				out = keyedBatch{RecordBatch: rec, preserved: &preserved}
			}
			more := yield(out, nil)
			rec.Release()
			if !more {
				return
			}
		}
	}
}

// layoutBatchRows: enough rows per batch for the writer's dictionary
// choice to look at the values (minDictSample).
const layoutBatchRows = 1100

func writeLayout(t *testing.T, f *Facade, ds string, mode WriteMode, ids []int64, tag func(int64) string, keyed bool) {
	t.Helper()
	_, err := f.Write(context.Background(), Target{DatasetID: ds}, WriteRequest{Mode: mode, Schema: layoutSchema, Rows: layoutRows(ids, tag, keyed)})
	require.NoError(t, err)
}

func noTag(int64) string { return "" }

// columnLayout is how one column is stored in a Parquet file.
type columnLayout struct {
	FieldID     int32
	Physical    parquet.Type
	TypeLength  int
	Logical     string
	Compression string
	Encodings   []parquet.Encoding
	Dictionary  bool
}

// fileLayout is the layout of every column of a data file (all row groups).
func fileLayout(t *testing.T, path string) map[string]columnLayout {
	t.Helper()
	pf, err := file.OpenParquetFile(strings.TrimPrefix(path, "file://"), false)
	require.NoError(t, err)
	defer pf.Close()
	md := pf.MetaData()
	out := map[string]columnLayout{}
	for i := range md.Schema.NumColumns() {
		col := md.Schema.Column(i)
		l := columnLayout{FieldID: col.SchemaNode().FieldID(), Physical: col.PhysicalType(), TypeLength: col.TypeLength(),
			Logical: col.LogicalType().String()}
		for rg := range md.NumRowGroups() {
			cc, err := md.RowGroup(rg).ColumnChunk(i)
			require.NoError(t, err)
			l.Compression = cc.Compression().String()
			l.Encodings = append(l.Encodings, cc.Encodings()...)
			l.Dictionary = l.Dictionary || cc.HasDictionaryPage()
		}
		slices.Sort(l.Encodings)
		l.Encodings = slices.Compact(l.Encodings)
		out[col.Name()] = l
	}
	return out
}

// requireLayoutLike checks that df is stored as ref is (every column of
// ref's file, with the same field ids, physical and logical types,
// codecs, encodings and dictionaries) and carries ref's statistics for
// the columns whose values the two files share (skip: the others); lineage
// says whether df holds the format v3 row lineage columns.
func requireLayoutLike(t *testing.T, tbl *table.Table, df, ref iceberg.DataFile, lineage bool, skip ...string) {
	t.Helper()
	got, want := fileLayout(t, df.FilePath()), fileLayout(t, ref.FilePath())
	require.Equal(t, want, common(got, want), df.FilePath())
	for name, l := range want {
		fld, ok := tbl.Schema().FindFieldByName(name)
		require.True(t, ok, name)
		require.EqualValues(t, fld.ID, l.FieldID, name)
	}
	for _, name := range []string{iceberg.RowIDColumnName, iceberg.LastUpdatedSequenceNumberColumnName} {
		_, ok := got[name]
		require.Equal(t, lineage, ok, "%s in %s", name, df.FilePath())
	}
	if !lineage {
		require.Len(t, got, len(want))
	}
	require.Equal(t, ref.Count(), df.Count())
	for _, fld := range tbl.Schema().Fields() {
		if slices.Contains(skip, fld.Name) {
			continue
		}
		id := fld.ID
		require.Equal(t, ref.ValueCounts()[id], df.ValueCounts()[id], "value count of %s", fld.Name)
		require.Equal(t, ref.NullValueCounts()[id], df.NullValueCounts()[id], "null count of %s", fld.Name)
		require.Equal(t, ref.LowerBoundValues()[id], df.LowerBoundValues()[id], "lower bound of %s", fld.Name)
		require.Equal(t, ref.UpperBoundValues()[id], df.UpperBoundValues()[id], "upper bound of %s", fld.Name)
		require.Contains(t, df.ColumnSizes(), id, "column size of %s", fld.Name)
	}
}

// common is got restricted to the columns of want.
func common(got, want map[string]columnLayout) map[string]columnLayout {
	out := map[string]columnLayout{}
	for name := range want {
		if l, ok := got[name]; ok {
			out[name] = l
		}
	}
	return out
}

// onlyFile is the one live data file of ds.
func onlyFile(t *testing.T, f *Facade, ds string) iceberg.DataFile {
	t.Helper()
	files := liveFiles(t, mustLoad(t, f, ds))
	require.Len(t, files, 1)
	return files[0]
}

// TestCompactFilesLikeWrites: compaction writes its files as a write
// writes them (decimals of precision <= 18 as INT32/INT64, the identity
// columns' encodings and codecs, dictionaries where a write has them,
// field ids and the same statistics as one write of the same rows), on
// format v2 and v3 (where the files also carry the row lineage); every
// row keeps its values and identity.
func TestCompactFilesLikeWrites(t *testing.T) {
	t.Parallel()
	for _, version := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			t.Parallel()
			e := newCompactEnv(t, func(c *Config) { c.FormatVersionFor = func(string) (int, bool) { return version, true } })
			defer e.mem.AssertSize(t, 0)
			ctx := context.Background()
			ids := idRange(0, 4*layoutBatchRows)
			// the reference: the same rows in one write
			writeLayout(t, e.f, "ref", Replace, ids, noTag, false)
			ref := onlyFile(t, e.f, "ref")
			for i := range 4 {
				writeLayout(t, e.f, "c", Append, ids[i*layoutBatchRows:(i+1)*layoutBatchRows], noTag, false)
			}
			tbl := mustLoad(t, e.f, "c")
			for _, df := range liveFiles(t, tbl) {
				// every append's file is laid out as the reference's
				require.Equal(t, fileLayout(t, ref.FilePath()), fileLayout(t, df.FilePath()))
			}
			before := fullRows(t, e.f, "c")
			var lin map[int64][2]int64
			if version >= 3 {
				lin = lineageOf(t, e.f, "c")
			}

			tbl, rep, err := e.f.compact(ctx, tbl, compactOptions{MinFiles: 4})
			require.NoError(t, err)
			require.Equal(t, 4, rep.CompactedFiles)
			require.Equal(t, 1, rep.WrittenFiles)
			df := onlyFile(t, e.f, "c")
			require.Equal(t, table.OpReplace, tbl.CurrentSnapshot().Summary.Operation)
			requireLayoutLike(t, tbl, df, ref, version >= 3, ColRowID, ColCreatedAt)
			require.Equal(t, before, fullRows(t, e.f, "c"))
			if version >= 3 {
				require.Equal(t, lin, lineageOf(t, e.f, "c"))
				// the lineage columns have statistics too: row ids 0..4399,
				// the sequence numbers of the four appends
				for id, bounds := range map[int][2]int64{
					iceberg.RowIDFieldID:                     {0, int64(len(ids)) - 1},
					iceberg.LastUpdatedSequenceNumberFieldID: {1, 4},
				} {
					lo, _ := int64Bound(df.LowerBoundValues()[id])
					hi, _ := int64Bound(df.UpperBoundValues()[id])
					require.Equal(t, bounds, [2]int64{lo, hi}, "bounds of field %d", id)
					require.EqualValues(t, len(ids), df.ValueCounts()[id])
				}
			}
			want, err := e.f.Checksum(ctx, "ref", 0)
			require.NoError(t, err)
			got, err := e.f.Checksum(ctx, "c", 0)
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
}

// TestMergeCoWFilesLikeWrites: a copy-on-write merge writes the files it
// rewrites as a write writes its files, on format v2 and v3 (with the row
// lineage); the rows it keeps keep their values and identity.
func TestMergeCoWFilesLikeWrites(t *testing.T) {
	t.Parallel()
	for _, version := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			t.Parallel()
			e := newCompactEnv(t, copyOnWriteAll, func(c *Config) { c.FormatVersionFor = func(string) (int, bool) { return version, true } })
			defer e.mem.AssertSize(t, 0)
			ids := idRange(0, 4*layoutBatchRows)
			changed := func(id int64) string {
				if id%4 == 1 {
					return "-changed"
				}
				return ""
			}
			// the reference: the merge's result in one write
			writeLayout(t, e.f, "ref", Replace, ids, changed, false)
			ref := onlyFile(t, e.f, "ref")

			writeLayout(t, e.f, "cow", Replace, ids, noTag, true)
			old := onlyFile(t, e.f, "cow")
			require.Equal(t, fileLayout(t, ref.FilePath()), fileLayout(t, old.FilePath()))
			ident0 := liveIdentity(t, e.f, "cow")
			var lin0 map[int64][2]int64
			if version >= 3 {
				lin0 = lineageOf(t, e.f, "cow")
			}

			writeLayout(t, e.f, "cow", Replace, ids, changed, true)
			tbl := mustLoad(t, e.f, "cow")
			require.Equal(t, table.OpOverwrite, tbl.CurrentSnapshot().Summary.Operation)
			dvs, pos := liveDVs(t, e.f, "cow")
			require.Empty(t, dvs)
			require.Zero(t, pos)
			files := liveFiles(t, tbl)
			require.Len(t, files, 2, "the rewrite and the changed rows")
			var unchanged int64
			for _, id := range ids {
				if changed(id) == "" || id%11 == 0 { // a row of NULLs has no tag
					unchanged++
				}
			}
			var rewrite iceberg.DataFile
			for _, df := range files {
				require.NotEqual(t, old.FilePath(), df.FilePath())
				if df.Count() == unchanged {
					rewrite = df
				}
			}
			require.NotNil(t, rewrite, "the rewrite of the unchanged rows")
			// the layout of a write's file; statistics: the rewrite holds
			// other rows than the reference
			refLayout := fileLayout(t, ref.FilePath())
			got := fileLayout(t, rewrite.FilePath())
			require.Equal(t, refLayout, common(got, refLayout), "the rewrite")
			_, hasLineage := got[iceberg.RowIDColumnName]
			require.Equal(t, version >= 3, hasLineage)
			for _, df := range files {
				if df != rewrite {
					require.Equal(t, refLayout, fileLayout(t, df.FilePath()), "the changed rows' file")
				}
			}

			want, err := e.f.Checksum(context.Background(), "ref", 0)
			require.NoError(t, err)
			gotSum, err := e.f.Checksum(context.Background(), "cow", 0)
			require.NoError(t, err)
			require.Equal(t, want, gotSum)
			ident1 := liveIdentity(t, e.f, "cow")
			var lin1 map[int64][2]int64
			if version >= 3 {
				lin1 = lineageOf(t, e.f, "cow")
			}
			require.Len(t, ident1, len(ids))
			for _, id := range ids {
				if changed(id) == "" || id%11 == 0 {
					require.Equal(t, ident0[id], ident1[id], "id %d keeps its identity", id)
					if version >= 3 {
						require.Equal(t, lin0[id], lin1[id], "id %d keeps its lineage", id)
					}
				}
			}
		})
	}
}
