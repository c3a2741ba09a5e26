package writestrategy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// pipelinedTx is a transaction on one session whose BEGIN (and settings)
// is sent with its first statement: when that statement is the
// description of the output (describe), the two share a round trip;
// anything else sent through it begins it first, in a round trip of its
// own, as pgx's own transactions do. Conn is the session whether begun or
// not: a description read through it before the BEGIN (as a relation's
// is) sees what it would see inside the transaction, each statement of a
// read-committed transaction taking its own snapshot.
//
// Its Commit, Rollback and savepoints (Begin) behave as pgx's: ending a
// transaction that was never begun sends nothing.
type pipelinedTx struct {
	conn   *pgx.Conn
	begin  []string // BEGIN, then parameterless setting statements
	begun  bool
	closed bool
	sp     int64 // savepoints made so far
}

func newPipelinedTx(conn *pgx.Conn, begin ...string) *pipelinedTx {
	return &pipelinedTx{conn: conn, begin: begin}
}

// ensure begins the transaction when it has not begun yet.
func (t *pipelinedTx) ensure(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	if t.begun {
		return nil
	}
	_, err := t.conn.Exec(ctx, strings.Join(t.begin, "; "))
	t.afterBegin(err)
	return err
}

// afterBegin records the session's state after an attempt to begin: in a
// transaction block (even a failed one) it is begun, and rolled back by
// Rollback; a session broken on the way is closed.
func (t *pipelinedTx) afterBegin(err error) {
	if t.conn.PgConn().TxStatus() != 'I' {
		t.begun = true
	}
	var pgErr *pgconn.PgError
	if err != nil && (!errors.As(err, &pgErr) || pgErr.Severity == "FATAL" || pgErr.Severity == "PANIC") {
		t.kill()
	}
}

// kill closes a session left in an unknown state.
func (t *pipelinedTx) kill() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = t.conn.Close(ctx)
}

// describe returns the description of sql (its columns, without running
// it), sent in one round trip with the BEGIN when the transaction has not
// begun yet.
func (t *pipelinedTx) describe(ctx context.Context, sql string) (*pgconn.StatementDescription, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	if t.begun {
		return t.conn.PgConn().Prepare(ctx, "", sql, nil)
	}
	p := t.conn.PgConn().StartPipeline(ctx)
	for _, q := range t.begin {
		p.SendQueryParams(q, nil, nil, nil, nil)
	}
	p.SendPrepare("", sql, nil)
	err := p.Sync()
	var sd *pgconn.StatementDescription
	for i := 0; err == nil && i <= len(t.begin); i++ {
		var res any
		if res, err = p.GetResults(); err != nil {
			break
		}
		switch r := res.(type) {
		case *pgconn.ResultReader:
			_, err = r.Close()
		case *pgconn.StatementDescription:
			sd = r
		default:
			err = fmt.Errorf("describe: unexpected pipeline result %T", res)
		}
	}
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	t.afterBegin(err)
	if err != nil {
		return nil, err
	}
	return sd, nil
}

func (t *pipelinedTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := t.ensure(ctx); err != nil {
		return nil, err
	}
	t.sp++
	n := t.sp
	if _, err := t.conn.Exec(ctx, "savepoint sp_"+strconv.FormatInt(n, 10)); err != nil {
		return nil, err
	}
	return &savepointTx{parent: t, n: n}, nil
}

func (t *pipelinedTx) Commit(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	if !t.begun {
		return nil
	}
	tag, err := t.conn.Exec(ctx, "commit")
	if err != nil {
		if t.conn.PgConn().TxStatus() != 'I' {
			t.kill()
		}
		return err
	}
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

func (t *pipelinedTx) Rollback(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	if !t.begun {
		return nil
	}
	if _, err := t.conn.Exec(ctx, "rollback"); err != nil {
		t.kill() // the session's state is unknown
		return fmt.Errorf("rollback failed: %w", err)
	}
	return nil
}

func (t *pipelinedTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.ensure(ctx); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, cols, src)
}

// SendBatch sends b, begun first; a batch that begins with the
// transaction's own BEGIN and settings (see Dispatcher.oneTrip) begins it
// in its round trip.
func (t *pipelinedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if !t.begun && !t.closed && t.begins(b) {
		return &beginningBatch{BatchResults: t.conn.SendBatch(ctx, b), t: t}
	}
	if err := t.ensure(ctx); err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return t.conn.SendBatch(ctx, b)
}

