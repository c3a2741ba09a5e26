package facade

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
)

// The facade writes the data files of unpartitioned, unsorted tables itself
// with pqarrow, with Parquet settings per column that iceberg-go's writer
// cannot express (it applies one encoding and one codec to every column).
// Every choice is one that DuckDB, parquet-java (Spark, Trino, Flink, and
// Iceberg's own vectorized reader), Arrow C++ (PyArrow) and arrow-rs
// (DataFusion, Polars) of the last two years read; the package
// documentation ("Data files") has the table. The interop test module
// (internal/interop) reads every kind of table back with DuckDB.
//
//   - __row_index (consecutive integers): PLAIN, no dictionary, the table's
//     codec (~1 MB per million rows after zstd). PropertyRowIndexEncoding
//     opts into DELTA_BINARY_PACKED or BYTE_STREAM_SPLIT, smaller (~10 KB
//     and ~50 KB per million rows) but refused by some readers.
//   - __row_id (a 63-bit hash, incompressible): PLAIN, no dictionary and no
//     codec, so no CPU is spent compressing what does not compress.
//   - __created_at (one value per write): dictionary.
//   - decimals of precision <= 18: INT32/INT64 instead of a 16-byte
//     FIXED_LEN_BYTE_ARRAY.
//   - business columns: the table's codec, level, page version, page and
//     dictionary settings, as iceberg-go's writer would apply them.
//
// The files are then described for iceberg-go by table.DataFileFromMetadata
// from the writer's in-memory footer (record count, column sizes, value and
// null counts, bounds under the table's metrics modes, split offsets), so
// nothing is read back. Format v3 tables take this path too: the files
// carry no row lineage columns (a row a write adds inherits _row_id from
// its file's first_row_id and _last_updated_sequence_number from its
// sequence number, exactly as for iceberg-go's writer), and the commit
// sets first_row_id where the snapshot needs it (addV3). Tables with a
// partition spec, a sort order or writer properties this path does not
// reproduce (bloom filters, variant shredding) keep iceberg-go's writer.
//
// Compaction and copy-on-write merges rewrite files through the same path
// (nativeRewriter), so a rewritten file is laid out as a written one; on
// format v3 a rewrite also writes the rows' _row_id (no dictionary) and
// _last_updated_sequence_number, described under the schema with the row
// lineage columns.

// PropertyRowIndexEncoding is the table property choosing the Parquet
// encoding of __row_index in the files the facade writes itself
// (unpartitioned, unsorted tables, their compactions and copy-on-write
// rewrites included; iceberg-go's writer ignores it). Set it with
// Config.TableProperties (applied when the facade creates a table) or on
// the table. Values:
//
//   - "plain" (default): PLAIN under the table's codec, read by every
//     Parquet reader.
//   - "delta-binary-packed": DELTA_BINARY_PACKED without dictionary, ~100x
//     smaller. Iceberg's vectorized Parquet reader (Spark and Flink on
//     Iceberg tables) before Iceberg 1.10 refuses it, unless vectorized
//     reads are disabled; arrow-go's decoder of it keeps one buffer per
//     column reader, which a checking allocator reports on read-back.
//   - "byte-stream-split": BYTE_STREAM_SPLIT, the layout written before
//     PLAIN became the default. DuckDB (up to at least 1.5) refuses it
//     ("BYTE_STREAM_SPLIT encoding is only supported for FLOAT or DOUBLE
//     data"), as does Iceberg's vectorized reader before 2026 and
//     hyparquet inside DataPageV2 pages.
//
// Any other value fails a write the facade encodes itself, before a file
// is written.
const PropertyRowIndexEncoding = "lakewrite.parquet.row-index-encoding"

// rowIndexEncoding returns the __row_index encoding props ask for.
func rowIndexEncoding(props iceberg.Properties) (parquet.Encoding, error) {
	switch v := props.Get(PropertyRowIndexEncoding, "plain"); v {
	case "plain":
		return parquet.Encodings.Plain, nil
	case "delta-binary-packed":
		return parquet.Encodings.DeltaBinaryPacked, nil
	case "byte-stream-split":
		return parquet.Encodings.ByteStreamSplit, nil
	default:
		return parquet.Encodings.Plain, fmt.Errorf("facade: table property %s=%q: want plain, delta-binary-packed or byte-stream-split",
			PropertyRowIndexEncoding, v)
	}
}

