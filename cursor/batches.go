package cursor

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Stream is a query prepared for streaming as Arrow record batches. Its
// schema is known before the first batch; the query runs only when All is
// ranged or the RecordReader is read. A Stream is single-use.
type Stream struct {
	ctx    context.Context
	db     DB
	sql    string
	args   []any
	o      Options
	cols   []column
	schema *arrow.Schema
	used   atomic.Bool
	// rounded counts the numeric values rounded to their column's scale,
	// per column.
	rounded []atomic.Int64
}

// Batches describes sql (with args, which may start with a pgx.QueryRewriter
// such as pgx.NamedArgs) on db and returns a Stream whose Schema is known.
// Describing does not execute the query and holds no connection afterwards;
// an invalid query or an unsupported column type is reported here, as a
// *QueryError or an error matching ErrUnsupportedType. ctx governs the whole stream,
// including the later ranging of All.
func Batches(ctx context.Context, db DB, sql string, args []any, opts *Options) (*Stream, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	fds, types, err := describe(ctx, db, o.Mode, sql, args)
	if err != nil {
		return nil, err
	}
	cols, schema, err := planColumns(fds, types, &o)
	if err != nil {
		return nil, err
	}
	s := &Stream{ctx: ctx, db: db, sql: sql, args: args, o: o, cols: cols, schema: schema, rounded: make([]atomic.Int64, len(cols))}
	for i := range s.cols {
		s.cols[i].rounded = &s.rounded[i]
	}
	return s, nil
}

// Rounded returns how many numeric values the stream has rounded so far to
// their column's scale (Options.Numeric = NumericRound): the count for the
// whole result once the stream has been read to its end. Safe to call from
// any goroutine.
func (s *Stream) Rounded() int64 {
	var n int64
	for i := range s.rounded {
		n += s.rounded[i].Load()
	}
	return n
}

// describe prepares sql as the unnamed statement and loads the pg_type rows
// of its result columns. In a caller's transaction it runs in a savepoint,
// so a bad query does not abort that transaction.
func describe(ctx context.Context, db DB, mode StreamMode, sql string, args []any) (_ []pgconn.FieldDescription, _ map[uint32]*pgType, err error) {
	s, err := acquire(ctx, db, mode)
	if err != nil {
		return nil, nil, err
	}
	conn := s.conn
	if s.callerTx != nil {
		defer s.release(ctx, false) // the caller's connection: nothing to give back
		conn = s.callerTx.Conn()
		if sql, _, err = rewrite(ctx, conn, sql, args); err != nil {
			return nil, nil, err
		}
		sd, err := prepareInSavepoint(ctx, conn.PgConn(), sql)
		if err != nil {
			return nil, nil, &QueryError{Op: "describe", err: err}
		}
		return lookupFields(ctx, conn, sd)
	}
	var tx pgx.Tx
	if s.beginner != nil {
		if tx, err = s.begin(ctx, pgx.TxOptions{}); err != nil {
			s.release(ctx, false)
			return nil, nil, &QueryError{Op: "describe", err: err}
		}
		conn = tx.Conn()
	}
	defer func() {
		cctx, cancel := cleanupContext(ctx, defaultCleanupTimeout)
		defer cancel()
		broken := false
		if tx != nil {
			if rerr := tx.Rollback(cctx); rerr != nil && !errors.Is(rerr, pgx.ErrTxClosed) {
				broken = true
				if err == nil {
					err = &QueryError{Op: "describe", err: rerr}
				}
			}
		}
		s.release(cctx, broken || conn.IsClosed())
	}()
	sql, _, err = rewrite(ctx, conn, sql, args)
	if err != nil {
		return nil, nil, err
	}
	sd, err := conn.PgConn().Prepare(ctx, "", sql, nil)
	if err != nil {
		return nil, nil, &QueryError{Op: "describe", err: err}
	}
	return lookupFields(ctx, conn, sd)
}

// lookupFields loads the pg_type rows of the result columns of sd.
func lookupFields(ctx context.Context, conn *pgx.Conn, sd *pgconn.StatementDescription) ([]pgconn.FieldDescription, map[uint32]*pgType, error) {
	oids := make([]uint32, len(sd.Fields))
	for i, f := range sd.Fields {
		oids[i] = f.DataTypeOID
	}
	types, err := lookupTypes(ctx, conn, oids)
	if err != nil {
		return nil, nil, &QueryError{Op: "describe", err: err}
	}
	return sd.Fields, types, nil
}