// begins reports whether b's first statements are t's BEGIN and settings.
func (t *pipelinedTx) begins(b *pgx.Batch) bool {
	if b.Len() <= len(t.begin) {
		return false
	}
	for i, q := range t.begin {
		if qq := b.QueuedQueries[i]; qq.SQL != q || len(qq.Arguments) != 0 {
			return false
		}
	}
	return true
}

// beginningBatch is the results of a batch that begins its transaction:
// its Close records the session's state as the transaction's.
type beginningBatch struct {
	pgx.BatchResults
	t *pipelinedTx
}

func (b *beginningBatch) Close() error {
	err := b.BatchResults.Close()
	b.t.afterBegin(err)
	return err
}

// LargeObjects works on the transaction's session, begun; pgx makes its
// handle only from a transaction of its own, so one is made over the
// running transaction (a statement that begins nothing).
func (t *pipelinedTx) LargeObjects() pgx.LargeObjects {
	ctx := context.Background()
	if err := t.ensure(ctx); err != nil {
		return pgx.LargeObjects{}
	}
	inner, err := t.conn.BeginTx(ctx, pgx.TxOptions{BeginQuery: "SELECT 1"})
	if err != nil {
		return pgx.LargeObjects{}
	}
	return inner.LargeObjects()
}

func (t *pipelinedTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := t.ensure(ctx); err != nil {
		return nil, err
	}
	return t.conn.Prepare(ctx, name, sql)
}

func (t *pipelinedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.ensure(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.conn.Exec(ctx, sql, args...)
}

func (t *pipelinedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.ensure(ctx); err != nil {
		return errRows{err}, err
	}
	return t.conn.Query(ctx, sql, args...)
}

func (t *pipelinedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.ensure(ctx); err != nil {
		return errRows{err}
	}
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *pipelinedTx) Conn() *pgx.Conn { return t.conn }

// savepointTx is a savepoint of a pipelinedTx (its Begin), as pgx's
// nested transactions are.
type savepointTx struct {
	parent *pipelinedTx
	n      int64
	closed bool
}

func (s *savepointTx) name() string { return "sp_" + strconv.FormatInt(s.n, 10) }

func (s *savepointTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if s.closed {
		return nil, pgx.ErrTxClosed
	}
	return s.parent.Begin(ctx)
}

func (s *savepointTx) Commit(ctx context.Context) error {
	if s.closed {
		return pgx.ErrTxClosed
	}
	s.closed = true
	_, err := s.parent.Exec(ctx, "release savepoint "+s.name())
	return err
}

func (s *savepointTx) Rollback(ctx context.Context) error {
	if s.closed {
		return pgx.ErrTxClosed
	}
	s.closed = true
	_, err := s.parent.Exec(ctx, "rollback to savepoint "+s.name())
	return err
}

func (s *savepointTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if s.closed {
		return 0, pgx.ErrTxClosed
	}
	return s.parent.CopyFrom(ctx, table, cols, src)
}

func (s *savepointTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if s.closed {
		return pgx.FailedBatchResults(b, pgx.ErrTxClosed)
	}
	return s.parent.SendBatch(ctx, b)
}

func (s *savepointTx) LargeObjects() pgx.LargeObjects { return s.parent.LargeObjects() }

func (s *savepointTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if s.closed {
		return nil, pgx.ErrTxClosed
	}
	return s.parent.Prepare(ctx, name, sql)
}

func (s *savepointTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if s.closed {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	return s.parent.Exec(ctx, sql, args...)
}

func (s *savepointTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if s.closed {
		return errRows{pgx.ErrTxClosed}, pgx.ErrTxClosed
	}
	return s.parent.Query(ctx, sql, args...)
}

func (s *savepointTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if s.closed {
		return errRows{pgx.ErrTxClosed}
	}
	return s.parent.QueryRow(ctx, sql, args...)
}

func (s *savepointTx) Conn() *pgx.Conn { return s.parent.conn }

// errRows are the rows (and row) of a query that could not be sent.
type errRows struct{ err error }

func (errRows) Close()                                       {}
func (r errRows) Err() error                                 { return r.err }
func (errRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (errRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (errRows) Next() bool                                   { return false }
func (r errRows) Scan(...any) error                          { return r.err }
func (r errRows) Values() ([]any, error)                     { return nil, r.err }
func (errRows) RawValues() [][]byte                          { return nil }
func (errRows) Conn() *pgx.Conn                              { return nil }
func (errRows) TypeMap() *pgtype.Map                         { return nil }
