package writestrategy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"math/big"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
)

// errBatchSchema: a record batch's schema differs from the load's
// (LoadRequest.Schema, or else the first batch's); nothing was written.
var errBatchSchema = errors.New("writestrategy: record batch schema differs from the load's")

// arrowTypeError refuses column col of a load, of Arrow type t. It matches
// ErrUnsupportedType.
func arrowTypeError(col string, t arrow.DataType) error {
	return fmt.Errorf("%w by a load: column %q: Arrow type %s; cast it (to a string, say) first", ErrUnsupportedType, col, t)
}

// LoadRequest is one load of rows into a dataset: exactly one of SQL,
// Batches and Reader is set.
type LoadRequest struct {
	// WriterID is the flag namespace that routes the load (row store or
	// Iceberg), as for Request.
	WriterID string
	// DatasetID is the dataset written; it must be registered
	// (ledger.EnsureDataset) and not a registered relation.
	DatasetID string
	// Mode is facade.Replace (also when empty: the rows replace the
	// dataset's contents) or facade.Append (the rows are added after the
	// current ones).
	Mode facade.WriteMode

	// SQL is a SELECT run in the write's transaction (see Query), with
	// Args as $1, $2, ...
	SQL  string
	Args []any

	// Batches are the rows as Arrow record batches, borrowed: each batch
	// is valid until the next is asked for, and its owner releases it.
	// Single-use. Every batch must have the same schema (Schema when set,
	// else the first batch's).
	Batches iter.Seq2[arrow.RecordBatch, error]
	// Reader is the rows as an Arrow RecordReader, read to its end; its
	// owner releases it. Its schema is the load's.
	Reader array.RecordReader
	// Schema declares the batches' schema; needed only when Batches may
	// yield no batch at all (an empty load still declares its columns).
	Schema *arrow.Schema

	// Metadata, Numeric and IdempotencyKey: see Request.
	Metadata       map[string]string
	Numeric        cursor.NumericPolicy
	IdempotencyKey string
}

// Load writes rows into one dataset as one ledger intent, routed by the
// writer flags like any write (Dispatcher.Write): into the row store, or as
// one Iceberg snapshot (with identity columns, checksum, watermark and the
// ledger commit, as every Iceberg write).
//
// Rows of a query are the Query strategy's. Arrow record batches are first
// copied (COPY, one batch in memory) into a temporary table of the write's
// transaction (the Postgres transaction on the row store path, the compute
// transaction on the Iceberg path), which the same write then reads in
// order, so a load of the same rows gives the same dataset on either sink.
// Arrow types map to Postgres types as follows: bool -> boolean; int8,
// int16, uint8 -> smallint; int32, uint16 -> integer; int64, uint32 ->
// bigint; uint64 -> numeric(20,0); float32 -> real; float64 -> double
// precision; decimal128(p,s) -> numeric(p,s); string, large_string,
// string_view -> text; binary, large_binary, fixed_size_binary -> bytea,
// except fixed_size_binary(16) -> uuid (as lakewrite streams uuid); date32,
// date64 -> date; timestamp -> timestamp, or timestamp with time zone when
// it has a time zone; time32, time64 -> time; list of any of these -> an
// array of it. Postgres keeps microseconds: finer timestamps and times are
// truncated to them. Any other type is refused with an error matching ErrUnsupportedType
// that names the column.
//
// Bad input (none or several of SQL, Batches and Reader; batches of
// different schemas; an unsupported type; an error yielded by Batches or
// Reader) fails the write: its intent is aborted and nothing is visible.
func (d *Dispatcher) Load(ctx context.Context, req LoadRequest) (WriteResult, error) {
	s, err := loadStrategy(req)
	if err != nil {
		return WriteResult{}, err
	}
	res, err := d.Write(ctx, Request{WriterID: req.WriterID, Strategy: s, Metadata: req.Metadata,
		Numeric: req.Numeric, IdempotencyKey: req.IdempotencyKey})
	if err != nil {
		return WriteResult{}, err
	}
	return res[0], nil
}

