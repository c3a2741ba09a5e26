package ledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const (
	pgUniqueViolation     = "23505"
	pgForeignKeyViolation = "23503"
	pgLockNotAvailable    = "55P03"
	openIndexName         = "pipeline_build_transactions_one_open"
)

// Open records a new open intent for p.DatasetID in a short transaction and
// returns it. While another intent of the same dataset is open, Open waits
// with jittered exponential backoff until that one ends, and returns a
// *BusyError (errors.Is(err, ErrBusy)) once Config.WaitTimeout or ctx runs
// out. Intents of different datasets never wait on each other.
//
// Open does not recover stale intents left by a dead process; call Recover
// first for that.
func (l *Ledger) Open(ctx context.Context, p OpenParams) (*Intent, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	id := p.ID
	if id == "" {
		id = NewID()
	}
	start := time.Now()
	deadline := start.Add(l.cfg.WaitTimeout)
	backoff := l.cfg.MinBackoff
	for {
		in, holder, err := l.tryOpen(ctx, id, p)
		if err == nil {
			l.log.InfoContext(ctx, "lakewrite intent opened", "txn_id", in.ID, "dataset_id", in.DatasetID,
				"writer_id", in.WriterID, "sink", in.Sink, "write_mode", in.WriteMode)
			return in, nil
		}
		if !errors.Is(err, ErrBusy) {
			return nil, err
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		busy := &BusyError{DatasetID: p.DatasetID, HolderID: holder}
		if time.Now().Add(wait).After(deadline) {
			busy.Waited = time.Since(start).Round(time.Millisecond).String()
			return nil, busy
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			busy.Waited = time.Since(start).Round(time.Millisecond).String()
			busy.Cause = ctx.Err()
			return nil, busy
		case <-t.C:
		}
		backoff = min(backoff*2, l.cfg.MaxBackoff)
	}
}

// tryOpen makes one attempt. It returns ErrBusy (and the holder's id, when
// known) when another intent of the dataset is open.
func (l *Ledger) tryOpen(ctx context.Context, id string, p OpenParams) (*Intent, string, error) {
	in := &Intent{ID: id, DatasetID: p.DatasetID, WriterID: p.WriterID, Sink: p.Sink, WriteMode: p.WriteMode}
	err := pgx.BeginFunc(ctx, l.db, func(tx pgx.Tx) error {
		if err := l.setLockTimeout(ctx, tx); err != nil {
			return err
		}
		// Only the owner (or anyone, for an unowned dataset) gets a row.
		err := tx.QueryRow(ctx, `INSERT INTO `+l.table("pipeline_build_transactions")+`
			(id, dataset_id, writer_id, sink, write_mode)
			SELECT $1, $2, $3, $4, $5 FROM `+l.table("datasets")+` d
			WHERE d.id = $2 AND (d.owner IS NULL OR d.owner = $3)
			RETURNING attempt, created_at`, id, p.DatasetID, p.WriterID, p.Sink, p.WriteMode).
			Scan(&in.Attempt, &in.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			var owner *string
			switch oerr := tx.QueryRow(ctx, `SELECT owner FROM `+l.table("datasets")+` WHERE id = $1`, p.DatasetID).Scan(&owner); {
			case errors.Is(oerr, pgx.ErrNoRows):
				return fmt.Errorf("%w: %q", ErrDatasetNotFound, p.DatasetID)
			case oerr != nil:
				return oerr
			case owner != nil && *owner != p.WriterID:
				return &OwnerError{DatasetID: p.DatasetID, Owner: *owner, WriterID: p.WriterID}
			}
		}
		return err
	})
	var owned *OwnerError
	if errors.As(err, &owned) || errors.Is(err, ErrDatasetNotFound) {
		return nil, "", err
	}
	if err == nil {
		return in, "", nil
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = ctxErr // the caller's context ended (not a busy dataset)
		}
		return nil, "", fmt.Errorf("ledger: open intent for dataset %q: %w", p.DatasetID, err)
	}
	switch {
	case pgErr.Code == pgForeignKeyViolation:
		return nil, "", fmt.Errorf("%w: %q", ErrDatasetNotFound, p.DatasetID)
	case pgErr.Code == pgLockNotAvailable:
		return nil, "", ErrBusy
	case pgErr.Code == pgUniqueViolation && pgErr.ConstraintName == openIndexName:
		var holder string
		_ = l.db.QueryRow(ctx, `SELECT id::text FROM `+l.table("pipeline_build_transactions")+`
			WHERE dataset_id = $1 AND status = 'open'`, p.DatasetID).Scan(&holder)
		if holder == id {
			return l.reopen(ctx, id, p)
		}
		return nil, holder, ErrBusy
	case pgErr.Code == pgUniqueViolation:
		return l.reopen(ctx, id, p)
	}
	return nil, "", fmt.Errorf("ledger: open intent for dataset %q: %w", p.DatasetID, err)
}

