package facade_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
)

// TestNativeFilesLayoutStatsAndPruning: the data files of an unpartitioned
// table carry field ids, per-column encodings (__row_index
// PLAIN, __row_id uncompressed, a numeric(12,2) as INT64, a numeric(9,2)
// as INT32), bounds for every column, read back exactly, and a filtered
// scan prunes the files whose bounds exclude it.
func TestNativeFilesLayoutStatsAndPruning(t *testing.T) {
	testNativeFiles(t, nil, 2, parquet.Encodings.Plain)
}

// TestNativeFilesV3: a format v3 table's data files have the same layout
// as v2's (decimals as INT32/INT64), hold no row lineage columns, and
// their rows read back with distinct _row_ids (first_row_id plus the
// position) and the sequence number of the write that added them.
func TestNativeFilesV3(t *testing.T) {
	testNativeFiles(t, nil, 3, parquet.Encodings.Plain)
}

// TestRowIndexEncodingProperty: PropertyRowIndexEncoding opts __row_index
// into BYTE_STREAM_SPLIT or DELTA_BINARY_PACKED (every value still reads
// back), and an unknown value fails the write with nothing committed.
func TestRowIndexEncodingProperty(t *testing.T) {
	t.Run("byte-stream-split", func(t *testing.T) {
		testNativeFiles(t, iceberg.Properties{facade.PropertyRowIndexEncoding: "byte-stream-split"}, 2, parquet.Encodings.ByteStreamSplit)
	})
	t.Run("delta-binary-packed", func(t *testing.T) {
		// arrow-go's DELTA_BINARY_PACKED decoder never releases its
		// 64-byte bit-width buffer, so the checked allocator would report
		// the facade's Scan: this case reads back through iceberg-go only.
		testNativeFiles(t, iceberg.Properties{facade.PropertyRowIndexEncoding: "delta-binary-packed"}, 2, parquet.Encodings.DeltaBinaryPacked)
	})
	t.Run("unknown", func(t *testing.T) {
		e := newIcebergEnv(t, func(c *facade.Config) {
			c.TableProperties = iceberg.Properties{facade.PropertyRowIndexEncoding: "rle"}
		})
		defer e.mem.AssertSize(t, 0)
		sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
		b := array.NewRecordBuilder(e.mem, sc)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
		rec := b.NewRecordBatch()
		defer rec.Release()
		ctx := context.Background()
		_, err := e.f.Write(ctx, facade.Target{DatasetID: "badenc"}, facade.WriteRequest{Mode: facade.Replace, Schema: sc,
			Rows: func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }})
		require.ErrorContains(t, err, facade.PropertyRowIndexEncoding)
		tbl, err := e.f.LoadTable(ctx, "badenc")
		if err == nil {
			require.Nil(t, tbl.CurrentSnapshot())
		}
	})
}

