package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lakewrite/lakewrite/internal/vocab"
)

// errRollback makes pgx.BeginFunc roll back a transaction that succeeded.
var errRollback = errors.New("ledger: rollback")

// CommitTx is Commit inside the caller's transaction, so the ledger commits
// with the caller's own writes (the Postgres path writes the row store and
// commits the intent in one transaction). Nothing is committed until the
// caller commits tx. WithTx wraps the whole sequence.
//
// The write and the ledger commit being one transaction, the attempt fence
// alone protects it: CommitTx does not need (nor check) the writer's hold.
// Once its update of the intent row is done (committed or, on a veto,
// aborted inside tx), CommitTx releases the hold: from then on tx itself
// holds the intent, since the row stays locked by tx until tx ends, so no
// reconciler can claim it meanwhile (a claim waits for tx, then finds the
// intent committed and leaves it). Should tx roll back, the intent is open
// again with no writer holding it: the writer may Abort it (the usual
// path), and otherwise the next Open with a Lookup, Sweep or Recover
// reconciles it at once, which is right since its write rolled back with
// tx. A CommitTx that fails before its update keeps the hold (call Abort).
//
// On a veto, CommitTx rolls back its own changes (a savepoint), marks the
// intent aborted inside tx and returns the veto (matching ErrVetoed):
// commit tx to keep the abort, or roll it back and call Abort.
func (l *Ledger) CommitTx(ctx context.Context, tx pgx.Tx, in *Intent, o Outcome) error {
	if err := in.validate(); err != nil {
		return err
	}
	if err := o.validate(in.WriteMode); err != nil {
		return err
	}
	if len(l.cfg.Expectations) == 0 && in.WriteMode != Maintenance {
		_, err := l.commitFast(ctx, tx, in, o, nil)
		return err
	}
	return l.commitTxSlow(ctx, tx, in, o)
}

// commitFast is the ledger commit without expectations, in tx (on the held
// session ht when not nil: see commitTxFast), for an outcome already
// validated except for a zero CommittedAt (the database clock sets it); the
// intent is then committed and no longer held by this writer.
func (l *Ledger) commitFast(ctx context.Context, tx pgx.Tx, in *Intent, o Outcome, ht *heldTx) (time.Time, error) {
	if o.CommittedAt.IsZero() {
		probe := o
		probe.CommittedAt = time.Unix(0, 0) // validated as set: the clock sets it
		if err := probe.validate(in.WriteMode); err != nil {
			return time.Time{}, err
		}
	}
	at, err := l.commitTxFast(ctx, tx, in, o, ht)
	if err != nil {
		return time.Time{}, l.wrap("commit", in.ID, err)
	}
	in.mark(false, true)
	in.Release()
	return at, nil
}

// CommitTxNow is CommitTx with the database clock as the commit time: the
// outcome's CommittedAt must be zero, and the write's commit time (the
// intent's committed_at and the dataset's source watermark) is
// clock_timestamp() at the commit, which CommitTxNow returns. Without
// expectations it costs no more round trips than CommitTx; with some it
// reads the clock first, since they see the outcome with its commit time.
func (l *Ledger) CommitTxNow(ctx context.Context, tx pgx.Tx, in *Intent, o Outcome) (time.Time, error) {
	if err := in.validate(); err != nil {
		return time.Time{}, err
	}
	if !o.CommittedAt.IsZero() {
		return time.Time{}, invalid("CommitTxNow: the outcome's commit time must be zero (the database clock sets it)")
	}
	if len(l.cfg.Expectations) == 0 && in.WriteMode != Maintenance {
		return l.commitFast(ctx, tx, in, o, nil)
	}
	if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&o.CommittedAt); err != nil {
		return time.Time{}, l.wrap("commit", in.ID, err)
	}
	if err := o.validate(in.WriteMode); err != nil {
		return time.Time{}, err
	}
	if err := l.commitTxSlow(ctx, tx, in, o); err != nil {
		return time.Time{}, err
	}
	return o.CommittedAt, nil
}

// CommitTxEnd is CommitTx (or CommitTxNow, when o.CommittedAt is zero)
// followed by the commit of tx, and returns the commit time. When tx was
// begun with in.BeginTx and no expectation is configured, the ledger
// commit and tx's COMMIT go in one round trip (the COMMIT runs only when
// the ledger commit was made); otherwise tx.Commit follows.
//
// When the ledger commit fails, tx is left open as CommitTx leaves it (roll
// it back). When the COMMIT fails, tx has ended: it rolled back, unless
// the error came with the connection's loss after the COMMIT was sent, in
// which case the outcome is unknown (ask the ledger: the intent is then
// committed or still open). Either way the caller's Rollback of tx is
// harmless.
func (l *Ledger) CommitTxEnd(ctx context.Context, tx pgx.Tx, in *Intent, o Outcome) (time.Time, error) {
	if err := in.validate(); err != nil {
		return time.Time{}, err
	}
	ht, held := tx.(*heldTx)
	if !held || ht.st != in.st || len(l.cfg.Expectations) > 0 || in.WriteMode == Maintenance {
		at := o.CommittedAt
		var err error
		if at.IsZero() {
			at, err = l.CommitTxNow(ctx, tx, in, o)
		} else {
			err = l.CommitTx(ctx, tx, in, o)
		}
		if err != nil {
			return time.Time{}, err
		}
		if err := tx.Commit(ctx); err != nil {
			return time.Time{}, fmt.Errorf("ledger: commit intent %s: commit: %w", in.ID, err)
		}
		return at, nil
	}
	if !o.CommittedAt.IsZero() {
		if err := o.validate(in.WriteMode); err != nil {
			return time.Time{}, err
		}
	}
	return l.commitFast(ctx, tx, in, o, ht)
}

