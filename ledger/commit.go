package ledger

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// Commit marks the intent committed with its outcome, in one short
// transaction: status committed, row_count and snapshot id from the outcome,
// committed_at = o.CommittedAt; the dataset's source_watermark set to that
// same time, its row_count (set for a replace, increased for an append),
// status 'active', sink and, when given, schema. Config.Expectations run
// first and can veto (the intent is then aborted and an error matching
// ErrVetoed, which unwraps to the expectation's error, returned).
//
// A maintenance intent commits differently: committed_at = o.CommittedAt
// (now() when zero), and only the dataset's maintained_at (and maintenance
// report, from o.Report) is stamped; its watermark, row count, status,
// schema and sink stay as they are, and expectations do not run.
//
// The update is conditional on the intent being open with the same attempt:
// an intent that is not open any more, or was claimed by a sweeper, cannot
// commit (an error matching ErrNotOpen or ErrFenced). An intent opened
// with liveness commits on its held session, so only the writer that still
// holds it can commit it: when the hold is gone (the session broke, or
// Release ran) Commit returns an error matching ErrLostHold, and the
// intent, still open, is left to reconciliation (the next Open with a
// Lookup, Sweep or Recover). Should the session break during the commit
// itself, Commit asks the ledger again and reports nil when the commit
// went through.
//
// Whatever the result, when Commit returns the intent is no longer held by
// this writer (see Release).
func (l *Ledger) Commit(ctx context.Context, in *Intent, o Outcome) error {
	if err := in.validate(); err != nil {
		return err
	}
	defer in.Release()
	if err := o.validate(in.WriteMode); err != nil {
		return err
	}
	var veto *vetoError
	var broke *holdBroke
	err := l.use(in, func(db DB) error {
		return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if err := l.setLockTimeout(ctx, tx); err != nil {
				return err
			}
			return l.commitTx(ctx, tx, in, o)
		})
	})
	switch {
	case errors.Is(err, errSessionInTx):
		return invalid("commit intent %s: its session runs a transaction (Intent.BeginTx): commit it there with CommitTx", in.ID)
	case errors.Is(err, errHoldGone):
		return l.lostHold(ctx, in, nil, false)
	case errors.As(err, &broke):
		return l.lostHold(ctx, in, broke.err, true)
	case errors.As(err, &veto):
		// The commit transaction rolled back; record the veto.
		cctx, cancel := l.cleanupContext(ctx)
		defer cancel()
		if aerr := l.Abort(cctx, in, veto); aerr != nil {
			return errors.Join(err, aerr)
		}
		return err
	case err != nil:
		return l.wrap("commit", in.ID, err)
	}
	in.mark(true, false)
	l.log.InfoContext(ctx, "lakewrite intent committed", "txn_id", in.ID, "dataset_id", in.DatasetID, "write_mode", in.WriteMode,
		"row_count", o.RowCount, "snapshot_id", o.SnapshotID, "committed_at", o.CommittedAt)
	return nil
}

func (l *Ledger) cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), l.cfg.cleanupTimeout)
}

// lostHold explains a commit that could not run on the writer's hold: the
// intent's state when it is not open with the writer's attempt any more (or
// nil when the session broke during this very commit and the commit went
// through), ErrLostHold otherwise.
func (l *Ledger) lostHold(ctx context.Context, in *Intent, cause error, during bool) error {
	if cause == nil {
		in.st.mu.Lock()
		cause = in.st.gone(in.ID)
		in.st.mu.Unlock()
		var se *stateError
		if errors.As(cause, &se) {
			cause = se.cause
		}
	}
	cctx, cancel := l.cleanupContext(ctx)
	defer cancel()
	var status string
	var attempt int64
	err := l.db.QueryRow(cctx, `SELECT status, attempt FROM `+l.table("pipeline_build_transactions")+` WHERE id = $1`, in.ID).
		Scan(&status, &attempt)
	switch {
	case err == nil && during && status == string(StatusCommitted) && attempt == in.attempt:
		in.mark(true, false)
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return &stateError{id: in.ID, kind: ErrIntentNotFound}
	case err == nil && status != string(StatusOpen):
		return &stateError{id: in.ID, status: status, attempt: attempt, kind: ErrNotOpen}
	case err == nil && attempt != in.attempt:
		return &stateError{id: in.ID, status: status, attempt: attempt, kind: ErrFenced}
	case err != nil:
		cause = errors.Join(cause, err)
	}
	return &stateError{id: in.ID, status: status, attempt: attempt, cause: cause, kind: ErrLostHold}
}

// Check runs Config.Expectations against the outcome o would commit, and
// commits nothing: the same statements as Commit, in a transaction that is
// always rolled back. The intent stays open whatever the answer.
//
// A writer whose commit makes data visible outside Postgres calls Check
// before that commit, so that a veto leaves nothing visible (the Iceberg
// arm of writestrategy checks the staged outcome before the snapshot
// commit: o.SnapshotID is then 0 and o.CommittedAt the write's stamp
// time). Commit runs the expectations again with the final outcome.
//
// Check returns an error matching ErrVetoed on a veto, one matching
// ErrNotOpen, ErrFenced or ErrIntentNotFound when the intent cannot
// commit, and nil without a round trip when no expectation is configured
// or the intent is a maintenance one. It runs on the ledger's DB, not on
// the held session, and does not release the hold.
func (l *Ledger) Check(ctx context.Context, in *Intent, o Outcome) error {
	if err := in.validate(); err != nil {
		return err
	}
	if err := o.validate(in.WriteMode); err != nil {
		return err
	}
	if len(l.cfg.Expectations) == 0 || in.WriteMode == Maintenance {
		return nil
	}
	check := func(db DB) error {
		return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if err := l.setLockTimeout(ctx, tx); err != nil {
				return err
			}
			if err := l.commitTx(ctx, tx, in, o); err != nil {
				return err
			}
			return errRollback
		})
	}
	// On the writer's held connection when it has one: a writer holding
	// its intents never waits for another pool connection to ask.
	err := l.use(in, check)
	if errors.Is(err, errHoldGone) || errors.Is(err, errSessionInTx) {
		err = check(l.db)
	}
	if err == nil || errors.Is(err, errRollback) {
		return nil
	}
	return l.wrap("check", in.ID, err)
}

// stateError explains why a conditional update matched no row.
func (l *Ledger) stateError(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, in *Intent) error {
	var status string
	var attempt int64
	err := q.QueryRow(ctx, `SELECT status, attempt FROM `+l.table("pipeline_build_transactions")+` WHERE id = $1`, in.ID).
		Scan(&status, &attempt)
	switch {
	case err == pgx.ErrNoRows:
		return &stateError{id: in.ID, kind: ErrIntentNotFound}
	case err != nil:
		return err
	case status != string(StatusOpen):
		return &stateError{id: in.ID, status: status, attempt: attempt, kind: ErrNotOpen}
	default:
		return &stateError{id: in.ID, status: status, attempt: attempt, kind: ErrFenced}
	}
}