// describeSavepoint is the savepoint prepareInSavepoint takes.
const describeSavepoint = "lakewrite_cursor_describe"

// prepareInSavepoint prepares sql as the unnamed statement inside a
// savepoint of the transaction conn is in, so that a bad query does not
// abort that transaction: savepoint, prepare and release go in one round
// trip; a failed prepare costs a second one (rollback to the savepoint).
func prepareInSavepoint(ctx context.Context, conn *pgconn.PgConn, sql string) (*pgconn.StatementDescription, error) {
	p := conn.StartPipeline(ctx)
	p.SendQueryParams(`SAVEPOINT `+describeSavepoint, nil, nil, nil, nil)
	p.SendPrepare("", sql, nil)
	p.SendQueryParams(`RELEASE SAVEPOINT `+describeSavepoint, nil, nil, nil, nil)
	if err := p.Sync(); err != nil {
		return nil, errors.Join(err, p.Close())
	}
	var sd *pgconn.StatementDescription
	var first error
	for done := false; !done; {
		res, err := p.GetResults()
		if err != nil {
			if first == nil {
				first = err
			}
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) {
				break
			}
			continue
		}
		switch r := res.(type) {
		case *pgconn.ResultReader:
			if _, err := r.Close(); err != nil && first == nil {
				first = err
			}
		case *pgconn.StatementDescription:
			sd = r
		case *pgconn.PipelineSync, nil:
			done = true
		}
	}
	if err := p.Close(); err != nil && first == nil {
		first = err
	}
	if first == nil && sd == nil {
		first = errors.New("no statement description")
	}
	if first == nil {
		return sd, nil
	}
	var pgErr *pgconn.PgError
	if errors.As(first, &pgErr) && !conn.IsClosed() {
		// The transaction is aborted inside the savepoint: back to it.
		cctx, cancel := cleanupContext(ctx, defaultCleanupTimeout)
		defer cancel()
		if err := conn.Exec(cctx, `ROLLBACK TO SAVEPOINT `+describeSavepoint+`; RELEASE SAVEPOINT `+describeSavepoint).Close(); err != nil {
			return nil, errors.Join(first, err)
		}
	}
	return nil, first
}

// Schema is the Arrow schema of every batch: one nullable field per result
// column, carrying MetaPGType (and MetaJSON) in its metadata.
func (s *Stream) Schema() *arrow.Schema { return s.schema }

// All runs the query and yields its rows as record batches of at most
// Options.BatchSize rows (none for an empty result).
//
// Ownership: each yielded batch belongs to the consumer, who must Release
// it (this matches array.ReaderFromIter and iceberg-go's table.WriteRecords,
// which release what they consume). At most one batch is being built while
// the consumer holds the previous ones, so memory stays bounded as long as
// the consumer releases them.
//
// A streaming error is yielded once, after the connection has been cleaned
// up, and ends the sequence. Rows yielded before an error are not a complete
// result. The sequence is single-use: ranging it (or the Stream) again
// yields errAlreadyConsumed.
func (s *Stream) All() iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		if !s.used.CompareAndSwap(false, true) {
			yield(nil, errAlreadyConsumed)
			return
		}
		b := s.start()
		finished := false
		defer func() {
			if !finished { // the consumer panicked
				b.finish(errors.New("cursor: consumer panicked"), true)
			}
		}()
		for {
			rec, err := b.next()
			if err != nil {
				finished = true
				yield(nil, b.finish(err, false))
				return
			}
			if rec == nil {
				finished = true
				if err := b.finish(nil, false); err != nil {
					yield(nil, err)
				}
				return
			}
			if !yield(rec, nil) {
				finished = true
				b.finish(nil, true)
				return
			}
		}
	}
}

// batcher is the pull side of a Stream: open on first next, decode one
// batch per next, finish once.
type batcher struct {
	s      *Stream
	r      *run
	cols   []colBuilder
	rec    *recycler // allocator of the batches' buffers
	opened bool
	ended  bool
	full   bool // a batch was full: the next ones are BatchSize rows
}