// nativeProps lists the table properties the native writer honours; a table
// property with one of nativeUnsupported's prefixes sends the write to
// iceberg-go's writer.
var nativeUnsupported = []string{
	"write.parquet.bloom-filter",
	"write.parquet.shred-variants",
	"write.parquet.variant",
}

// nativeWritable reports whether the native writer can write tbl's files
// with schema sc.
func nativeWritable(tbl *table.Table, sc *arrow.Schema) bool {
	if !tbl.Spec().IsUnpartitioned() || !tbl.SortOrder().IsUnsorted() {
		return false
	}
	for k := range tbl.Properties() {
		for _, p := range nativeUnsupported {
			if strings.HasPrefix(k, p) {
				return false
			}
		}
	}
	for _, f := range sc.Fields() {
		if !nativeType(f.Type) {
			return false
		}
	}
	return true
}

// nativeType reports whether dt is a top-level primitive the native writer
// handles like iceberg-go (nested, geospatial and variant columns are left
// to iceberg-go).
func nativeType(dt arrow.DataType) bool {
	if ext, ok := dt.(arrow.ExtensionType); ok {
		if _, ok := ext.(*extensions.UUIDType); !ok {
			return false
		}
		dt = ext.StorageType()
	}
	switch dt.ID() {
	case arrow.BOOL, arrow.INT32, arrow.INT64, arrow.FLOAT32, arrow.FLOAT64,
		arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY,
		arrow.DATE32, arrow.TIME64, arrow.TIMESTAMP, arrow.DECIMAL128:
		return true
	}
	return false
}

// nativeWriterProps returns the Parquet writer properties of tbl's files:
// iceberg-go's reading of the table properties, with the identity columns'
// settings on top.
func nativeWriterProps(props iceberg.Properties, sc *arrow.Schema, rowGroupRows int) (*parquet.WriterProperties, error) {
	dpVersion := parquet.DataPageV2
	if props.Get(table.ParquetPageVersionKey, table.ParquetPageVersionDefault) == "1" {
		dpVersion = parquet.DataPageV1
	}
	codec, err := parquetCodec(props.Get(table.ParquetCompressionKey, table.ParquetCompressionDefault))
	if err != nil {
		return nil, err
	}
	rg := int64(props.GetInt(table.ParquetRowGroupLimitKey, table.ParquetRowGroupLimitDefault))
	if rowGroupRows > 0 {
		rg = min(rg, int64(rowGroupRows))
	}
	wp := []parquet.WriterProperty{
		parquet.WithMaxRowGroupLength(rg),
		parquet.WithDataPageSize(int64(props.GetInt(table.ParquetPageSizeBytesKey, table.ParquetPageSizeBytesDefault))),
		parquet.WithDataPageVersion(dpVersion),
		parquet.WithBatchSize(int64(props.GetInt(table.ParquetPageRowLimitKey, table.ParquetPageRowLimitDefault))),
		parquet.WithDictionaryPageSizeLimit(int64(props.GetInt(table.ParquetDictSizeBytesKey, table.ParquetDictSizeBytesDefault))),
		parquet.WithCompression(codec),
		parquet.WithCompressionLevel(props.GetInt(table.ParquetCompressionLevelKey, table.ParquetCompressionLevelDefault)),
	}
	// Decimals of precision <= 18 as INT32/INT64, as the Parquet and
	// Iceberg specs allow (and Iceberg's Java writer does): half the bytes
	// of a 16-byte FIXED_LEN_BYTE_ARRAY for numeric(12,2), integer
	// statistics, and an integer encode path.
	wp = append(wp, parquet.WithStoreDecimalAsInteger(true))
	dictDefault := true
	if v, ok := props[dictEnabledKey]; ok {
		dictDefault = javaTrue(v)
	}
	wp = append(wp, parquet.WithDictionaryDefault(dictDefault))
	for k, v := range props {
		if col, ok := strings.CutPrefix(k, dictColumnKey); ok && col != "" {
			wp = append(wp, parquet.WithDictionaryFor(col, javaTrue(v)))
		}
	}
	// parquet-mr's cost-based dictionary fallback on every column, as
	// iceberg-go applies it.
	for _, f := range sc.Fields() {
		wp = append(wp, parquet.WithDictionaryCostFallbackFor(f.Name, true))
	}
	if sc.HasField(ColRowIndex) {
		enc, err := rowIndexEncoding(props)
		if err != nil {
			return nil, err
		}
		wp = append(wp, parquet.WithDictionaryFor(ColRowIndex, false), parquet.WithEncodingFor(ColRowIndex, enc))
	}
	if sc.HasField(ColRowID) {
		wp = append(wp,
			parquet.WithDictionaryFor(ColRowID, false),
			parquet.WithCompressionFor(ColRowID, compress.Codecs.Uncompressed))
	}
	if sc.HasField(ColCreatedAt) {
		wp = append(wp, parquet.WithDictionaryFor(ColCreatedAt, true))
	}
	if sc.HasField(iceberg.RowIDColumnName) {
		// a rewrite's Iceberg row ids (format v3): unique per row, mostly
		// consecutive, as __row_index
		wp = append(wp, parquet.WithDictionaryFor(iceberg.RowIDColumnName, false))
	}
	return parquet.NewWriterProperties(wp...), nil
}

