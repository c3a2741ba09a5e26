package cursor

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

var errCleanupTimeout = errors.New("cursor: cleanup timed out (Options.CleanupTimeout)")

// run is one execution of a query: the session, the transaction it runs
// in, the staging table and the open result. It is driven by a single
// goroutine: open, then reads of rows, then close.
type run struct {
	o    Options
	db   DB
	sql  string
	args []any

	s       *session
	tx      pgx.Tx
	stage   string
	rows    pgx.Rows
	qctx    context.Context
	qcancel context.CancelCauseFunc
	timer   *time.Timer
	n       int64 // rows read
	done    bool  // the result was read to its end without error
}

// open starts the query. queryOpts (exec mode, result formats) go before the
// arguments of the final SELECT.
func (r *run) open(ctx context.Context, queryOpts ...any) error {
	r.qctx, r.qcancel = context.WithCancelCause(ctx)
	if d := r.o.MaxDuration; d > 0 {
		r.timer = time.AfterFunc(d, func() { r.qcancel(&limitError{MaxDuration: d}) })
	}
	s, err := acquire(r.qctx, r.db, r.o.Mode)
	if err != nil {
		return wrapErr("acquire", err, r.qctx)
	}
	r.s = s
	if r.o.Mode == Direct {
		if r.tx, err = s.begin(r.qctx, pgx.TxOptions{}); err != nil {
			return wrapErr("begin", err, r.qctx)
		}
		sql, args, err := rewrite(r.qctx, r.tx.Conn(), r.sql, r.args)
		if err != nil {
			return err
		}
		r.rows, err = r.tx.Query(r.qctx, sql, append(queryOpts, args...)...)
		if err != nil {
			return wrapErr("query", err, r.qctx)
		}
		return nil
	}

	// Staged: compute into a temp table, commit, then read it.
	sql, args, err := rewrite(r.qctx, s.conn, r.sql, r.args)
	if err != nil {
		return err
	}
	if r.tx, err = s.begin(r.qctx, pgx.TxOptions{}); err != nil {
		return wrapErr("begin", err, r.qctx)
	}
	name := stageTableName()
	stmt := "CREATE TEMP TABLE " + name + " AS " + sql
	if _, err := r.tx.Exec(r.qctx, stmt, append([]any{pgx.QueryExecModeDescribeExec}, args...)...); err != nil {
		return wrapErr("stage", err, r.qctx)
	}
	r.stage = name // from here on, close drops it (harmless if the commit fails)
	err = r.tx.Commit(r.qctx)
	r.tx = nil
	if err != nil {
		return wrapErr("stage", err, r.qctx)
	}
	if r.tx, err = s.begin(r.qctx, pgx.TxOptions{AccessMode: pgx.ReadOnly}); err != nil {
		return wrapErr("begin", err, r.qctx)
	}
	// A fresh temp table read by its own session is scanned in insertion
	// order: temp tables use local buffers, so neither synchronized nor
	// parallel scans apply, and nothing else can write it.
	r.rows, err = r.tx.Query(r.qctx, "SELECT * FROM "+name, append(queryOpts, pgx.QueryExecModeDescribeExec)...)
	if err != nil {
		return wrapErr("query", err, r.qctx)
	}
	return nil
}

// limitRows counts one more row and reports a *limitError past MaxRows.
func (r *run) limitRows() error {
	r.n++
	if r.o.MaxRows > 0 && r.n > r.o.MaxRows {
		return &limitError{MaxRows: r.o.MaxRows}
	}
	return nil
}

func (r *run) checkDuration() error {
	if r.qctx != nil {
		var le *limitError
		if cause := context.Cause(r.qctx); errors.As(cause, &le) {
			return le
		}
	}
	return nil
}

// close ends everything the run started. failed is the error that ended
// the stream (nil when it was read to the end or the consumer stopped);
// stopped is true when the consumer stopped early. It returns the cleanup
// error worth reporting: only when the stream itself succeeded.
func (r *run) close(ctx context.Context, failed error, stopped bool) error {
	cctx, cancel := cleanupContext(ctx, r.o.CleanupTimeout)
	defer cancel()
	ok := failed == nil && !stopped
	var errs []error
	note := func(op string, err error) {
		if err != nil && ok {
			errs = append(errs, wrapErr(op, err, r.qctx))
		}
	}
	broken := false
	if r.rows != nil {
		if !r.done {
			// Closing an unfinished result drains it; bound that.
			t := time.AfterFunc(r.o.CleanupTimeout, func() { r.qcancel(errCleanupTimeout) })
			r.rows.Close()
			t.Stop()
		} else {
			r.rows.Close()
		}
		note("stream", r.rows.Err())
	}
	if r.timer != nil {
		r.timer.Stop()
	}
	if r.tx != nil {
		var err error
		if ok {
			err = r.tx.Commit(cctx)
		} else {
			err = r.tx.Rollback(cctx)
		}
		if err != nil {
			broken = true
			note("commit", err)
		}
	}
	if r.s != nil && r.stage != "" {
		if r.s.conn.IsClosed() {
			broken = true
		} else if _, err := r.s.conn.Exec(cctx, "DROP TABLE IF EXISTS "+r.stage, pgx.QueryExecModeSimpleProtocol); err != nil {
			broken = true
			note("cleanup", err)
		}
	}
	if r.qcancel != nil {
		r.qcancel(nil)
	}
	if r.s != nil {
		if r.s.conn != nil && (r.s.conn.IsClosed() || r.s.conn.PgConn().TxStatus() != 'I') && r.s.callerTx == nil {
			broken = true
		}
		r.s.release(cctx, broken)
	}
	return errors.Join(errs...)
}

// rewrite applies a pgx.QueryRewriter (such as pgx.NamedArgs) given as the
// first argument, so the same SQL can be described, staged and run.
func rewrite(ctx context.Context, conn *pgx.Conn, sql string, args []any) (string, []any, error) {
	if len(args) > 0 {
		if qr, ok := args[0].(pgx.QueryRewriter); ok {
			s, a, err := qr.RewriteQuery(ctx, conn, sql, args[1:])
			if err != nil {
				return "", nil, &QueryError{Op: "rewrite", err: err}
			}
			return s, a, nil
		}
	}
	return sql, args, nil
}