// reopen handles a pre-minted id that already exists: the same open intent
// is returned as is; anything else is ErrIDInUse.
func (l *Ledger) reopen(ctx context.Context, id string, p OpenParams) (*Intent, string, error) {
	t, err := l.Get(ctx, id)
	if err != nil {
		return nil, "", err
	}
	if t.Status == StatusOpen && t.DatasetID == p.DatasetID && t.WriterID == p.WriterID &&
		t.Sink == p.Sink && t.WriteMode == p.WriteMode {
		return t.Intent(), "", nil
	}
	return nil, "", fmt.Errorf("%w: %s is a %s intent of dataset %q", ErrIDInUse, id, t.Status, t.DatasetID)
}

// Commit marks the intent committed with its outcome, in one short
// transaction: status committed, row_count and snapshot id from the outcome,
// committed_at = o.CommittedAt; the dataset's source_watermark set to that
// same time, its row_count (set for a replace, increased for an append),
// status 'active' and, when given, schema. Config.Expectations run first and
// can veto (the intent is then aborted and a *VetoError returned).
//
// The update is conditional on the intent being open with the same attempt:
// an intent that is not open any more, or was claimed by a sweeper, cannot
// commit (*StateError matching ErrNotOpen or ErrFenced).
func (l *Ledger) Commit(ctx context.Context, in *Intent, o Outcome) error {
	if err := in.validate(); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	var veto *VetoError
	err := pgx.BeginFunc(ctx, l.db, func(tx pgx.Tx) error {
		if err := l.setLockTimeout(ctx, tx); err != nil {
			return err
		}
		return l.commitTx(ctx, tx, in, o)
	})
	if errors.As(err, &veto) {
		// The commit transaction rolled back; record the veto.
		if aerr := l.Abort(context.WithoutCancel(ctx), in, veto); aerr != nil {
			return errors.Join(err, aerr)
		}
		return err
	}
	if err != nil {
		return l.wrap("commit", in.ID, err)
	}
	l.log.InfoContext(ctx, "lakewrite intent committed", "txn_id", in.ID, "dataset_id", in.DatasetID,
		"row_count", o.RowCount, "snapshot_id", o.SnapshotID, "committed_at", o.CommittedAt)
	return nil
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
// Check returns a *VetoError (matching ErrVetoed) on a veto, a *StateError
// when the intent cannot commit, and nil without a round trip when no
// expectation is configured.
func (l *Ledger) Check(ctx context.Context, in *Intent, o Outcome) error {
	if err := in.validate(); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	if len(l.cfg.Expectations) == 0 {
		return nil
	}
	err := pgx.BeginFunc(ctx, l.db, func(tx pgx.Tx) error {
		if err := l.setLockTimeout(ctx, tx); err != nil {
			return err
		}
		if err := l.commitTx(ctx, tx, in, o); err != nil {
			return err
		}
		return errRollback
	})
	if err == nil || errors.Is(err, errRollback) {
		return nil
	}
	return l.wrap("check", in.ID, err)
}

// errRollback makes pgx.BeginFunc roll back a transaction that succeeded.
var errRollback = errors.New("ledger: rollback")

// CommitTx is Commit inside the caller's transaction, so the ledger commits
// with the caller's own writes (the Postgres path writes the row store and
// commits the intent in one transaction). Nothing is committed until the
// caller commits tx.
//
// On a veto, CommitTx rolls back its own changes (a savepoint), marks the
// intent aborted inside tx and returns the *VetoError: commit tx to keep the
// abort, or roll it back and call Abort.
func (l *Ledger) CommitTx(ctx context.Context, tx pgx.Tx, in *Intent, o Outcome) error {
	if err := in.validate(); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	var veto *VetoError
	err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error { return l.commitTx(ctx, sp, in, o) })
	if errors.As(err, &veto) {
		if aerr := l.abortTx(ctx, tx, in, veto); aerr != nil {
			return errors.Join(err, aerr)
		}
		return err
	}
	if err != nil {
		return l.wrap("commit", in.ID, err)
	}
	return nil
}

