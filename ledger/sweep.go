package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Landing is what a Lookup found out about an intent's write.
type Landing struct {
	// Landed reports that the write is in the target (for Iceberg: a
	// snapshot carrying the transaction id is in the table's history).
	Landed bool
	// Outcome of the landed write (row count, snapshot id, commit time),
	// used to roll the intent forward. Ignored when Landed is false.
	Outcome Outcome
}

// Lookup answers "did the write of this intent land?". Return Landed=false
// with a nil error only when the write is provably absent; return an error
// when it cannot tell (catalog unreachable, ...): the intent is then left
// open and reported, never aborted.
type Lookup func(ctx context.Context, in Intent) (Landing, error)

// SweepParams select what Sweep reconciles.
type SweepParams struct {
	// OlderThan applies to intents without liveness (neither a session
	// lock nor a lease: opened before liveness existed, or through a
	// pgx.Tx): they are swept once opened at least this long ago (database
	// clock), since an intent younger than any writer's run time may
	// belong to a live writer. Intents with liveness are swept as soon as
	// their writer is gone (its session lock released, its lease lapsed),
	// whatever their age, and never while it is alive. Zero: only intents
	// whose writer is gone. Must not be negative.
	OlderThan time.Duration
	// Lookup is required.
	Lookup Lookup

	// datasetID limits the sweep to one dataset (Recover sets it).
	datasetID string
	// limit caps the intents handled in one call. Default 100.
	limit int
}

// Unresolved is an intent Sweep left open, and why.
type Unresolved struct {
	Intent Intent
	Err    error
}

// SweepReport lists what Sweep did.
type SweepReport struct {
	RolledForward []Intent     // write found: committed with the found outcome
	Aborted       []Intent     // write provably absent (or a maintenance run): aborted
	Unresolved    []Unresolved // lookup could not tell, or the commit failed: left open
	Live          []Intent     // open, and their writer still holds them: never swept

	skipped []Intent // changed by someone else, or found alive, while sweeping
}

// Sweep reconciles open intents whose writer is gone; it never aborts
// blindly. An intent is taken when its writer's session lock is no longer
// held or its lease lapsed (whatever its age), or, for an intent without
// liveness, when it is
// older than p.OlderThan; an intent whose writer holds it is reported in
// Live and left alone, whatever its age. Sweep takes the intent's lock
// itself while it works on it, or claims a leased intent only while its
// lease is still lapsed (so two reconcilers never race), claims the
// intent (bumps its attempt, which fences out the original writer), then:
//   - a maintenance intent is aborted (a maintenance run is idempotent:
//     nothing to roll forward), without asking p.Lookup;
//   - landed: the intent is committed with the found outcome (expectations
//     run as for any commit);
//   - provably absent: the intent is aborted;
//   - unknown (lookup error): the intent stays open and is reported; a later
//     sweep asks again.
func (l *Ledger) Sweep(ctx context.Context, p SweepParams) (SweepReport, error) {
	var rep SweepReport
	if p.Lookup == nil {
		return rep, invalid("Sweep: Lookup is nil")
	}
	if p.OlderThan < 0 {
		return rep, invalid("Sweep: OlderThan %s is negative", p.OlderThan)
	}
	if p.limit <= 0 {
		p.limit = 100
	}
	q, args := l.sweepQuery(p)
	rows, err := l.db.Query(ctx, q, args...)
	if err != nil {
		return rep, fmt.Errorf("ledger: sweep: %w", err)
	}
	stale, err := scanStale(rows)
	if err != nil {
		return rep, err
	}
	return l.reconcileStale(ctx, p, stale)
}

