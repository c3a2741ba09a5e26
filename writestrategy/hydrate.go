package writestrategy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"iter"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/lakewrite/lakewrite/facade"
)

// nativeReader reads a native (Iceberg) dataset as Arrow batches.
// facade.Lakehouse (the Iceberg facade and its in-memory double) satisfies
// it.
type nativeReader interface {
	Scan(ctx context.Context, datasetID string, opts facade.ScanOptions) iter.Seq2[arrow.RecordBatch, error]
}

// nativeColumns are the columns a hydrated native dataset of schema s
// holds: its business columns and the identity columns.
func nativeColumns(s Schema) []string {
	return append(s.names(), facade.ColRowIndex, facade.ColRowID, facade.ColCreatedAt)
}

// scan reads a native dataset's current snapshot for hydrate. A non-nil
// filter is the scan's filter: only the rows satisfying it are read, and
// only the data files that can hold such rows.
func (e *Env) scan(ctx context.Context, datasetID string, s Schema, filter []facade.Range) iter.Seq2[arrow.RecordBatch, error] {
	if e.Lakehouse == nil {
		return func(yield func(arrow.RecordBatch, error) bool) {
			yield(nil, fmt.Errorf("%w: dataset %q lives in Iceberg: set Env.Lakehouse to read it", ErrInvalid, datasetID))
		}
	}
	return e.Lakehouse.Scan(ctx, datasetID, facade.ScanOptions{Columns: nativeColumns(s), Filter: filter})
}

// hydrate copies the rows of a native dataset (rows, from scan or a delta
// read) into a temporary table of the compute transaction (dropped at its
// end), so the same SQL reads it as it reads the row store. Memory: one
// Arrow batch at a time.
func (e *Env) hydrate(ctx context.Context, tx pgx.Tx, datasetID string, s Schema, n int, rows iter.Seq2[arrow.RecordBatch, error]) (*relation, error) {
	return e.hydrateFilled(ctx, tx, datasetID, s, n, true, rows)
}

// hydrateChanges is hydrate of the images of a dataset's changes (Changes
// of s's columns only): its table has s's columns and no identity
// columns, which a changes read then need not decode.
func (e *Env) hydrateChanges(ctx context.Context, tx pgx.Tx, datasetID string, s Schema, n int, rows iter.Seq2[arrow.RecordBatch, error]) (*relation, error) {
	return e.hydrateFilled(ctx, tx, datasetID, s, n, false, rows)
}

func (e *Env) hydrateFilled(ctx context.Context, tx pgx.Tx, datasetID string, s Schema, n int, identity bool, rows iter.Seq2[arrow.RecordBatch, error]) (*relation, error) {
	r, fill, err := e.hydrateTable(ctx, tx, datasetID, s, n, identity)
	if err != nil {
		return nil, err
	}
	return r, fill(rows)
}

// hydrateTable creates the temporary table of hydrate, empty, with the
// identity columns or without them (s's columns only), and returns its
// relation and the function that fills it (once): a plan can be built
// over the table before it is known whether the whole dataset is read.
func (e *Env) hydrateTable(ctx context.Context, tx pgx.Tx, datasetID string, s Schema, n int, identity bool) (*relation, func(iter.Seq2[arrow.RecordBatch, error]) error, error) {
	if e.Lakehouse == nil {
		return nil, nil, fmt.Errorf("%w: dataset %q lives in Iceberg: set Env.Lakehouse to read it", ErrInvalid, datasetID)
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	name := fmt.Sprintf("lw_native_%d_%s", n, hex.EncodeToString(suffix[:]))
	types, _, _, err := declaredTypes(ctx, tx, s)
	if err != nil {
		return nil, nil, err
	}
	// Columns of types Iceberg holds as their text form are copied as text
	// and cast on read (the type's input function reads it back exactly).
	asText := map[string]bool{}
	defs := make([]string, 0, len(s.Columns)+3)
	for i, c := range s.Columns {
		typ := c.Type
		if !types[i].binary() {
			typ, asText[c.Name] = "pg_catalog.text", true
		}
		defs = append(defs, pgx.Identifier{c.Name}.Sanitize()+" "+typ)
	}
	cols := s.names()
	if identity {
		defs = append(defs, `"__row_index" pg_catalog.int8`, `"__row_id" pg_catalog.int8`, `"__created_at" pg_catalog.timestamptz`)
		cols = nativeColumns(s)
	}
	if _, err := tx.Exec(ctx, "CREATE TEMP TABLE "+pgx.Identifier{name}.Sanitize()+" ("+strings.Join(defs, ", ")+") ON COMMIT DROP"); err != nil {
		return nil, nil, queryError("hydrate "+datasetID, err)
	}
	qualified := pgx.Identifier{"pg_temp", name}.Sanitize()
	fill := func(rows iter.Seq2[arrow.RecordBatch, error]) error {
		next, stop := iter.Pull2(rows)
		defer stop()
		src := &batchRows{next: next, cols: cols}
		defer src.release()
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{name}, cols, src); err != nil {
			if src.err != nil {
				// The rows failed, not the statement: the server saw only
				// the COPY aborted with their message. Their error is the
				// one to match (a history the Lakehouse cannot read,
				// facade.ErrChangesUnknown, makes a refresh full).
				return fmt.Errorf("writestrategy: hydrate %s: %w", datasetID, src.err)
			}
			return queryError("hydrate "+datasetID, err)
		}
		if _, err := tx.Exec(ctx, "ANALYZE "+qualified); err != nil { // statistics for the planner
			return queryError("hydrate "+datasetID, err)
		}
		return nil
	}
	if !identity {
		return plainTableRelation(datasetID, qualified, s, asText), fill, nil
	}
	return tableRelation(datasetID, qualified, s, asText), fill, nil
}