func testNativeFiles(t *testing.T, props iceberg.Properties, version int, rowIndexEnc parquet.Encoding) {
	e := newIcebergEnv(t, func(c *facade.Config) {
		c.TableProperties = props
		c.FormatVersionFor = func(string) (int, bool) { return version, true }
	})
	defer e.mem.AssertSize(t, 0)
	ctx := context.Background()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "amount", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "small", Type: &arrow.Decimal128Type{Precision: 9, Scale: 2}, Nullable: true},
	}, nil)
	batch := func(lo, n int) arrow.RecordBatch {
		b := array.NewRecordBuilder(e.mem, sc)
		defer b.Release()
		for i := lo; i < lo+n; i++ {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			if i%10 == 0 {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.Decimal128Builder).Append(decimal128.FromI64(int64(i) * 101))
			}
			b.Field(2).(*array.StringBuilder).Append("n" + string(rune('a'+i%26)))
			b.Field(3).(*array.Decimal128Builder).Append(decimal128.FromI64(-int64(i) * 7))
		}
		return b.NewRecordBatch()
	}
	write := func(mode facade.WriteMode, lo, n int) {
		rec := batch(lo, n)
		defer rec.Release()
		_, err := e.f.Write(ctx, facade.Target{DatasetID: "native"}, facade.WriteRequest{Mode: mode, Schema: sc,
			Rows: func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }})
		require.NoError(t, err)
	}
	write(facade.Replace, 0, 3000)
	write(facade.Append, 3000, 2000)

	tbl, err := e.f.LoadTable(ctx, "native")
	require.NoError(t, err)
	require.Equal(t, version, tbl.Metadata().Version())
	tasks, err := tbl.Scan().PlanFiles(ctx)
	require.NoError(t, err)
	require.Len(t, tasks, 2)
	isc := tbl.Schema()
	fieldID := func(name string) int {
		f, ok := isc.FindFieldByName(name)
		require.True(t, ok, name)
		return f.ID
	}
	for _, task := range tasks {
		df := task.File
		for _, col := range []string{"id", "amount", "name", facade.ColRowIndex, facade.ColRowID, facade.ColCreatedAt} {
			require.Contains(t, df.LowerBoundValues(), fieldID(col), col)
			require.Contains(t, df.UpperBoundValues(), fieldID(col), col)
			require.Contains(t, df.ValueCounts(), fieldID(col), col)
		}
		require.Equal(t, df.Count()/10, df.NullValueCounts()[fieldID("amount")])

		fsys, err := tbl.FS(ctx)
		require.NoError(t, err)
		f, err := fsys.Open(df.FilePath())
		require.NoError(t, err)
		rdr, err := file.NewParquetReader(f)
		require.NoError(t, err)
		pqs := rdr.MetaData().Schema
		for i := range pqs.NumColumns() {
			col := pqs.Column(i)
			require.Equal(t, int32(fieldID(col.Name())), col.SchemaNode().FieldID(), col.Name())
		}
		rg := rdr.MetaData().RowGroup(0)
		colMeta := func(name string) interface {
			Encodings() []parquet.Encoding
		} {
			c, err := rg.ColumnChunk(pqs.ColumnIndexByName(name))
			require.NoError(t, err)
			return c
		}
		require.Contains(t, colMeta(facade.ColRowIndex).Encodings(), rowIndexEnc)
		for _, enc := range colMeta(facade.ColRowIndex).Encodings() {
			require.Contains(t, []parquet.Encoding{rowIndexEnc, parquet.Encodings.RLE}, enc)
		}
		rowID, err := rg.ColumnChunk(pqs.ColumnIndexByName(facade.ColRowID))
		require.NoError(t, err)
		require.Equal(t, "UNCOMPRESSED", rowID.Compression().String())
		require.Equal(t, parquet.Types.Int64, pqs.Column(pqs.ColumnIndexByName("amount")).PhysicalType())
		require.Equal(t, parquet.Types.Int32, pqs.Column(pqs.ColumnIndexByName("small")).PhysicalType())
		require.Equal(t, -1, pqs.ColumnIndexByName(iceberg.RowIDColumnName), "no lineage columns in a written file")
		require.NoError(t, rdr.Close())
	}

	// The appended rows are __row_index 3000..4999: a filter on it prunes
	// the first file.
	pruned, err := tbl.Scan(table.WithRowFilter(iceberg.GreaterThanEqual(iceberg.Reference(facade.ColRowIndex), int64(3000)))).PlanFiles(ctx)
	require.NoError(t, err)
	require.Len(t, pruned, 1)
	byAmount, err := tbl.Scan(table.WithRowFilter(iceberg.GreaterThan(iceberg.Reference("amount"),
		iceberg.Decimal{Val: decimal128.FromI64(3000 * 101), Scale: 2}))).PlanFiles(ctx)
	require.NoError(t, err)
	require.Len(t, byAmount, 1)

	// Every value reads back.
	scanOpts := []table.ScanOption{table.WithSelectedFields("id", "amount", facade.ColRowIndex, "small")}
	if version >= 3 {
		scanOpts = append(scanOpts, table.WithRowLineage())
	}
	_, itr, err := tbl.Scan(scanOpts...).ToArrowRecords(ctx)
	require.NoError(t, err)
	var rows int
	rowIDs := map[int64]bool{}
	for rec, err := range itr {
		require.NoError(t, err)
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		ids := col("id").(*array.Int64)
		amt := col("amount").(*array.Decimal128)
		idx := col(facade.ColRowIndex).(*array.Int64)
		small := col("small").(*array.Decimal128)
		for i := range int(rec.NumRows()) {
			id := ids.Value(i)
			require.Equal(t, id, idx.Value(i))
			if id%10 == 0 {
				require.True(t, amt.IsNull(i))
			} else {
				require.Equal(t, decimal128.FromI64(id*101), amt.Value(i))
			}
			require.Equal(t, decimal128.FromI64(-id*7), small.Value(i))
			if version >= 3 {
				// the Replace is sequence number 1 and row ids 0..2999, the
				// Append sequence number 2 and row ids 3000..4999
				rid := col(iceberg.RowIDColumnName).(*array.Int64)
				seq := col(iceberg.LastUpdatedSequenceNumberColumnName).(*array.Int64)
				require.False(t, rid.IsNull(i) || seq.IsNull(i), "id %d has no lineage", id)
				require.False(t, rowIDs[rid.Value(i)], "_row_id %d read twice", rid.Value(i))
				rowIDs[rid.Value(i)] = true
				require.Equal(t, id, rid.Value(i), "id %d", id)
				wantSeq := int64(1)
				if id >= 3000 {
					wantSeq = 2
				}
				require.Equal(t, wantSeq, seq.Value(i), "id %d", id)
			}
			rows++
		}
		rec.Release()
	}
	require.Equal(t, 5000, rows)

	if rowIndexEnc == parquet.Encodings.DeltaBinaryPacked {
		return
	}
	// And through the facade's Scan, on its (checked) allocator.
	rows = 0
	for rec, err := range e.f.Scan(ctx, "native", facade.ScanOptions{Columns: []string{"id", facade.ColRowIndex}}) {
		require.NoError(t, err)
		ids, idx := rec.Column(0).(*array.Int64), rec.Column(1).(*array.Int64)
		for i := range int(rec.NumRows()) {
			require.Equal(t, ids.Value(i), idx.Value(i))
			rows++
		}
	}
	require.Equal(t, 5000, rows)
}