// commitTxSlow is CommitTx with expectations (or for a maintenance
// intent): commitTx in a savepoint, a veto recorded as an abort.
func (l *Ledger) commitTxSlow(ctx context.Context, tx pgx.Tx, in *Intent, o Outcome) error {
	var veto *vetoError
	err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error { return l.commitTx(ctx, sp, in, o) })
	if errors.As(err, &veto) {
		if aerr := l.abortTx(ctx, tx, in, veto); aerr != nil {
			return errors.Join(err, aerr)
		}
		in.Release()
		return err
	}
	if err != nil {
		return l.wrap("commit", in.ID, err)
	}
	in.mark(false, true)
	in.Release()
	return nil
}

// nullable returns the outcome's snapshot id and commit time as query
// arguments: NULL when unset.
func (o Outcome) nullable() (snap *int64, at any) {
	if o.SnapshotID != 0 {
		snap = &o.SnapshotID
	}
	if !o.CommittedAt.IsZero() {
		at = o.CommittedAt
	}
	return snap, at
}

func (l *Ledger) commitTx(ctx context.Context, tx pgx.Tx, in *Intent, o Outcome) error {
	snap, at := o.nullable()
	var mode vocab.WriteMode
	var sink vocab.Sink
	var committedAt time.Time
	err := tx.QueryRow(ctx, `UPDATE `+l.table("pipeline_build_transactions")+`
		SET status = 'committed', row_count = $3, snapshot_id = $4, committed_at = coalesce($5::pg_catalog.timestamptz, now()),
		    ended_at = now(), error = NULL
		WHERE id = $1 AND status = 'open' AND attempt = $2
		RETURNING write_mode, sink, committed_at`, in.ID, in.attempt, o.RowCount, snap, at).Scan(&mode, &sink, &committedAt)
	if err == pgx.ErrNoRows {
		return l.stateError(ctx, tx, in)
	}
	if err != nil {
		return err
	}
	if (mode == Maintenance) != (in.WriteMode == Maintenance) {
		return invalid("intent %s is a %s intent, not %s", in.ID, mode, in.WriteMode)
	}
	if mode == Maintenance {
		tag, err := tx.Exec(ctx, `UPDATE `+l.table("datasets")+`
			SET maintained_at = $2, maintenance = coalesce($3::pg_catalog.jsonb, maintenance) WHERE id = $1`,
			in.DatasetID, committedAt, nullJSON(o.Report))
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("%w: %q", ErrDatasetNotFound, in.DatasetID)
		}
		return nil
	}
	c := Commit{Intent: *in, Outcome: o}
	c.Intent.st = nil
	for _, exp := range l.cfg.Expectations {
		if verr := exp(ctx, tx, c); verr != nil {
			return &vetoError{id: in.ID, reason: verr}
		}
	}
	tag, err := tx.Exec(ctx, `UPDATE `+l.table("datasets")+`
		SET row_count = CASE WHEN $2 = 'append' THEN row_count + $3 ELSE $3 END,
		    source_watermark = $4, status = 'active', schema = coalesce($5::pg_catalog.jsonb, schema), sink = $6, updated_at = now()
		WHERE id = $1`, in.DatasetID, mode, o.RowCount, o.CommittedAt, nullJSON(o.Schema), sink)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%w: %q", ErrDatasetNotFound, in.DatasetID)
	}
	return nil
}