func parquetCodec(name string) (compress.Compression, error) {
	switch name {
	case "zstd":
		return compress.Codecs.Zstd, nil
	case "snappy":
		return compress.Codecs.Snappy, nil
	case "uncompressed":
		return compress.Codecs.Uncompressed, nil
	case "gzip":
		return compress.Codecs.Gzip, nil
	case "brotli":
		return compress.Codecs.Brotli, nil
	case "lz4":
		return compress.Codecs.Lz4, nil
	case "lz4raw":
		return compress.Codecs.Lz4Raw, nil
	}
	return compress.Codecs.Uncompressed, fmt.Errorf("facade: unsupported Parquet codec %q", name)
}

// nativeFiles writes one worker's batches as Parquet data files of tbl,
// rolling to a new file at about targetSize bytes.
type nativeFiles struct {
	tbl        *table.Table
	fs         iceio.WriteFileIO
	loc        table.LocationProvider
	sc         *arrow.Schema
	props      *parquet.WriterProperties
	arrProps   pqarrow.ArrowWriterProperties
	targetSize int64
	writeID    uuid.UUID
	opened     int
	// fileSchema is the Iceberg schema of the files (statistics and field
	// ids): the table's, or a rewrite's with the row lineage columns.
	fileSchema *iceberg.Schema

	cur *nativeFile
}

type nativeFile struct {
	path string
	out  iceio.FileWriter
	buf  *growWriter
	n    int64 // bytes through buf
	w    *pqarrow.FileWriter
}

func (f *nativeFile) Write(p []byte) (int, error) {
	n, err := f.buf.Write(p)
	f.n += int64(n)
	return n, err
}

// growWriter buffers the writes to a data file: its buffer starts small
// (a small write's file costs a small buffer) and doubles up to
// maxFileBuffer as the file grows.
type growWriter struct {
	out io.Writer
	buf []byte
}

const (
	minFileBuffer = 16 << 10
	maxFileBuffer = 256 << 10
)

func (g *growWriter) Write(p []byte) (int, error) {
	if len(g.buf)+len(p) > cap(g.buf) && cap(g.buf) < maxFileBuffer {
		nb := make([]byte, len(g.buf), min(maxFileBuffer, max(2*cap(g.buf), minFileBuffer, len(g.buf)+len(p))))
		copy(nb, g.buf)
		g.buf = nb
	}
	if len(g.buf)+len(p) > cap(g.buf) {
		if err := g.Flush(); err != nil {
			return 0, err
		}
		if len(p) >= cap(g.buf) {
			return g.out.Write(p)
		}
	}
	g.buf = append(g.buf, p...)
	return len(p), nil
}

// Flush writes what is buffered.
func (g *growWriter) Flush() error {
	if len(g.buf) == 0 {
		return nil
	}
	n, err := g.out.Write(g.buf)
	if err == nil && n < len(g.buf) {
		err = io.ErrShortWrite
	}
	g.buf = g.buf[:0]
	return err
}

