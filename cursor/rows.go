package cursor

import (
	"context"
	"errors"
	"iter"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// Rows runs sql (with args, which may start with a pgx.QueryRewriter such
// as pgx.NamedArgs) on db when the returned sequence is ranged, and yields
// each row mapped by mapper (pgx.RowToMap, pgx.RowToStructByName[T], ...).
// Values are decoded by pgx with the connection's type map.
//
// Nothing happens until the sequence is ranged. An error (invalid query,
// mapping error, server error mid-stream, runaway guard, cancelled context)
// is yielded once, after cleanup, and ends the sequence. The sequence is
// single-use: ranging it again yields an error. Options.BatchSize
// and UnknownAsText do not apply.
func Rows[T any](ctx context.Context, db DB, sql string, args []any, mapper pgx.RowToFunc[T], opts *Options) iter.Seq2[T, error] {
	var used atomic.Bool
	return func(yield func(T, error) bool) {
		var zero T
		if !used.CompareAndSwap(false, true) {
			yield(zero, errAlreadyConsumed)
			return
		}
		o, err := opts.resolve()
		if err != nil {
			yield(zero, err)
			return
		}
		r := &run{o: o, db: db, sql: sql, args: args}
		finished := false
		defer func() {
			if !finished {
				_ = r.close(ctx, errors.New("cursor: consumer panicked"), true)
			}
		}()
		fail := func(err error) {
			finished = true
			_ = r.close(ctx, err, false)
			yield(zero, err)
		}
		if err := r.open(ctx); err != nil {
			fail(err)
			return
		}
		for r.rows.Next() {
			if err := r.limitRows(); err != nil {
				fail(err)
				return
			}
			if r.n&1023 == 0 {
				if err := r.checkDuration(); err != nil {
					fail(err)
					return
				}
			}
			v, err := mapper(r.rows)
			if err != nil {
				fail(&QueryError{Op: "map", err: err})
				return
			}
			if !yield(v, nil) {
				finished = true
				_ = r.close(ctx, nil, true)
				return
			}
		}
		if err := r.rows.Err(); err != nil {
			fail(wrapErr("stream", err, r.qctx))
			return
		}
		r.done = true
		finished = true
		if err := r.close(ctx, nil, false); err != nil {
			yield(zero, err)
		}
	}
}