// batchRows adapts a pulled batch sequence to pgx.CopyFromSource.
type batchRows struct {
	next func() (arrow.RecordBatch, error, bool)
	cols []string
	rec  arrow.RecordBatch
	idx  []int // column positions in rec, by cols order
	row  int
	vals []any
	err  error
}

func (b *batchRows) release() {
	if b.rec != nil {
		b.rec.Release()
		b.rec = nil
	}
}

func (b *batchRows) Next() bool {
	for b.rec == nil || b.row+1 >= int(b.rec.NumRows()) {
		b.release()
		rec, err, ok := b.next()
		if !ok {
			return false
		}
		if err != nil {
			b.err = err
			return false
		}
		rec.Retain() // the scan releases it after the yield; we keep it until the next pull
		b.rec, b.row = rec, -1
		b.idx = b.idx[:0]
		for _, c := range b.cols {
			is := rec.Schema().FieldIndices(c)
			if len(is) != 1 {
				b.err = fmt.Errorf("%w: native dataset has no single column %q", ErrInvalid, c)
				return false
			}
			b.idx = append(b.idx, is[0])
		}
		if rec.NumRows() > 0 {
			break
		}
	}
	b.row++
	return true
}

func (b *batchRows) Values() ([]any, error) {
	b.vals = b.vals[:0]
	for _, i := range b.idx {
		v, err := arrowValue(b.rec.Column(i), b.row)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", b.cols[len(b.vals)], err)
		}
		b.vals = append(b.vals, v)
	}
	return b.vals, nil
}

func (b *batchRows) Err() error { return b.err }

// arrowValue converts one Arrow value to a value pgx encodes.
func arrowValue(arr arrow.Array, i int) (any, error) {
	if arr.IsNull(i) {
		return nil, nil
	}
	switch a := arr.(type) {
	case array.ExtensionArray:
		return arrowValue(a.Storage(), i)
	case *array.Boolean:
		return a.Value(i), nil
	case *array.Int8:
		return int64(a.Value(i)), nil
	case *array.Int16:
		return int64(a.Value(i)), nil
	case *array.Int32:
		return int64(a.Value(i)), nil
	case *array.Int64:
		return a.Value(i), nil
	case *array.Float32:
		return float64(a.Value(i)), nil
	case *array.Float64:
		return a.Value(i), nil
	case *array.Decimal128:
		scale := a.DataType().(*arrow.Decimal128Type).Scale
		return pgtype.Numeric{Int: a.Value(i).BigInt(), Exp: -scale, Valid: true}, nil
	case *array.String:
		return a.Value(i), nil
	case *array.LargeString:
		return a.Value(i), nil
	case *array.StringView:
		return a.Value(i), nil
	case *array.Binary:
		return cloneBytes(a.Value(i)), nil
	case *array.LargeBinary:
		return cloneBytes(a.Value(i)), nil
	case *array.FixedSizeBinary:
		v := a.Value(i)
		if len(v) == 16 {
			var u [16]byte
			copy(u[:], v)
			return u, nil
		}
		return cloneBytes(v), nil
	case *array.Date32:
		return a.Value(i).ToTime(), nil
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return a.Value(i).ToTime(unit), nil
	case *array.Time64:
		unit := a.DataType().(*arrow.Time64Type).Unit
		us := int64(a.Value(i))
		if unit == arrow.Nanosecond {
			us /= 1000
		}
		return pgtype.Time{Microseconds: us, Valid: true}, nil
	case *array.List:
		return listValue(a, i, arrowValue)
	}
	return nil, fmt.Errorf("%w: Arrow type %s cannot be copied into Postgres", ErrInvalid, arr.DataType())
}

// listValue is the list at row i of a, its elements converted by elem.
func listValue(a *array.List, i int, elem func(arrow.Array, int) (any, error)) (any, error) {
	start, end := a.ValueOffsets(i)
	vals := a.ListValues()
	out := make([]any, 0, end-start)
	for j := start; j < end; j++ {
		v, err := elem(vals, int(j))
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// cloneBytes copies b into a non-nil slice: pgx encodes a nil []byte as
// NULL, and an empty bytea is not NULL.
func cloneBytes(b []byte) []byte {
	out := make([]byte, len(b))
	copy(out, b)
	return out
}