// commitTxFast is commitTx for a write intent when no expectation is
// configured: the same two updates as one statement, in a savepoint, sent
// with the savepoint and its release in one round trip. As with commitTx,
// a failing statement rolls back to the savepoint (tx stays usable), and
// an intent that is not open (or was claimed, or is a maintenance intent)
// changes nothing. A zero o.CommittedAt stamps clock_timestamp(); the
// commit time stamped is returned.
func (l *Ledger) commitTxFast(ctx context.Context, tx pgx.Tx, in *Intent, o Outcome, end *heldTx) (time.Time, error) {
	snap, at := o.nullable()
	// On the intent's own held session (BeginTx), the hold is given up in
	// the same statement, once both updates are done.
	var unlockKey *int64
	if key, ok := in.unlockInTx(tx); ok {
		unlockKey = &key
	}
	// Ending tx too (CommitTxEnd), the COMMIT follows in the same round
	// trip: the statement then fails unless both updates were made, so
	// that the COMMIT never runs after a refused ledger commit (a failed
	// statement stops the rest of the batch).
	guard := ""
	if end != nil {
		guard = `,
		(CASE WHEN (SELECT count(*) FROM d) = 1 THEN 'true' ELSE '` + refusedMarker + ` ' || (SELECT count(*) FROM i) END)::pg_catalog.bool`
	}
	const sp = "lw_ledger_commit"
	b := &pgx.Batch{}
	b.Queue(`SAVEPOINT ` + sp)
	b.Queue(`WITH ts AS MATERIALIZED (SELECT coalesce($5::pg_catalog.timestamptz, clock_timestamp()) AS at,
		$3::pg_catalog.int8 AS n),
	i AS (UPDATE `+l.table("pipeline_build_transactions")+`
		SET status = 'committed', row_count = (SELECT n FROM ts), snapshot_id = $4, committed_at = (SELECT at FROM ts),
		    ended_at = now(), error = NULL
		WHERE id = $1 AND status = 'open' AND attempt = $2 AND write_mode <> 'maintenance'
		RETURNING write_mode, sink),
	d AS (UPDATE `+l.table("datasets")+` ds
		SET row_count = CASE WHEN i.write_mode = 'append' THEN ds.row_count ELSE 0 END + (SELECT n FROM ts),
		    source_watermark = (SELECT at FROM ts), status = 'active', schema = coalesce($7::pg_catalog.jsonb, ds.schema), sink = i.sink, updated_at = now()
		FROM i WHERE ds.id = $6
		RETURNING 1)
	SELECT (SELECT count(*) FROM i), (SELECT count(*) FROM d), (SELECT at FROM ts),
		CASE WHEN $8::pg_catalog.int8 IS NOT NULL AND (SELECT count(*) FROM d) = 1 THEN pg_advisory_unlock($8) END`+guard,
		in.ID, in.attempt, o.RowCount, snap, at, in.DatasetID, nullJSON(o.Schema), unlockKey)
	b.Queue(`RELEASE SAVEPOINT ` + sp)
	if end != nil {
		b.Queue(`COMMIT`)
	}
	br := tx.SendBatch(ctx, b)
	var intents, datasets int64
	var stamped time.Time
	var unlocked *bool
	var ok bool
	dest := []any{&intents, &datasets, &stamped, &unlocked}
	if end != nil {
		dest = append(dest, &ok)
	}
	_, err := br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(dest...)
	}
	if unlocked != nil && *unlocked {
		in.markUnlocked()
	}
	if err == nil {
		_, err = br.Exec()
	}
	var committed, sent bool
	if err == nil && end != nil {
		var tag pgconn.CommandTag
		tag, err = br.Exec()
		sent = true
		committed = err == nil && tag.String() == "COMMIT"
		if err == nil && !committed {
			err = pgx.ErrTxCommitRollback
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if sent {
		// The COMMIT ran: tx ended, whichever way it went.
		end.finish()
		if err != nil {
			return time.Time{}, fmt.Errorf("commit: %w", err)
		}
		return stamped, nil
	}
	var pgErr *pgconn.PgError
	refused := errors.As(err, &pgErr) && strings.Contains(pgErr.Message, refusedMarker)
	if err != nil {
		if _, rerr := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT `+sp); rerr == nil {
			_, rerr = tx.Exec(ctx, `RELEASE SAVEPOINT `+sp)
			if !refused {
				err = errors.Join(err, rerr)
			} else {
				err = rerr
			}
		} else if refused {
			err = rerr
		}
		if !refused || err != nil {
			return time.Time{}, err
		}
		// Refused: explain it as below (the counts died with the statement).
		var open bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+l.table("pipeline_build_transactions")+`
			WHERE id = $1 AND status = 'open' AND attempt = $2 AND write_mode <> 'maintenance')`, in.ID, in.attempt).Scan(&open); err != nil {
			return time.Time{}, err
		}
		intents, datasets = 0, 0
		if open {
			intents = 1
		}
	}
	switch {
	case intents == 0:
		var mode vocab.WriteMode
		if err := tx.QueryRow(ctx, `SELECT write_mode FROM `+l.table("pipeline_build_transactions")+`
			WHERE id = $1 AND status = 'open' AND attempt = $2`, in.ID, in.attempt).Scan(&mode); err == nil && mode == Maintenance {
			return time.Time{}, invalid("intent %s is a %s intent, not %s", in.ID, mode, in.WriteMode)
		}
		return time.Time{}, l.stateError(ctx, tx, in)
	case datasets != 1:
		// Cannot happen: the intent's row references its dataset's.
		return time.Time{}, fmt.Errorf("%w: %q", ErrDatasetNotFound, in.DatasetID)
	}
	return stamped, nil
}

// refusedMarker is in the error of a ledger commit statement that ends its
// transaction and found the intent not open (see commitTxFast).
const refusedMarker = "lakewrite: ledger commit refused"

func nullJSON(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}
