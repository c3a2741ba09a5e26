package sliced

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Source is the driving source of a sliced output: a row-store dataset
// (ranges of dataset_rows.row_index, read by index range scans on
// (dataset_id, row_index)) or a table (ranges of heap pages, read by TID
// range scans); with Buckets, either one cut into buckets of a key's hash
// instead.
type Source struct {
	// Dataset and Rows (the quoted dataset_rows table, e.g.
	// "lakewrite".dataset_rows): a row-store source.
	Dataset string
	Rows    string
	// Table: a table's quoted name, sliced by ctid pages (or a table or
	// view cut into key buckets).
	Table string
	// Buckets: the slices are buckets of a key's hash, not ranges: each
	// slice reads the source rows whose key falls in its bucket (the
	// caller's SELECT filters them; Range.Index is the bucket,
	// Range.Buckets their number). Each bucket's rows are numbered in a
	// span of __row_index as long as the source has rows, which is also
	// the most rows a bucket may write.
	Buckets bool
}

// Range is one slice of the driving source: row_index values (a row-store
// source) or heap pages (a table) from Lo up to Hi, excluded (Hi < 0: no
// upper bound, the last slice).
type Range struct {
	Index  int
	Lo, Hi int64
	// First is the __row_index offset of the slice's first row from the
	// write's: the slice's rows are numbered from it, so slices never
	// share an index and the order of __row_index is the source's.
	First int64
	// Capacity is the most rows the range holds (a row-wise output writes
	// at most one row per source row); -1 for the last slice.
	Capacity int64
	// Buckets is the number of key buckets the source is cut into
	// (Source.Buckets; Index is this slice's bucket); 0 for ranges.
	Buckets int
}

// Ranges cuts src into at most n ranges, read in tx (a transaction as of
// the write's snapshot): equal spans of row_index between the smallest and
// the largest of the dataset, or of the table's pages. An empty source is
// one range.
func Ranges(ctx context.Context, tx pgx.Tx, src Source, n int) ([]Range, error) {
	n = max(n, 1)
	if src.Buckets {
		return buckets(ctx, tx, src, n)
	}
	var lo, hi, perUnit int64
	switch {
	case src.Table != "":
		// MaxHeapTuplesPerPage: (block size - page header) / (tuple header + line pointer)
		err := tx.QueryRow(ctx, `SELECT pg_catalog.pg_relation_size($1::pg_catalog.regclass) / current_setting('block_size')::int8,
			(current_setting('block_size')::int8 - 24) / 28`, src.Table).Scan(&hi, &perUnit)
		if err != nil {
			return nil, fmt.Errorf("sliced: pages of %s: %w", src.Table, err)
		}
	case src.Dataset != "" && src.Rows != "":
		var mn, mx *int64
		err := tx.QueryRow(ctx, `SELECT min(row_index), max(row_index) FROM `+src.Rows+` WHERE dataset_id = $1`, src.Dataset).Scan(&mn, &mx)
		if err != nil {
			return nil, fmt.Errorf("sliced: row_index bounds of %q: %w", src.Dataset, err)
		}
		if mn != nil {
			lo, hi = *mn, *mx+1
		}
		perUnit = 1
	default:
		return nil, fmt.Errorf("sliced: no driving source")
	}
	span := hi - lo
	if span <= 0 {
		return []Range{{Lo: lo, Hi: -1, Capacity: -1}}, nil
	}
	n = int(min(int64(n), span))
	width := (span + int64(n) - 1) / int64(n)
	var out []Range
	for k := 0; k < n; k++ {
		r := Range{Index: k, Lo: lo + int64(k)*width, Hi: lo + int64(k+1)*width, Capacity: width * perUnit}
		r.First = (r.Lo - lo) * perUnit
		if r.Hi >= hi {
			r.Hi, r.Capacity = -1, -1
			out = append(out, r)
			break
		}
		out = append(out, r)
	}
	return out, nil
}

// buckets cuts src into n key buckets, each numbered in a span of
// __row_index as long as the source has rows.
func buckets(ctx context.Context, tx pgx.Tx, src Source, n int) ([]Range, error) {
	var rows int64
	var err error
	switch {
	case src.Table != "":
		err = tx.QueryRow(ctx, `SELECT count(*) FROM `+src.Table).Scan(&rows)
	case src.Dataset != "" && src.Rows != "":
		err = tx.QueryRow(ctx, `SELECT count(*) FROM `+src.Rows+` WHERE dataset_id = $1`, src.Dataset).Scan(&rows)
	default:
		return nil, fmt.Errorf("sliced: no driving source")
	}
	if err != nil {
		return nil, fmt.Errorf("sliced: rows of the source: %w", err)
	}
	out := make([]Range, n)
	for k := range out {
		out[k] = Range{Index: k, Lo: int64(k), Hi: int64(k + 1), First: int64(k) * rows, Capacity: rows, Buckets: n}
	}
	out[n-1].Hi = -1
	return out, nil
}

// Check says why src cannot be read in slices ("" when it can), read in
// tx: a table must be a plain table or a materialized view (heap pages)
// on PostgreSQL 14 or later (TID range scans).
func Check(ctx context.Context, tx pgx.Tx, src Source) (string, error) {
	if src.Table == "" || src.Buckets {
		return "", nil
	}
	var kind string
	var version int
	err := tx.QueryRow(ctx, `SELECT c.relkind::text, current_setting('server_version_num')::int
		FROM pg_catalog.pg_class c WHERE c.oid = $1::pg_catalog.regclass`, src.Table).Scan(&kind, &version)
	if err != nil {
		return "", fmt.Errorf("sliced: describe %s: %w", src.Table, err)
	}
	switch {
	case kind != "r" && kind != "m":
		return fmt.Sprintf("relation %s is not a table (relkind %s): it has no heap pages to slice", src.Table, kind), nil
	case version < 140000:
		return "slicing a table by pages needs TID range scans (PostgreSQL 14)", nil
	}
	return "", nil
}