// loadStrategy is the strategy of a load.
func loadStrategy(req LoadRequest) (WriteStrategy, error) {
	set := 0
	for _, ok := range []bool{req.SQL != "", req.Batches != nil, req.Reader != nil} {
		if ok {
			set++
		}
	}
	if set != 1 {
		return nil, fmt.Errorf("%w: a LoadRequest needs exactly one of SQL, Batches and Reader (%d set)", ErrInvalid, set)
	}
	if err := checkDatasetID("load", req.DatasetID); err != nil {
		return nil, err
	}
	switch req.Mode {
	case "", facade.Replace, facade.Append:
	default:
		return nil, fmt.Errorf("%w: LoadRequest.Mode %q (want facade.Replace or facade.Append)", ErrInvalid, req.Mode)
	}
	q := queryStrategy{Output: req.DatasetID, SQL: req.SQL, Args: req.Args, Mode: req.Mode}
	if req.SQL != "" {
		return q, nil
	}
	if len(req.Args) > 0 {
		return nil, fmt.Errorf("%w: Args are for SQL; record batches take none", ErrInvalid)
	}
	batches, schema := req.Batches, req.Schema
	if req.Reader != nil {
		if schema == nil {
			schema = req.Reader.Schema()
		}
		batches = facade.FromReader(req.Reader)
	}
	return &batchLoad{q: q, batches: batches, schema: schema}, nil
}

// stager is a strategy that first puts its input into the write's
// transaction (prepare calls stage before planning).
type stager interface {
	stage(ctx context.Context, tx pgx.Tx) error
}

// batchLoad is the strategy of a load of record batches: a Query over the
// temporary table its stage fills. Single-use.
type batchLoad struct {
	q       queryStrategy
	batches iter.Seq2[arrow.RecordBatch, error]
	schema  *arrow.Schema
	staged  bool
}

func (b *batchLoad) Kind() Kind           { return kindQuery }
func (b *batchLoad) Outputs() []string    { return b.q.Outputs() }
func (b *batchLoad) Sources() []string    { return nil }
func (b *batchLoad) appendOutput() string { return b.q.appendOutput() }

func (b *batchLoad) Apply(ctx context.Context, tx pgx.Tx, env *Env) ([]WriteResult, error) {
	return applyStrategy(ctx, tx, env, b)
}

func (b *batchLoad) ComputeRows(ctx context.Context, tx pgx.Tx, env *Env, opts *cursor.Options) ([]Computed, error) {
	return ComputeRows(ctx, tx, env, b, opts)
}

func (b *batchLoad) plan(pc *planContext) ([]projection, error) {
	if b.q.SQL == "" {
		return nil, fmt.Errorf("%w: record batches of %q were not staged", ErrInvalid, b.q.Output)
	}
	return b.q.plan(pc)
}

