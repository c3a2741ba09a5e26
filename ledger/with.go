package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// With opens an intent, runs fn, and commits fn's outcome; if fn returns an
// error or panics, the intent is aborted (and the panic re-raised after the
// abort). It is the ledger's pgx.BeginFunc. The abort runs under a fresh
// context (context.WithoutCancel of ctx, bounded to 30s) made when fn has
// returned, so a late failure or a cancelled ctx still
// aborts. With releases the hold in every case, and renews the intent's
// lease (when it has one) while fn runs (KeepAlive).
//
// When fn's error says the write's outcome is unknown (it matches
// ErrOutcomeUnknown, or has an OutcomeUnknown() bool method reporting true),
// the intent is left open, never aborted; since With releases its hold, the
// next Open with a Lookup, Sweep or Recover reconciles it at once.
//
// fn must not commit or abort the intent itself: it returns the outcome and
// With commits it. To commit in a transaction of your own (the Postgres
// row-store path), use WithTx. When fn returns nil after committing or
// aborting the intent through Commit, CommitTx or Abort, With returns an
// error matching ErrInvalid that says so (aborting the intent when it is
// still open, as after a CommitTx whose transaction rolled back).
func (l *Ledger) With(ctx context.Context, p OpenParams, fn func(ctx context.Context, in *Intent) (Outcome, error)) (out Outcome, err error) {
	in, err := l.Open(ctx, p)
	if err != nil {
		return Outcome{}, err
	}
	defer in.Release()
	defer func() {
		if r := recover(); r != nil {
			cctx, cancel := l.cleanupContext(ctx)
			_ = l.Abort(cctx, in, fmt.Errorf("panic: %v", r))
			cancel()
			panic(r)
		}
	}()
	stop := l.KeepAlive(ctx, in)
	defer stop()
	out, err = fn(ctx, in)
	stop()
	if err == nil && in.endedByCaller() {
		return Outcome{}, l.misuse(ctx, in, "With")
	}
	if err != nil {
		if outcomeUnknown(err) {
			return Outcome{}, err
		}
		cctx, cancel := l.cleanupContext(ctx)
		defer cancel()
		if aerr := l.Abort(cctx, in, err); aerr != nil {
			return Outcome{}, errors.Join(err, aerr)
		}
		return Outcome{}, err
	}
	if err := l.Commit(ctx, in, out); err != nil {
		return Outcome{}, err
	}
	return out, nil
}

// misuse reports a function that committed or aborted the intent With or
// WithTx was going to end, aborting the intent if it is still open.
func (l *Ledger) misuse(ctx context.Context, in *Intent, op string) error {
	cctx, cancel := l.cleanupContext(ctx)
	defer cancel()
	e := fmt.Errorf("%w: %s: fn committed or aborted intent %s itself; return the outcome and let %s commit it (use WithTx to commit inside a transaction)",
		ErrInvalid, op, in.ID, op)
	t, err := l.Get(cctx, in.ID)
	switch {
	case err != nil:
		return errors.Join(e, err)
	case t.Status == StatusOpen:
		if aerr := l.Abort(cctx, in, e); aerr != nil {
			return errors.Join(e, aerr)
		}
		return fmt.Errorf("%w (the intent was still open and is now aborted)", e)
	}
	return fmt.Errorf("%w (the intent is %s)", e, t.Status)
}

// WithTx opens an intent, begins a transaction on the ledger's DB, runs fn
// in it, commits the intent inside that same transaction (CommitTx) and
// commits the transaction: the caller's writes and the ledger commit land
// together or not at all. It is the Postgres path's With.
//
// Any failure (fn's error, a veto, a panic, the commit of the transaction)
// rolls the transaction back and aborts the intent (a veto is recorded as
// the abort's reason and returned matching ErrVetoed); a panic is re-raised
// after the abort. When committing the transaction fails, WithTx asks the
// ledger which way it went: the intent committed means the transaction did
// (nil is returned), the intent still open means it did not (it is
// aborted). The clean-up runs under context.WithoutCancel of ctx bounded to
// 30s. WithTx releases the hold in every case, and renews the intent's
// lease (when it has one) while fn runs (KeepAlive).
//
// fn must not commit or abort the intent itself (an error matching
// ErrInvalid). With a pool as the ledger's DB, WithTx uses two connections
// while fn runs: the intent's held session and the transaction's.
func (l *Ledger) WithTx(ctx context.Context, p OpenParams, fn func(ctx context.Context, tx pgx.Tx, in *Intent) (Outcome, error)) (out Outcome, err error) {
	in, err := l.Open(ctx, p)
	if err != nil {
		return Outcome{}, err
	}
	defer in.Release()
	fail := func(cause error, tx pgx.Tx) (Outcome, error) {
		cctx, cancel := l.cleanupContext(ctx)
		defer cancel()
		if tx != nil {
			_ = tx.Rollback(cctx)
		}
		if aerr := l.Abort(cctx, in, cause); aerr != nil {
			return Outcome{}, errors.Join(cause, aerr)
		}
		return Outcome{}, cause
	}
	tx, err := l.db.Begin(ctx)
	if err != nil {
		return fail(fmt.Errorf("ledger: WithTx: begin: %w", err), nil)
	}
	defer func() {
		if r := recover(); r != nil {
			_, _ = fail(fmt.Errorf("panic: %v", r), tx)
			panic(r)
		}
	}()
	stop := l.KeepAlive(ctx, in)
	defer stop()
	out, err = fn(ctx, tx, in)
	stop()
	if err != nil {
		return fail(err, tx)
	}
	if in.endedByCaller() {
		cctx, cancel := l.cleanupContext(ctx)
		_ = tx.Rollback(cctx)
		cancel()
		return Outcome{}, l.misuse(ctx, in, "WithTx")
	}
	if err := l.CommitTx(ctx, tx, in, out); err != nil {
		return fail(err, tx)
	}
	if cerr := tx.Commit(ctx); cerr != nil {
		cerr = fmt.Errorf("ledger: WithTx: commit: %w", cerr)
		cctx, cancel := l.cleanupContext(ctx)
		defer cancel()
		aerr := l.Abort(cctx, in, cerr)
		if aerr == nil {
			return Outcome{}, cerr // it did not commit; now aborted
		}
		if t, gerr := l.Get(cctx, in.ID); gerr == nil && t.Status == StatusCommitted && t.Attempt == in.attempt {
			return out, nil // it committed before the error
		}
		return Outcome{}, errors.Join(fmt.Errorf("%w: %w", ErrOutcomeUnknown, cerr), aerr)
	}
	in.mark(true, false)
	return out, nil
}