// TestPageSizes: by default a data file's pages hold at most about 64 KiB
// of values plus one check interval, so each fits one zstd block (128 KiB)
// and is compressed without a history window, from the facade's own writer
// and from iceberg-go's (a partitioned table) alike;
// write.parquet.page-size-bytes and write.parquet.page-row-limit still set
// them.
func TestPageSizes(t *testing.T) {
	ctx := context.Background()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "doc", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	// largestPage writes 200,000 rows of ~60-byte strings and returns the
	// largest uncompressed data page of each column of the file.
	largestPage := func(props iceberg.Properties, partitioned bool) map[string]int32 {
		e := newIcebergEnv(t, func(c *facade.Config) {
			c.TableProperties = props
			if partitioned {
				c.PartitionFor = func(string) (facade.Partitioning, bool) {
					return facade.Partitioning{Fields: []facade.PartitionField{{Column: "id", Transform: "bucket[1]"}}}, true
				}
			}
		})
		defer e.mem.AssertSize(t, 0)
		b := array.NewRecordBuilder(e.mem, sc)
		defer b.Release()
		for i := range 200_000 {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf(`{"k":%d,"v":"%040d","w":%d}`, i, i*7919, i%13))
		}
		rec := b.NewRecordBatch()
		defer rec.Release()
		_, err := e.f.Write(ctx, facade.Target{DatasetID: "pages"}, facade.WriteRequest{Mode: facade.Replace, Schema: sc,
			Rows: func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }})
		require.NoError(t, err)
		tbl, err := e.f.LoadTable(ctx, "pages")
		require.NoError(t, err)
		tasks, err := tbl.Scan().PlanFiles(ctx)
		require.NoError(t, err)
		require.Len(t, tasks, 1)
		fsys, err := tbl.FS(ctx)
		require.NoError(t, err)
		f, err := fsys.Open(tasks[0].File.FilePath())
		require.NoError(t, err)
		rdr, err := file.NewParquetReader(f)
		require.NoError(t, err)
		defer rdr.Close()
		out := map[string]int32{}
		for g := range rdr.NumRowGroups() {
			rg := rdr.RowGroup(g)
			for c := range rdr.MetaData().Schema.NumColumns() {
				name := rdr.MetaData().Schema.Column(c).Name()
				pages, err := rg.GetColumnPageReader(c)
				require.NoError(t, err)
				for pages.Next() {
					if p, ok := pages.Page().(file.DataPage); ok {
						out[name] = max(out[name], p.UncompressedSize())
					}
				}
				require.NoError(t, pages.Err())
			}
		}
		return out
	}

	for _, partitioned := range []bool{false, true} {
		def := largestPage(nil, partitioned)
		for _, col := range []string{"id", "doc", facade.ColRowID, facade.ColRowIndex} {
			require.Positive(t, def[col], col)
			require.LessOrEqual(t, def[col], int32(128<<10), "%s partitioned=%v", col, partitioned)
		}
		big := largestPage(iceberg.Properties{table.ParquetPageSizeBytesKey: strconv.Itoa(1 << 20),
			table.ParquetPageRowLimitKey: "20000"}, partitioned)
		require.Greater(t, big["doc"], int32(128<<10), "partitioned=%v", partitioned)
	}
}