// stage copies the batches into a temporary table of tx (dropped at its
// end) and points the query at it.
func (b *batchLoad) stage(ctx context.Context, tx pgx.Tx) error {
	if b.staged {
		return fmt.Errorf("%w: the record batches of a load are single-use", ErrInvalid)
	}
	b.staged = true
	next, stop := iter.Pull2(b.batches)
	defer stop()
	first, err, ok := next()
	if ok && err != nil {
		return fmt.Errorf("writestrategy: load %q: record batches: %w", b.q.Output, err)
	}
	schema := b.schema
	if schema == nil {
		if !ok {
			return fmt.Errorf("%w: load %q has no record batch and no Schema to declare its columns", ErrInvalid, b.q.Output)
		}
		schema = first.Schema()
	}
	defs, names, err := loadColumns(schema)
	if err != nil {
		return err
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	name := "lw_load_" + hex.EncodeToString(suffix[:])
	if _, err := tx.Exec(ctx, "CREATE TEMP TABLE "+pgx.Identifier{name}.Sanitize()+" ("+strings.Join(defs, ", ")+`, "__ord" bigint) ON COMMIT DROP`); err != nil {
		return queryError("load "+b.q.Output, err)
	}
	src := &loadRows{next: next, schema: schema, output: b.q.Output}
	if ok {
		src.pending = first
	}
	defer src.release()
	_, err = tx.CopyFrom(ctx, pgx.Identifier{name}, append(names, "__ord"), src)
	if src.panicked != nil {
		// pgx pulls the rows on a goroutine of its own: a panic of the
		// caller's iterator was caught there and goes on here, on the
		// caller's goroutine, where the caller can recover it.
		panic(src.panicked.value)
	}
	if err != nil {
		if src.err != nil {
			return src.err
		}
		return queryError("load "+b.q.Output, err)
	}
	qualified := pgx.Identifier{"pg_temp", name}.Sanitize()
	if _, err := tx.Exec(ctx, "ANALYZE "+qualified); err != nil {
		return queryError("load "+b.q.Output, err)
	}
	b.q.SQL = "SELECT " + strings.Join(quoteIdents(names), ", ") + " FROM " + qualified + ` ORDER BY "__ord"`
	return nil
}

// loadColumns returns the column definitions of a load's temporary table.
func loadColumns(s *arrow.Schema) (defs, names []string, err error) {
	if s.NumFields() == 0 {
		return nil, nil, fmt.Errorf("%w: the record batches have no columns", ErrInvalid)
	}
	seen := map[string]string{}
	for _, f := range s.Fields() {
		if err := checkColumnName(f.Name); err != nil {
			return nil, nil, err
		}
		if prev, dup := seen[columnKey(f.Name)]; dup {
			return nil, nil, identifierError("column", f.Name, clashReason(prev, f.Name))
		}
		seen[columnKey(f.Name)] = f.Name
		typ, err := pgTypeOf(f.Name, f.Type)
		if err != nil {
			return nil, nil, err
		}
		defs = append(defs, pgx.Identifier{f.Name}.Sanitize()+" "+typ)
		names = append(names, f.Name)
	}
	return defs, names, nil
}

// pgTypeOf maps an Arrow type to the Postgres type a load stores it as.
func pgTypeOf(col string, t arrow.DataType) (string, error) {
	switch t := t.(type) {
	case arrow.ExtensionType:
		return pgTypeOf(col, t.StorageType())
	case *arrow.BooleanType:
		return "boolean", nil
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Uint8Type:
		return "smallint", nil
	case *arrow.Int32Type, *arrow.Uint16Type:
		return "integer", nil
	case *arrow.Int64Type, *arrow.Uint32Type:
		return "bigint", nil
	case *arrow.Uint64Type:
		return "numeric(20,0)", nil
	case *arrow.Float32Type:
		return "real", nil
	case *arrow.Float64Type:
		return "double precision", nil
	case *arrow.Decimal128Type:
		if t.Precision < 1 || t.Precision > 38 || t.Scale < 0 || t.Scale > t.Precision {
			return "", arrowTypeError(col, t)
		}
		return fmt.Sprintf("numeric(%d,%d)", t.Precision, t.Scale), nil
	case *arrow.StringType, *arrow.LargeStringType, *arrow.StringViewType:
		return "text", nil
	case *arrow.BinaryType, *arrow.LargeBinaryType:
		return "bytea", nil
	case *arrow.FixedSizeBinaryType:
		if t.ByteWidth == 16 {
			return "uuid", nil
		}
		return "bytea", nil
	case *arrow.Date32Type, *arrow.Date64Type:
		return "date", nil
	case *arrow.TimestampType:
		if t.TimeZone != "" {
			return "timestamp with time zone", nil
		}
		return "timestamp without time zone", nil
	case *arrow.Time32Type, *arrow.Time64Type:
		return "time without time zone", nil
	case *arrow.ListType:
		elem, err := pgTypeOf(col, t.Elem())
		if err != nil {
			return "", arrowTypeError(col, t)
		}
		if strings.HasSuffix(elem, "[]") {
			return "", arrowTypeError(col, t) // Postgres arrays are not nested lists
		}
		return elem + "[]", nil
	}
	return "", arrowTypeError(col, t)
}

// loadRows adapts pulled record batches to pgx.CopyFromSource, numbering
// the rows in "__ord" and checking every batch's schema.
type loadRows struct {
	next    func() (arrow.RecordBatch, error, bool)
	schema  *arrow.Schema
	output  string
	pending arrow.RecordBatch // the first batch, pulled before the copy
	rec     arrow.RecordBatch
	row     int
	ord     int64
	vals    []any
	err     error
	// panicked holds a panic raised while pulling or converting rows
	// (pgx calls Next and Values on a goroutine of its own).
	panicked *loadPanic
}

type loadPanic struct{ value any }

// catch turns a panic in Next or Values into an error that stops the
// copy, keeping the panic's value for the caller's goroutine.
func (l *loadRows) catch(fail func()) {
	if r := recover(); r != nil {
		l.panicked = &loadPanic{value: r}
		l.err = fmt.Errorf("writestrategy: load %q: panic while reading the record batches: %v", l.output, r)
		fail()
	}
}

func (l *loadRows) release() {
	if l.rec != nil {
		l.rec.Release()
		l.rec = nil
	}
}

func (l *loadRows) Next() (ok bool) {
	defer l.catch(func() { ok = false })
	for l.rec == nil || l.row+1 >= int(l.rec.NumRows()) {
		l.release()
		rec := l.pending
		l.pending = nil
		if rec == nil {
			r, err, ok := l.next()
			if !ok {
				return false
			}
			if err != nil {
				l.err = fmt.Errorf("writestrategy: load %q: record batches: %w", l.output, err)
				return false
			}
			rec = r
		}
		if !rec.Schema().Equal(l.schema) {
			l.err = fmt.Errorf("%w: load %q: batch schema %s, load schema %s", errBatchSchema, l.output, rec.Schema(), l.schema)
			return false
		}
		rec.Retain() // borrowed until the next pull; kept while its rows are copied
		l.rec, l.row = rec, -1
	}
	l.row++
	return true
}

func (l *loadRows) Values() (vals []any, err error) {
	defer l.catch(func() { vals, err = nil, l.err })
	l.vals = l.vals[:0]
	for i, col := range l.rec.Columns() {
		v, err := loadValue(col, l.row)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", l.schema.Field(i).Name, err)
		}
		l.vals = append(l.vals, v)
	}
	l.vals = append(l.vals, l.ord)
	l.ord++
	return l.vals, nil
}

func (l *loadRows) Err() error { return l.err }

// loadValue converts one Arrow value to a value pgx encodes as the column
// type pgTypeOf chose.
func loadValue(arr arrow.Array, i int) (any, error) {
	if arr.IsNull(i) {
		return nil, nil
	}
	switch a := arr.(type) {
	case array.ExtensionArray:
		return loadValue(a.Storage(), i)
	case *array.Uint8:
		return int64(a.Value(i)), nil
	case *array.Uint16:
		return int64(a.Value(i)), nil
	case *array.Uint32:
		return int64(a.Value(i)), nil
	case *array.Uint64:
		return pgtype.Numeric{Int: new(big.Int).SetUint64(a.Value(i)), Valid: true}, nil
	case *array.Date64:
		return a.Value(i).ToTime(), nil
	case *array.Time32:
		unit := a.DataType().(*arrow.Time32Type).Unit
		ms := int64(a.Value(i))
		if unit == arrow.Second {
			ms *= 1000
		}
		return pgtype.Time{Microseconds: ms * 1000, Valid: true}, nil
	case *array.List:
		return listValue(a, i, loadValue)
	}
	return arrowValue(arr, i)
}