// sweepQuery is Sweep's query of the open intents it may take. Of one
// dataset, it is a statement of its own, whose plan the server can keep
// (the dataset's open intent by its index) instead of planning it on
// every run.
func (l *Ledger) sweepQuery(p SweepParams) (string, []any) {
	which := `$2 = ''`
	if p.datasetID != "" {
		which = `dataset_id = $2`
	}
	return `WITH held AS MATERIALIZED (` + heldKeys + `)
		SELECT ` + txnColumns + `, lock_key, lease_until IS NOT NULL,
			coalesce(lock_key IN (SELECT * FROM held), false) OR coalesce(lease_until > clock_timestamp(), false) AS live
		FROM ` + l.table("pipeline_build_transactions") + `
		WHERE status = 'open' AND ` + which + `
		  AND (lock_key IS NOT NULL OR lease_until IS NOT NULL OR ($4 AND created_at <= now() - $1::pg_catalog.interval))
		ORDER BY live, created_at LIMIT $3`, []any{p.OlderThan, p.datasetID, p.limit, p.OlderThan > 0}
}

// scanStale reads the rows of sweepQuery.
func scanStale(rows pgx.Rows) ([]holder, error) {
	var stale []holder
	for rows.Next() {
		var h holder
		t, err := scanTxn(rows, &h.key, &h.leased, &h.live)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("ledger: sweep: %w", err)
		}
		h.txn = t
		stale = append(stale, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: sweep: %w", err)
	}
	return stale, nil
}

// reconcileStale is the rest of Sweep: it reconciles the intents found by
// sweepQuery whose writer is gone.
func (l *Ledger) reconcileStale(ctx context.Context, p SweepParams, stale []holder) (SweepReport, error) {
	var rep SweepReport
	var err error
	var sess *pgx.Conn
	if len(stale) > 0 && !stale[0].live {
		var pooled *pgxpool.Conn
		if sess, pooled, _, err = l.lockSession(ctx); err != nil {
			return rep, fmt.Errorf("ledger: sweep: take a session: %w", err)
		}
		if pooled != nil {
			defer func() { giveBack(pooled, !sess.IsClosed(), l.cfg.cleanupTimeout) }()
		}
	}
	for _, h := range stale {
		if h.live {
			rep.Live = append(rep.Live, *h.txn.intent())
			continue
		}
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		r, err := l.reconcile(ctx, sess, h.txn, h.key, p.Lookup)
		if err != nil {
			return rep, err
		}
		switch r.kind {
		case recSkipped:
			rep.skipped = append(rep.skipped, r.in)
		case recRolledForward:
			rep.RolledForward = append(rep.RolledForward, r.in)
		case recAborted:
			rep.Aborted = append(rep.Aborted, r.in)
		case recUnresolved:
			rep.Unresolved = append(rep.Unresolved, Unresolved{Intent: r.in, Err: r.err})
		}
	}
	if len(rep.RolledForward)+len(rep.Aborted)+len(rep.Unresolved) > 0 {
		l.log.InfoContext(ctx, "lakewrite sweep", "dataset_id", p.datasetID, "rolled_forward", len(rep.RolledForward),
			"aborted", len(rep.Aborted), "unresolved", len(rep.Unresolved), "live", len(rep.Live))
	}
	return rep, nil
}

// Recover is Sweep for one dataset: call it before opening a new intent so
// a write left open by a dead process is rolled forward or aborted instead
// of blocking the dataset. olderThan applies to intents without liveness
// only (see SweepParams.OlderThan); zero reconciles only intents whose
// writer is gone. Open with OpenParams.Lookup does the same for the holder
// it finds, without a separate call.
func (l *Ledger) Recover(ctx context.Context, datasetID string, olderThan time.Duration, lookup Lookup) (SweepReport, error) {
	if datasetID == "" {
		return SweepReport{}, invalid("Recover: dataset id is empty")
	}
	return l.Sweep(ctx, SweepParams{OlderThan: olderThan, datasetID: datasetID, Lookup: lookup})
}