func newNativeFiles(ctx context.Context, tbl *table.Table, sc *arrow.Schema, rowGroupRows int, targetSize int64,
	mem memory.Allocator, writeID uuid.UUID) (*nativeFiles, error) {
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("facade: table file system: %w", err)
	}
	wfs, ok := fsys.(iceio.WriteFileIO)
	if !ok {
		return nil, fmt.Errorf("facade: table file system %T cannot write files", fsys)
	}
	loc, err := tbl.LocationProvider()
	if err != nil {
		return nil, fmt.Errorf("facade: table location: %w", err)
	}
	props, err := nativeWriterProps(tbl.Properties(), sc, rowGroupRows)
	if err != nil {
		return nil, err
	}
	return &nativeFiles{
		tbl: tbl, fs: wfs, loc: loc, sc: sc, props: props,
		arrProps:   pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(mem), pqarrow.WithStoreSchema()),
		targetSize: targetSize, writeID: writeID, fileSchema: tbl.Schema(),
	}, nil
}

// write appends rec to the open file, opening one first if needed.
func (n *nativeFiles) write(rec arrow.RecordBatch) error {
	if n.cur == nil {
		// iceberg-go's naming: partition-task-write id-file count.
		name := fmt.Sprintf("%05d-%d-%s-%05d.parquet", 0, 0, n.writeID, n.opened)
		path := n.loc.NewDataLocation(name)
		out, err := n.fs.Create(path)
		if err != nil {
			return fmt.Errorf("facade: create data file: %w", err)
		}
		n.opened++
		f := &nativeFile{path: path, out: out, buf: &growWriter{out: out}}
		f.w, err = pqarrow.NewFileWriter(n.sc, f, n.props, n.arrProps)
		if err != nil {
			out.Close()
			_ = n.fs.Remove(path)
			return fmt.Errorf("facade: open Parquet writer: %w", err)
		}
		n.cur = f
	}
	return n.cur.w.WriteBuffered(rec)
}

// full reports whether the open file reached the target size.
func (n *nativeFiles) full() bool {
	return n.cur != nil && n.cur.n+n.cur.w.RowGroupTotalCompressedBytes() >= n.targetSize
}

// close finishes the open file (if any) and describes it for iceberg-go.
func (n *nativeFiles) close() (iceberg.DataFile, error) {
	f := n.cur
	if f == nil {
		return nil, nil
	}
	n.cur = nil
	err := f.w.Close()
	if err == nil {
		err = f.buf.Flush()
	}
	if cerr := f.out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = n.fs.Remove(f.path)
		return nil, fmt.Errorf("facade: write data file: %w", err)
	}
	meta, err := f.w.FileMetadata()
	if err != nil {
		_ = n.fs.Remove(f.path)
		return nil, fmt.Errorf("facade: data file footer: %w", err)
	}
	df, err := table.DataFileFromMetadata(table.DataFileArgs{
		Schema:        n.fileSchema,
		Spec:          n.tbl.Spec(),
		Format:        iceberg.ParquetFile,
		Metadata:      meta,
		FilePath:      f.path,
		FileSize:      f.n,
		Content:       iceberg.EntryContentData,
		Properties:    n.tbl.Properties(),
		FormatVersion: n.tbl.Metadata().Version(),
	})
	if err != nil {
		_ = n.fs.Remove(f.path)
		return nil, fmt.Errorf("facade: describe data file: %w", err)
	}
	return df, nil
}

// abort closes and removes the open file, if any.
func (n *nativeFiles) abort() {
	if f := n.cur; f != nil {
		n.cur = nil
		_ = f.w.Close()
		_ = f.out.Close()
		_ = n.fs.Remove(f.path)
	}
}

// runNative is fileWorker.run for the native writer.
func (w *fileWorker) runNative(nf *nativeFiles, fail func()) {
	defer close(w.done)
	for rec := range w.in {
		if w.err == nil {
			if err := nf.write(rec); err != nil {
				w.err = err
			} else if nf.full() {
				df, err := nf.close()
				if err != nil {
					w.err = err
				} else {
					w.files = append(w.files, df)
				}
			}
			if w.err != nil {
				nf.abort()
				fail()
			}
		}
		rec.Release()
	}
	if w.err == nil {
		df, err := nf.close()
		switch {
		case err != nil:
			w.err = err
			fail()
		case df != nil:
			w.files = append(w.files, df)
		}
	}
}
