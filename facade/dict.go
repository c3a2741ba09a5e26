package facade

import (
	"iter"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/lakewrite/lakewrite/facade/internal/identity"
)

// dictColumnKey prefixes iceberg-go's per-column dictionary switch
// (table/internal.ParquetDictEncodingColumnEnabledKeyPrefix); the suffix is
// the Parquet column path, the column name for top-level primitives.
const dictColumnKey = "write.parquet.dict-encoding-enabled.column."

// dictEnabledKey is iceberg-go's table-wide dictionary switch
// (table/internal.ParquetDictEnabledKey).
const dictEnabledKey = "parquet.enable.dictionary"

// minDictSample is the smallest first batch the dictionary decision trusts.
const minDictSample = 1024

// peekFirst returns a sequence equal to rows (the first element included)
// and the first element of rows. stop must be called once the returned
// sequence is no longer used; it ends the pull goroutine.
func peekFirst(rows iter.Seq2[arrow.RecordBatch, error]) (all iter.Seq2[arrow.RecordBatch, error], stop func(),
	first arrow.RecordBatch, firstErr error) {
	next, stop := iter.Pull2(rows)
	first, firstErr, ok := next()
	all = func(yield func(arrow.RecordBatch, error) bool) {
		if !ok || !yield(first, firstErr) {
			return
		}
		for {
			rec, err, ok := next()
			if !ok || !yield(rec, err) {
				return
			}
		}
	}
	return all, stop, first, firstErr
}

// Page settings of a write's files when the table sets none: a page is cut
// once it holds pageSizeDefault bytes of values, checked every
// pageBatchDefault values, so that a page of values up to ~120 bytes wide
// stays within one zstd block (128 KiB). Such a page is compressed as a
// single block, without a history window; a larger page (iceberg-go's
// default is 1 MiB, checked every 20,000 values) makes each of the
// process's pooled zstd encoders allocate a 16 MiB history buffer, which
// was a third of a big write's live heap. Files of the bench shape grow
// by about 2%.
const (
	pageSizeDefault  = 64 << 10
	pageBatchDefault = 512
)

// stagedWriteProps returns the writer properties of one write's (or one
// compaction's) files, set on a staging transaction and never committed:
// the dictionary choices of dictionaryOff and the page defaults above,
// each only where the table does not set it.
func stagedWriteProps(first arrow.RecordBatch, tableProps iceberg.Properties) iceberg.Properties {
	out := dictionaryOff(first, tableProps)
	for k, v := range map[string]int{table.ParquetPageSizeBytesKey: pageSizeDefault, table.ParquetPageRowLimitKey: pageBatchDefault} {
		if _, ok := tableProps[k]; ok {
			continue
		}
		if out == nil {
			out = iceberg.Properties{}
		}
		out[k] = strconv.Itoa(v)
	}
	return out
}

// dictionaryOff returns the writer properties that turn dictionary encoding
// off for __row_id, __row_index and the top-level business columns of rec whose values are mostly
// distinct (more than half of the rows): for those a dictionary never pays,
// and iceberg-go's writer would otherwise hash the first page-row-limit
// values of every row group before falling back to PLAIN (and keep the
// dictionary when the uncompressed estimate narrowly favours it, although
// zstd then makes the files no smaller). Columns the table configures
// itself (a per-column key, or dictionaries off table-wide) are left alone.
// The properties apply to this write's files only: they are set on the
// staging transaction, never committed.
func dictionaryOff(rec arrow.RecordBatch, tableProps iceberg.Properties) iceberg.Properties {
	if v, ok := tableProps[dictEnabledKey]; ok && !javaTrue(v) {
		return nil
	}
	var out iceberg.Properties
	off := func(col string) {
		if _, ok := tableProps[dictColumnKey+col]; ok {
			return
		}
		if out == nil {
			out = iceberg.Properties{}
		}
		out[dictColumnKey+col] = "false"
	}
	// unique per row (tables the facade creates already say so)
	off(ColRowID)
	off(ColRowIndex)
	if rec == nil || rec.NumRows() < minDictSample {
		return out
	}
	n := int(rec.NumRows())
	vals := make([]uint64, n)
	for i, f := range rec.Schema().Fields() {
		if identity.IsIdentity(f.Name) || !dictCandidate(f.Type) {
			continue
		}
		if _, ok := tableProps[dictColumnKey+f.Name]; ok {
			continue
		}
		if err := identity.ValueHashes(f, rec.Column(i), vals); err != nil {
			continue // the stamper reports it
		}
		slices.Sort(vals)
		if distinct := len(slices.Compact(vals)); distinct > n/2 {
			off(f.Name)
		}
		vals = vals[:n]
	}
	return out
}

// dictCandidate: top-level primitive columns (their Parquet path is the
// column name) whose values can be dictionary encoded.
func dictCandidate(t arrow.DataType) bool {
	if ext, ok := t.(arrow.ExtensionType); ok {
		t = ext.StorageType()
	}
	switch t.ID() {
	case arrow.BOOL, arrow.LIST, arrow.LARGE_LIST, arrow.STRUCT, arrow.MAP, arrow.FIXED_SIZE_LIST:
		return false
	}
	return true
}

// javaTrue parses a boolean property as Iceberg's Java writer (and
// iceberg-go) do: only "true", in any case, is true.
func javaTrue(v string) bool {
	return len(v) == 4 && (v[0]|0x20) == 't' && (v[1]|0x20) == 'r' && (v[2]|0x20) == 'u' && (v[3]|0x20) == 'e'
}