// batchSender is the optional ability of a DB to send a pipelined batch;
// a pool, a connection and a transaction have it.
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// RecoverDataset is Recover that also returns the dataset's row, read in
// the same round trip as the query of the intents to reconcile (a
// pipelined batch, when the DB can send one): a writer's one look at its
// output before it opens an intent. When an intent was rolled forward,
// the row is read again after it. A dataset that is not registered is an
// error matching ErrDatasetNotFound (it has no intents to recover).
//
// with are reads of the caller's sent in the same batch, after the
// ledger's (say sink.Resolver.Prefetch): each queues its queries and
// returns the reader of their results, called in order once the ledger's
// results are read (not when those failed). Their errors are returned.
// Without a batch they are not sent.
func (l *Ledger) RecoverDataset(ctx context.Context, datasetID string, olderThan time.Duration, lookup Lookup,
	with ...func(b *pgx.Batch) func(pgx.BatchResults) error) (Dataset, SweepReport, error) {
	if datasetID == "" {
		return Dataset{}, SweepReport{}, invalid("RecoverDataset: dataset id is empty")
	}
	p := SweepParams{OlderThan: olderThan, datasetID: datasetID, Lookup: lookup, limit: 100}
	if lookup == nil {
		return Dataset{}, SweepReport{}, invalid("Sweep: Lookup is nil")
	}
	if olderThan < 0 {
		return Dataset{}, SweepReport{}, invalid("Sweep: OlderThan %s is negative", olderThan)
	}
	bs, ok := l.db.(batchSender)
	if !ok {
		ds, err := l.Dataset(ctx, datasetID)
		if err != nil {
			return Dataset{}, SweepReport{}, err
		}
		rep, err := l.Sweep(ctx, p)
		return ds, rep, err
	}
	q, args := l.sweepQuery(p)
	b := &pgx.Batch{}
	b.Queue(l.datasetSQL(), datasetID)
	b.Queue(q, args...)
	readers := make([]func(pgx.BatchResults) error, 0, len(with))
	for _, w := range with {
		if w != nil {
			readers = append(readers, w(b))
		}
	}
	br := bs.SendBatch(ctx, b)
	ds, err := l.scanDataset(br.QueryRow(), datasetID)
	var stale []holder
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			stale, err = scanStale(rows)
		} else {
			err = fmt.Errorf("ledger: sweep: %w", err)
		}
	}
	for _, read := range readers {
		if err == nil && read != nil {
			err = read(br)
		}
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("ledger: dataset %q: %w", datasetID, cerr)
	}
	if err != nil {
		return Dataset{}, SweepReport{}, err
	}
	rep, err := l.reconcileStale(ctx, p, stale)
	if err != nil {
		return Dataset{}, rep, err
	}
	if len(rep.RolledForward) > 0 {
		ds, err = l.Dataset(ctx, datasetID)
	}
	return ds, rep, err
}

// What reconcile did with an intent.
type recKind int

const (
	recSkipped       recKind = iota // alive again, or changed by someone else
	recRolledForward                // committed with the landed outcome
	recAborted                      // aborted: absent, vetoed, or maintenance
	recUnresolved                   // left open (claimed): see err
)

type recResult struct {
	kind recKind
	in   Intent // the intent as claimed (or as found, when skipped)
	err  error  // why it is unresolved
}