// firstBatchRows bounds the rows of a stream's first batch.
const firstBatchRows = 1024

func (s *Stream) start() *batcher {
	return &batcher{s: s, r: &run{o: s.o, db: s.db, sql: s.sql, args: s.args}}
}

func (b *batcher) init() error {
	b.opened = true
	if err := b.s.open(b.r); err != nil {
		return err
	}
	b.rec = newRecycler(b.s.o.Allocator)
	b.cols = make([]colBuilder, len(b.s.cols))
	for i := range b.s.cols {
		b.cols[i] = newColBuilder(&b.s.cols[i], b.rec, b.s.o.Allocator, b.s.o.BatchSize)
	}
	return nil
}

// open runs the query of r and checks that its result has the described
// columns.
func (s *Stream) open(r *run) error {
	formats := make(pgx.QueryResultFormats, len(s.cols))
	for i, c := range s.cols {
		formats[i] = c.format
	}
	if err := r.open(s.ctx, pgx.QueryExecModeDescribeExec, formats); err != nil {
		return err
	}
	fds := r.rows.FieldDescriptions()
	if len(fds) != len(s.cols) {
		// pgx may defer an execution error (a cancel, a runaway guard) to
		// the rows; surface that rather than the mismatch.
		r.rows.Close()
		if err := r.rows.Err(); err != nil {
			return wrapErr("query", err, r.qctx)
		}
		return &QueryError{Op: "query", err: fmt.Errorf("result has %d columns, described %d", len(fds), len(s.cols))}
	}
	for i, fd := range fds {
		if fd.DataTypeOID != s.cols[i].oid {
			return &QueryError{Op: "query", err: fmt.Errorf("column %q changed type since Batches described it (oid %d, was %d)", fd.Name, fd.DataTypeOID, s.cols[i].oid)}
		}
	}
	return nil
}

// next returns the next batch, nil at the end, or the error that ended the
// stream.
func (b *batcher) next() (arrow.RecordBatch, error) {
	if b.ended {
		return nil, nil
	}
	if !b.opened {
		if err := b.init(); err != nil {
			return nil, err
		}
	}
	if err := b.r.checkDuration(); err != nil {
		return nil, err
	}
	size := b.s.o.BatchSize
	if b.s.o.smallFirst && !b.full {
		// The first batch is small, so that a small result does not cost
		// full-size buffers; once one is full, every batch is BatchSize.
		size = min(size, firstBatchRows)
	}
	rows := b.r.rows
	cols := b.cols
	for _, c := range cols {
		c.start(size)
	}
	count := 0
	for count < size && rows.Next() {
		if err := b.r.limitRows(); err != nil {
			return nil, err
		}
		raw := rows.RawValues()
		for i, c := range cols {
			if err := c.decode(raw[i]); err != nil {
				sc := &b.s.cols[i]
				return nil, &decodeError{column: sc.name, typeName: sc.typeName, row: b.r.n - 1, err: err}
			}
		}
		count++
	}
	if count < size {
		if err := rows.Err(); err != nil {
			return nil, wrapErr("stream", err, b.r.qctx)
		}
		b.r.done = true
		b.ended = true
		if count == 0 {
			return nil, nil
		}
	} else {
		b.full = true
	}
	arrs := make([]arrow.Array, len(cols))
	bytes := 0
	for i, c := range cols {
		arrs[i] = c.build()
		for _, buf := range arrs[i].Data().Buffers() {
			if buf != nil {
				bytes += buf.Len()
			}
		}
	}
	b.rec.batchBytes(bytes)
	rec := array.NewRecordBatch(b.s.schema, arrs, int64(count))
	for _, a := range arrs {
		a.Release()
	}
	return rec, nil
}

// finish cleans up and returns the error to report: err itself, or a
// cleanup error when the stream had succeeded.
func (b *batcher) finish(err error, stopped bool) error {
	for _, c := range b.cols {
		c.release()
	}
	b.cols = nil
	if b.rec != nil {
		b.rec.close()
	}
	b.ended = true
	cerr := b.r.close(b.s.ctx, err, stopped)
	if err != nil {
		return err
	}
	return cerr
}