func (l *Ledger) commitTx(ctx context.Context, tx pgx.Tx, in *Intent, o Outcome) error {
	var snap *int64
	if o.SnapshotID != 0 {
		snap = &o.SnapshotID
	}
	var mode, sink string
	err := tx.QueryRow(ctx, `UPDATE `+l.table("pipeline_build_transactions")+`
		SET status = 'committed', row_count = $3, snapshot_id = $4, committed_at = $5, ended_at = now(), error = NULL
		WHERE id = $1 AND status = 'open' AND attempt = $2
		RETURNING write_mode, sink`, in.ID, in.Attempt, o.RowCount, snap, o.CommittedAt).Scan(&mode, &sink)
	if err == pgx.ErrNoRows {
		return l.stateError(ctx, tx, in)
	}
	if err != nil {
		return err
	}
	c := Commit{Intent: *in, Outcome: o}
	for _, exp := range l.cfg.Expectations {
		if verr := exp(ctx, tx, c); verr != nil {
			return &VetoError{ID: in.ID, Reason: verr}
		}
	}
	tag, err := tx.Exec(ctx, `UPDATE `+l.table("datasets")+`
		SET row_count = CASE WHEN $2 = 'append' THEN row_count + $3 ELSE $3 END,
		    source_watermark = $4, status = 'active', schema = coalesce($5::jsonb, schema), sink = $6, updated_at = now()
		WHERE id = $1`, in.DatasetID, mode, o.RowCount, o.CommittedAt, nullJSON(o.Schema), sink)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%w: %q", ErrDatasetNotFound, in.DatasetID)
	}
	return nil
}

func nullJSON(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
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
		return &StateError{ID: in.ID, kind: ErrIntentNotFound}
	case err != nil:
		return err
	case status != string(StatusOpen):
		return &StateError{ID: in.ID, Status: status, Attempt: attempt, kind: ErrNotOpen}
	default:
		return &StateError{ID: in.ID, Status: status, Attempt: attempt, kind: ErrFenced}
	}
}

// Abort marks the open intent aborted with cause as its error text. The
// dataset is left unchanged. Aborting an intent that is not open (or was
// claimed by a sweeper) returns a *StateError.
func (l *Ledger) Abort(ctx context.Context, in *Intent, cause error) error {
	if err := in.validate(); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, l.db, func(tx pgx.Tx) error {
		if err := l.setLockTimeout(ctx, tx); err != nil {
			return err
		}
		return l.abortTx(ctx, tx, in, cause)
	})
	if err != nil {
		return l.wrap("abort", in.ID, err)
	}
	l.log.InfoContext(ctx, "lakewrite intent aborted", "txn_id", in.ID, "dataset_id", in.DatasetID, "cause", causeText(cause))
	return nil
}

func (l *Ledger) abortTx(ctx context.Context, tx pgx.Tx, in *Intent, cause error) error {
	tag, err := tx.Exec(ctx, `UPDATE `+l.table("pipeline_build_transactions")+`
		SET status = 'aborted', error = $3, ended_at = now()
		WHERE id = $1 AND status = 'open' AND attempt = $2`, in.ID, in.Attempt, causeText(cause))
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return l.stateError(ctx, tx, in)
	}
	return nil
}

func causeText(cause error) string {
	if cause == nil {
		return "aborted"
	}
	return cause.Error()
}

func (l *Ledger) wrap(op, id string, err error) error {
	var se *StateError
	var ve *VetoError
	if errors.As(err, &se) || errors.As(err, &ve) || errors.Is(err, ErrInvalid) || errors.Is(err, ErrDatasetNotFound) {
		return err
	}
	return fmt.Errorf("ledger: %s intent %s: %w", op, id, err)
}

// With opens an intent, runs fn, and commits fn's outcome; if fn returns an
// error or panics, the intent is aborted (and the panic re-raised after the
// abort). It is the ledger's pgx.BeginFunc.
//
// When fn's error says the write's outcome is unknown (it matches
// ErrOutcomeUnknown, or has an OutcomeUnknown() bool method reporting true),
// the intent is left open for Sweep or Recover to reconcile, never aborted.
func (l *Ledger) With(ctx context.Context, p OpenParams, fn func(ctx context.Context, in *Intent) (Outcome, error)) (out Outcome, err error) {
	in, err := l.Open(ctx, p)
	if err != nil {
		return Outcome{}, err
	}
	cleanupCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			_ = l.Abort(cleanupCtx, in, fmt.Errorf("panic: %v", r))
			panic(r)
		}
	}()
	out, err = fn(ctx, in)
	if err != nil {
		if outcomeUnknown(err) {
			return Outcome{}, err
		}
		if aerr := l.Abort(cleanupCtx, in, err); aerr != nil {
			return Outcome{}, errors.Join(err, aerr)
		}
		return Outcome{}, err
	}
	if err := l.Commit(ctx, in, out); err != nil {
		return Outcome{}, err
	}
	return out, nil
}