// reconcile settles the open intent t of a gone writer. When sess is not
// nil and the intent has a lock key, it first takes that lock on sess (a
// refusal means the writer, or another reconciler, holds it: skipped) and
// unlocks it at the end. The returned error is for failures that stop the
// caller (the claim's query failed); everything else is in the result.
func (l *Ledger) reconcile(ctx context.Context, sess *pgx.Conn, t Txn, key *int64, lookup Lookup) (recResult, error) {
	found := t.intent()
	if sess != nil && key != nil {
		var ok bool
		if err := sess.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, *key).Scan(&ok); err != nil {
			return recResult{}, fmt.Errorf("ledger: reconcile intent %s: lock: %w", t.ID, err)
		}
		if !ok {
			return recResult{kind: recSkipped, in: *found}, nil
		}
		defer func() {
			cctx, cancel := l.cleanupContext(ctx)
			defer cancel()
			if _, err := sess.Exec(cctx, `SELECT pg_advisory_unlock($1)`, *key); err != nil && !sess.IsClosed() {
				// An unlock that failed on a live session would make the
				// intent look alive until the session ends: end it, unless
				// it is the caller's own *pgx.Conn.
				if _, own := l.db.(*pgx.Conn); !own {
					_ = sess.Close(cctx)
				}
			}
		}()
	}
	claimed, err := l.claim(ctx, found)
	if err != nil {
		var se *stateError
		if errors.As(err, &se) || errors.Is(err, errBusyRow) {
			return recResult{kind: recSkipped, in: *found}, nil
		}
		return recResult{}, err
	}
	res := recResult{in: *claimed}
	if claimed.WriteMode == Maintenance {
		if err := l.Abort(ctx, claimed, errors.New("reconciled: the maintenance run's writer is gone")); err != nil {
			res.kind, res.err = recUnresolved, err
			return res, nil
		}
		res.kind = recAborted
		return res, nil
	}
	if lookup == nil {
		res.kind, res.err = recUnresolved, invalid("no Lookup to reconcile intent %s", t.ID)
		return res, nil
	}
	landing, lerr := lookup(ctx, *claimed)
	switch {
	case lerr != nil:
		res.kind, res.err = recUnresolved, lerr
	case landing.Landed:
		if err := l.Commit(ctx, claimed, landing.Outcome); err != nil {
			if errors.Is(err, ErrVetoed) {
				res.kind = recAborted
			} else {
				res.kind, res.err = recUnresolved, err
			}
			return res, nil
		}
		res.kind = recRolledForward
	default:
		if err := l.Abort(ctx, claimed, errors.New("swept: the write did not land")); err != nil {
			res.kind, res.err = recUnresolved, err
			return res, nil
		}
		res.kind = recAborted
	}
	return res, nil
}

// errBusyRow: the intent row is locked by a transaction committing it.
var errBusyRow = errors.New("ledger: intent row locked")

// claim bumps the attempt of an open intent, fencing out its writer. It
// waits at most the ledger's lock timeout for a transaction that holds the row
// (a CommitTx whose transaction is still running), then gives up with
// errBusyRow.
func (l *Ledger) claim(ctx context.Context, in *Intent) (*Intent, error) {
	out := *in
	out.st = nil
	err := pgx.BeginFunc(ctx, l.db, func(tx pgx.Tx) error {
		if err := l.setLockTimeout(ctx, tx); err != nil {
			return err
		}
		// An intent held by a lease is taken over only once the lease
		// lapsed (a renewal may have come since it was read), and the
		// reconciler holds it by a fresh lease while it settles it.
		err := tx.QueryRow(ctx, `UPDATE `+l.table("pipeline_build_transactions")+`
			SET attempt = attempt + 1,
			    lease_until = CASE WHEN lease_until IS NOT NULL THEN clock_timestamp() + $3::pg_catalog.int8 * interval '1 microsecond' END
			WHERE id = $1 AND status = 'open' AND attempt = $2 AND (lease_until IS NULL OR lease_until <= clock_timestamp())
			RETURNING attempt`, in.ID, in.attempt, l.cfg.Lease.Microseconds()).Scan(&out.attempt)
		if errors.Is(err, pgx.ErrNoRows) {
			return l.stateError(ctx, tx, in)
		}
		return err
	})
	var se *stateError
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return &out, nil
	case errors.As(err, &se):
		return nil, se
	case errors.As(err, &pgErr) && pgErr.Code == pgLockNotAvailable:
		return nil, errBusyRow
	}
	return nil, fmt.Errorf("ledger: claim intent %s: %w", in.ID, err)
}
