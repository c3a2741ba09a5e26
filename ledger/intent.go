package ledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lakewrite/lakewrite/internal/vocab"
)

const (
	pgUniqueViolation     = "23505"
	pgForeignKeyViolation = "23503"
	pgLockNotAvailable    = "55P03"
	openIndexName         = "pipeline_build_transactions_one_open"
)

// Open records a new open intent for p.DatasetID in a short transaction and
// returns it.
//
// With liveness (see the package documentation) Open first takes a
// dedicated session and, on it, the intent's advisory lock, then inserts
// the row carrying the lock's key: from the moment the intent is visible,
// its writer is seen alive until Commit, Abort or Release (or its death).
// On any failure Open gives the session back and leaves no intent.
//
// While another intent of the same dataset is open, Open waits with
// jittered exponential backoff until that one ends, and returns a
// *BusyError (errors.Is(err, ErrBusy)) once Config.WaitTimeout or ctx runs
// out, or at once with p.NoWait. Intents of different datasets never wait
// on each other. When the holder's writer is gone (its lock is no longer
// held) Open does not wait: with p.Lookup it reconciles the holder at once
// (claim, then roll forward, abort, or an *UnresolvedError when Lookup
// cannot tell) and opens; a dead maintenance holder is aborted without a
// Lookup. A holder without liveness is reconciled the same way, by its
// age, when p.RecoverAfter is set (with p.Lookup); otherwise only Sweep
// and Recover reconcile it.
//
// Opening a pre-minted id that is already open returns that intent
// (holding it when its previous holder is gone), unless a reconciler
// claimed it (*StateError matching ErrFenced).
func (l *Ledger) Open(ctx context.Context, p OpenParams) (*Intent, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	id := p.ID
	if id == "" {
		id = NewID()
	}
	st, err := l.newState(ctx, id)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = ctxErr // the caller's context ended
		}
		return nil, fmt.Errorf("ledger: open intent for dataset %q: take a session: %w", p.DatasetID, err)
	}
	in, err := l.open(ctx, id, p, st)
	if err != nil {
		st.release()
		return nil, err
	}
	l.log.InfoContext(ctx, "lakewrite intent opened", "txn_id", in.ID, "dataset_id", in.DatasetID,
		"writer_id", in.WriterID, "sink", in.Sink, "write_mode", in.WriteMode, "liveness", st.hadHold)
	return in, nil
}

func (l *Ledger) open(ctx context.Context, id string, p OpenParams, st *intentState) (*Intent, error) {
	start := time.Now()
	deadline := start.Add(l.cfg.WaitTimeout)
	backoff := l.cfg.MinBackoff
	for {
		db := l.db
		if st.conn != nil {
			db = st.conn
		}
		in, h, err := l.tryOpen(ctx, db, id, p, st)
		if err == nil {
			return in, nil
		}
		if !errors.Is(err, ErrBusy) {
			return nil, err
		}
		gone := h != nil && h.key != nil && !h.live
		// A holder without liveness is taken for gone by its age alone.
		aged := h != nil && h.key == nil && h.aged && p.Lookup != nil
		if (gone && (h.txn.WriteMode == Maintenance || p.Lookup != nil)) || aged {
			r, err := l.reconcile(ctx, st.conn, h.txn, h.key, p.Lookup)
			if err != nil {
				return nil, err
			}
			switch r.kind {
			case recUnresolved:
				return nil, &UnresolvedError{DatasetID: p.DatasetID, HolderID: h.txn.ID, Err: r.err}
			case recRolledForward, recAborted:
				continue // the dataset is free: try again at once
			}
		}
		busy := &BusyError{DatasetID: p.DatasetID, HolderGone: gone}
		if h != nil {
			busy.HolderID = h.txn.ID
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		if p.NoWait || time.Now().Add(wait).After(deadline) {
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

// holder is the open intent of a dataset as Open sees it.
type holder struct {
	txn  Txn
	key  *int64 // lock_key; nil without liveness
	live bool   // its lock is granted: the writer is alive
	aged bool   // opened at least OpenParams.RecoverAfter ago (when set)
}

func (l *Ledger) holderOf(ctx context.Context, db DB, datasetID string, recoverAfter time.Duration) (*holder, error) {
	var h holder
	t, err := scanTxn(db.QueryRow(ctx, `SELECT `+txnColumns+`, lock_key, coalesce(lock_key IN (`+heldKeys+`), false),
		$2 AND created_at <= now() - $3::pg_catalog.interval
		FROM `+l.table("pipeline_build_transactions")+` WHERE dataset_id = $1 AND status = 'open'`,
		datasetID, recoverAfter > 0, recoverAfter),
		&h.key, &h.live, &h.aged)
	if err != nil {
		return nil, err
	}
	h.txn = t
	return &h, nil
}

// tryOpen makes one attempt on db (the held session, or the ledger's DB).
// It returns ErrBusy (and the holder, when known) when another intent of
// the dataset is open.
func (l *Ledger) tryOpen(ctx context.Context, db DB, id string, p OpenParams, st *intentState) (*Intent, *holder, error) {
	in := &Intent{ID: id, DatasetID: p.DatasetID, WriterID: p.WriterID, Sink: p.Sink, WriteMode: p.WriteMode,
		IdempotencyKey: p.IdempotencyKey, Actor: p.Actor, st: st}
	// Only the owner (or anyone, for an unowned dataset) gets a row.
	insert := func(from string) string {
		return `INSERT INTO ` + l.table("pipeline_build_transactions") + `
			(id, dataset_id, writer_id, sink, write_mode, lock_key, idempotency_key, actor)
			SELECT $1, $2, $3, $4, $5, $6, nullif($7, ''), nullif($8, '') FROM ` + from + `
			WHERE d.id = $2 AND (d.owner IS NULL OR d.owner = $3) AND d.status <> '` + StatusDropped + `'
			RETURNING attempt, created_at`
	}
	args := []any{id, p.DatasetID, p.WriterID, p.Sink, p.WriteMode, st.lockKeyArg(), p.IdempotencyKey, p.Actor}
	noRow := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) error {
		var owner *string
		var status string
		switch oerr := q.QueryRow(ctx, `SELECT owner, status FROM `+l.table("datasets")+` WHERE id = $1`, p.DatasetID).Scan(&owner, &status); {
		case errors.Is(oerr, pgx.ErrNoRows):
			return fmt.Errorf("%w: %q", ErrDatasetNotFound, p.DatasetID)
		case oerr != nil:
			return oerr
		case status == StatusDropped:
			return fmt.Errorf("%w: %q is being decommissioned; complete the drop, then register it again", ErrDatasetDropped, p.DatasetID)
		case owner != nil && *owner != p.WriterID:
			return &OwnerError{DatasetID: p.DatasetID, Owner: *owner, WriterID: p.WriterID}
		}
		return pgx.ErrNoRows
	}
	var err error
	ac := autocommit(db)
	if st.lockPending && (!ac || db != DB(st.conn)) {
		if err := st.lock(ctx); err != nil {
			return nil, nil, fmt.Errorf("ledger: open intent for dataset %q: lock: %w", p.DatasetID, err)
		}
		if st.conn == nil { // refused: no liveness, on the ledger's DB
			db, ac = l.db, autocommit(l.db)
			args[5] = st.lockKeyArg()
		}
	}
	if ac {
		// One statement, its own transaction: the lock timeout is set (for
		// that transaction only) before the row is inserted, so it bounds
		// the wait on another open intent's row.
		// On the intent's held session, the statement also sets
		// client_connection_check_interval for the session (ClientCheckInterval).
		q := `WITH lt AS MATERIALIZED (SELECT set_config('lock_timeout', $9, true),
				CASE WHEN $10 <> '' AND current_setting('server_version_num')::pg_catalog.int4 >= 140000
					THEN set_config('client_connection_check_interval', $10, false) END)
			` + insert(l.table("datasets")+" d CROSS JOIN lt")
		check := ""
		if st.conn != nil && db == DB(st.conn) {
			check = l.clientCheckSetting()
		}
		args = append(args, l.lockTimeoutSetting(), check)
		if st.lockPending {
			err = l.lockAndInsert(ctx, st, q, args, in, p.Reads)
		} else {
			err = db.QueryRow(ctx, q, args...).Scan(&in.Attempt, &in.CreatedAt)
		}
		if st.conn == nil {
			db = l.db // the lock was refused and the session given back
		}
		if errors.Is(err, pgx.ErrNoRows) {
			err = noRow(db)
		}
	} else {
		err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if err := l.setLockTimeout(ctx, tx); err != nil {
				return err
			}
			err := tx.QueryRow(ctx, insert(l.table("datasets")+" d"), args...).Scan(&in.Attempt, &in.CreatedAt)
			if errors.Is(err, pgx.ErrNoRows) {
				return noRow(tx)
			}
			return err
		})
	}
	var owned *OwnerError
	if errors.As(err, &owned) || errors.Is(err, ErrDatasetNotFound) || errors.Is(err, ErrDatasetDropped) {
		return nil, nil, err
	}
	if err == nil {
		return in, nil, nil
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = ctxErr // the caller's context ended (not a busy dataset)
		}
		return nil, nil, fmt.Errorf("ledger: open intent for dataset %q: %w", p.DatasetID, err)
	}
	switch {
	case pgErr.Code == pgForeignKeyViolation:
		return nil, nil, fmt.Errorf("%w: %q", ErrDatasetNotFound, p.DatasetID)
	case pgErr.Code == pgLockNotAvailable:
		return nil, nil, ErrBusy
	case pgErr.Code == pgUniqueViolation && pgErr.ConstraintName == openIndexName:
		h, herr := l.holderOf(ctx, db, p.DatasetID, p.RecoverAfter)
		switch {
		case herr == nil && h.txn.ID == id:
			in, err := l.reopen(ctx, db, id, p, st)
			return in, nil, err
		case herr == nil:
			return nil, h, ErrBusy
		case errors.Is(herr, pgx.ErrNoRows):
			return nil, nil, ErrBusy // it ended meanwhile
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			herr = ctxErr
		}
		return nil, nil, fmt.Errorf("ledger: open intent for dataset %q: %w", p.DatasetID, herr)
	case pgErr.Code == pgUniqueViolation:
		in, err := l.reopen(ctx, db, id, p, st)
		return in, nil, err
	}
	return nil, nil, fmt.Errorf("ledger: open intent for dataset %q: %w", p.DatasetID, err)
}

// lockAndInsert takes the pending lock of st on its session and runs the
// insert q of the intent there, pipelined in one round trip (the lock
// first: the intent is never visible without it). A refused lock (the key
// is held by another session: a live holder of the same id, or a
// collision) leaves the intent without liveness: its row's lock key is
// cleared and the session given back.
func (l *Ledger) lockAndInsert(ctx context.Context, st *intentState, q string, args []any, in *Intent, reads []Read) error {
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_try_advisory_lock($1)`, st.key)
	b.Queue(q, args...)
	for _, r := range reads {
		b.Queue(r.SQL, r.Args...)
	}
	br := st.conn.SendBatch(ctx, b)
	var ok bool
	lerr := br.QueryRow().Scan(&ok)
	var err error
	if lerr == nil {
		err = br.QueryRow().Scan(&in.Attempt, &in.CreatedAt)
	}
	for i := 0; err == nil && i < len(reads); i++ {
		// A read the server refused undid the insert (the batch is one
		// statement sequence): Open fails with its error.
		err = runRead(br, reads[i])
	}
	if cerr := br.Close(); lerr == nil && err == nil && cerr != nil && (len(reads) == 0 || refusedOrBroken(cerr, st.conn)) {
		err = cerr
	}
	if lerr != nil {
		return lerr // nothing was inserted; the lock is still pending
	}
	st.locked(ok)
	if !ok && err == nil {
		// Inserted carrying a key this writer does not hold: clear it.
		if _, uerr := l.db.Exec(ctx, `UPDATE `+l.table("pipeline_build_transactions")+`
			SET lock_key = NULL WHERE id = $1 AND lock_key = $2`, in.ID, st.key); uerr != nil {
			return fmt.Errorf("clear the lock key: %w", uerr)
		}
	}
	return err
}

// runRead hands the rows of the next query of br to r.Scan. Only the
// server's refusal of the query is returned: a Scan that failed on the
// client leaves the insert committed (the failure is the caller's to act
// on), and a broken session is told by the batch's Close.
func runRead(br pgx.BatchResults, r Read) error {
	rows, err := br.Query()
	if err == nil {
		if r.Scan != nil {
			_ = r.Scan(rows)
		}
		rows.Close()
		err = rows.Err()
	}
	if refusedOrBroken(err, nil) {
		return err
	}
	return nil
}

// refusedOrBroken reports whether err is the server's (a *pgconn.PgError)
// or came with conn broken, rather than a failure of the client's own
// (a Scan of Reads) after the server had done its part.
func refusedOrBroken(err error, conn *pgx.Conn) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) || (err != nil && conn != nil && conn.IsClosed())
}

// reopen handles a pre-minted id that already exists: the same open intent
// is returned (held by st when st holds its lock, which means its previous
// holder is gone); an intent a reconciler claimed is fenced; anything else
// is ErrIDInUse.
func (l *Ledger) reopen(ctx context.Context, db DB, id string, p OpenParams, st *intentState) (*Intent, error) {
	t, err := l.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if t.Status != StatusOpen || t.DatasetID != p.DatasetID || t.WriterID != p.WriterID ||
		t.Sink != p.Sink || t.WriteMode != p.WriteMode || t.IdempotencyKey != p.IdempotencyKey || t.Actor != p.Actor {
		return nil, fmt.Errorf("%w: %s is a %s intent of dataset %q", ErrIDInUse, id, t.Status, t.DatasetID)
	}
	if t.Attempt != 1 {
		return nil, &StateError{ID: id, Status: string(t.Status), Attempt: t.Attempt, kind: ErrFenced}
	}
	if st.conn != nil {
		// This writer holds the lock now: record it (the row may have been
		// opened without liveness).
		if _, err := db.Exec(ctx, `UPDATE `+l.table("pipeline_build_transactions")+`
			SET lock_key = $2 WHERE id = $1 AND status = 'open' AND lock_key IS DISTINCT FROM $2`, id, st.key); err != nil {
			return nil, fmt.Errorf("ledger: reopen intent %s: %w", id, err)
		}
	}
	in := t.Intent()
	in.st = st
	return in, nil
}

// Commit marks the intent committed with its outcome, in one short
// transaction: status committed, row_count and snapshot id from the outcome,
// committed_at = o.CommittedAt; the dataset's source_watermark set to that
// same time, its row_count (set for a replace, increased for an append),
// status 'active', sink and, when given, schema. Config.Expectations run
// first and can veto (the intent is then aborted and a *VetoError
// returned).
//
// A maintenance intent commits differently: committed_at = o.CommittedAt
// (now() when zero), and only the dataset's maintained_at (and maintenance
// report, from o.Report) is stamped; its watermark, row count, status,
// schema and sink stay as they are, and expectations do not run.
//
// The update is conditional on the intent being open with the same attempt:
// an intent that is not open any more, or was claimed by a sweeper, cannot
// commit (*StateError matching ErrNotOpen or ErrFenced). An intent opened
// with liveness commits on its held session, so only the writer that still
// holds it can commit it: when the hold is gone (the session broke, or
// Release ran) Commit returns a *StateError matching ErrLostHold, and the
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
	var veto *VetoError
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
	return context.WithTimeout(context.WithoutCancel(ctx), l.cfg.CleanupTimeout)
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
		var se *StateError
		if errors.As(cause, &se) {
			cause = se.Cause
		}
	}
	cctx, cancel := l.cleanupContext(ctx)
	defer cancel()
	var status string
	var attempt int64
	err := l.db.QueryRow(cctx, `SELECT status, attempt FROM `+l.table("pipeline_build_transactions")+` WHERE id = $1`, in.ID).
		Scan(&status, &attempt)
	switch {
	case err == nil && during && status == string(StatusCommitted) && attempt == in.Attempt:
		in.mark(true, false)
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return &StateError{ID: in.ID, kind: ErrIntentNotFound}
	case err == nil && status != string(StatusOpen):
		return &StateError{ID: in.ID, Status: status, Attempt: attempt, kind: ErrNotOpen}
	case err == nil && attempt != in.Attempt:
		return &StateError{ID: in.ID, Status: status, Attempt: attempt, kind: ErrFenced}
	case err != nil:
		cause = errors.Join(cause, err)
	}
	return &StateError{ID: in.ID, Status: status, Attempt: attempt, Cause: cause, kind: ErrLostHold}
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
// expectation is configured or the intent is a maintenance one. It runs on
// the ledger's DB, not on the held session, and does not release the hold.
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
// intent aborted inside tx and returns the *VetoError: commit tx to keep the
// abort, or roll it back and call Abort.
func (l *Ledger) CommitTx(ctx context.Context, tx pgx.Tx, in *Intent, o Outcome) error {
	if err := in.validate(); err != nil {
		return err
	}
	if err := o.validate(in.WriteMode); err != nil {
		return err
	}
	if len(l.cfg.Expectations) == 0 && in.WriteMode != Maintenance {
		_, _, err := l.commitFast(ctx, tx, in, o, nil, nil)
		return err
	}
	return l.commitTxSlow(ctx, tx, in, o)
}

// commitFast is the ledger commit without expectations, in tx (on the held
// session ht when not nil: see commitTxFast), for an outcome already
// validated except for a zero CommittedAt (the database clock sets it); the
// intent is then committed and no longer held by this writer.
func (l *Ledger) commitFast(ctx context.Context, tx pgx.Tx, in *Intent, o Outcome, ht *heldTx, prior *Prior) ([]pgconn.CommandTag, time.Time, error) {
	if o.CommittedAt.IsZero() {
		probe := o
		probe.CommittedAt = time.Unix(0, 0) // validated as set: the clock sets it
		if err := probe.validate(in.WriteMode); err != nil {
			return nil, time.Time{}, err
		}
	}
	tags, at, err := l.commitTxFast(ctx, tx, in, o, ht, prior)
	var pe *PriorError
	if errors.As(err, &pe) {
		return tags, time.Time{}, err
	}
	if err != nil {
		return tags, time.Time{}, l.wrap("commit", in.ID, err)
	}
	in.mark(false, true)
	in.Release()
	return tags, at, nil
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
		_, at, err := l.commitFast(ctx, tx, in, o, nil, nil)
		return at, err
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
	_, at, err := l.commitFast(ctx, tx, in, o, ht, nil)
	return at, err
}

// RowCountSetting is the transaction-local setting through which the
// statements of a Prior give the ledger commit its row count
// (Prior.RowCountSet), e.g. set_config('lakewrite.row_count', n::text, true).
const RowCountSetting = "lakewrite.row_count"

// Prior is what a writer sends before its ledger commit, in the commit's
// round trip (CommitTxEndAfter).
type Prior struct {
	// Batch holds the statements, run in order before the ledger commit;
	// their rows, if any, are not read.
	Batch *pgx.Batch
	// RowCountSet: the statements set RowCountSetting to the outcome's row
	// count, which then replaces Outcome.RowCount.
	RowCountSet bool
}

// PriorError is the failure of the statement Index of a Prior's batch:
// nothing after it ran (no ledger commit, no COMMIT), the transaction is
// aborted (roll it back) and the intent is still open.
type PriorError struct {
	Index int
	Err   error
}

func (e *PriorError) Error() string {
	return fmt.Sprintf("ledger: statement %d before the commit: %v", e.Index, e.Err)
}

func (e *PriorError) Unwrap() error { return e.Err }

// CommitTxEndAfter is CommitTxEnd preceded by the statements of p (a
// write's own statements, say), and returns their command tags with the
// commit time. When CommitTxEnd would send the ledger commit and the COMMIT
// in one round trip, the statements go in it too, the ledger commit and
// the COMMIT running only when every statement succeeded; otherwise they
// run first, in a round trip of their own (and the row count they set is
// read in another). A failed statement is a *PriorError. Other errors are
// those of CommitTxEnd.
func (l *Ledger) CommitTxEndAfter(ctx context.Context, tx pgx.Tx, in *Intent, o Outcome, p Prior) ([]pgconn.CommandTag, time.Time, error) {
	if err := in.validate(); err != nil {
		return nil, time.Time{}, err
	}
	if p.Batch == nil || p.Batch.Len() == 0 {
		return nil, time.Time{}, invalid("CommitTxEndAfter: the prior batch is empty")
	}
	if p.RowCountSet {
		o.RowCount = 0 // set by the statements
	}
	ht, held := tx.(*heldTx)
	if !held || ht.st != in.st || len(l.cfg.Expectations) > 0 || in.WriteMode == Maintenance {
		tags, err := runPrior(ctx, tx, p.Batch)
		if err != nil {
			return tags, time.Time{}, err
		}
		if p.RowCountSet {
			if err := tx.QueryRow(ctx, `SELECT current_setting($1)::pg_catalog.int8`, RowCountSetting).Scan(&o.RowCount); err != nil {
				return tags, time.Time{}, l.wrap("commit", in.ID, err)
			}
		}
		at, err := l.CommitTxEnd(ctx, tx, in, o)
		return tags, at, err
	}
	if !o.CommittedAt.IsZero() {
		if err := o.validate(in.WriteMode); err != nil {
			return nil, time.Time{}, err
		}
	}
	return l.commitFast(ctx, tx, in, o, ht, &p)
}

// runPrior runs the statements of b in tx (one round trip) and returns
// their tags; a failure is a *PriorError.
func runPrior(ctx context.Context, tx pgx.Tx, b *pgx.Batch) ([]pgconn.CommandTag, error) {
	br := tx.SendBatch(ctx, b)
	tags, err := readPrior(br, b.Len())
	if cerr := br.Close(); err == nil && cerr != nil {
		err = &PriorError{Index: len(tags), Err: cerr}
	}
	return tags, err
}

// readPrior reads the results of the n statements of a Prior.
func readPrior(br pgx.BatchResults, n int) ([]pgconn.CommandTag, error) {
	tags := make([]pgconn.CommandTag, 0, n)
	for i := range n {
		tag, err := br.Exec()
		if err != nil {
			return tags, &PriorError{Index: i, Err: err}
		}
		tags = append(tags, tag)
	}
	return tags, nil
}

// commitTxSlow is CommitTx with expectations (or for a maintenance
// intent): commitTx in a savepoint, a veto recorded as an abort.
func (l *Ledger) commitTxSlow(ctx context.Context, tx pgx.Tx, in *Intent, o Outcome) error {
	var veto *VetoError
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
		RETURNING write_mode, sink, committed_at`, in.ID, in.Attempt, o.RowCount, snap, at).Scan(&mode, &sink, &committedAt)
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
			return &VetoError{ID: in.ID, Reason: verr}
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
func (l *Ledger) commitTxFast(ctx context.Context, tx pgx.Tx, in *Intent, o Outcome, end *heldTx, prior *Prior) ([]pgconn.CommandTag, time.Time, error) {
	snap, at := o.nullable()
	var rows any = o.RowCount
	if prior != nil && prior.RowCountSet {
		rows = nil // the prior statements set it
	}
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
	var nPrior int
	if prior != nil {
		nPrior = prior.Batch.Len()
		b.QueuedQueries = append(b.QueuedQueries, prior.Batch.QueuedQueries...)
	}
	b.Queue(`SAVEPOINT ` + sp)
	b.Queue(`WITH ts AS MATERIALIZED (SELECT coalesce($5::pg_catalog.timestamptz, clock_timestamp()) AS at,
		coalesce($3::pg_catalog.int8, current_setting('`+RowCountSetting+`', true)::pg_catalog.int8) AS n),
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
		in.ID, in.Attempt, rows, snap, at, in.DatasetID, nullJSON(o.Schema), unlockKey)
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
	var tags []pgconn.CommandTag
	if nPrior > 0 {
		var err error
		if tags, err = readPrior(br, nPrior); err != nil {
			// Nothing after the failed statement ran: tx is aborted, the
			// intent untouched.
			_ = br.Close()
			return tags, time.Time{}, err
		}
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
			return tags, time.Time{}, fmt.Errorf("commit: %w", err)
		}
		return tags, stamped, nil
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
			return tags, time.Time{}, err
		}
		// Refused: explain it as below (the counts died with the statement).
		var open bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+l.table("pipeline_build_transactions")+`
			WHERE id = $1 AND status = 'open' AND attempt = $2 AND write_mode <> 'maintenance')`, in.ID, in.Attempt).Scan(&open); err != nil {
			return tags, time.Time{}, err
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
			WHERE id = $1 AND status = 'open' AND attempt = $2`, in.ID, in.Attempt).Scan(&mode); err == nil && mode == Maintenance {
			return tags, time.Time{}, invalid("intent %s is a %s intent, not %s", in.ID, mode, in.WriteMode)
		}
		return tags, time.Time{}, l.stateError(ctx, tx, in)
	case datasets != 1:
		// Cannot happen: the intent's row references its dataset's.
		return tags, time.Time{}, fmt.Errorf("%w: %q", ErrDatasetNotFound, in.DatasetID)
	}
	return tags, stamped, nil
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
// claimed by a sweeper) returns a *StateError. Abort runs on the writer's
// held session, or on the ledger's DB when the hold is gone (an abort is
// always safe under the attempt fence). Whatever the result, when Abort
// returns the intent is no longer held by this writer.
func (l *Ledger) Abort(ctx context.Context, in *Intent, cause error) error {
	if err := in.validate(); err != nil {
		return err
	}
	defer in.Release()
	run := func(db DB) error {
		return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if err := l.setLockTimeout(ctx, tx); err != nil {
				return err
			}
			return l.abortTx(ctx, tx, in, cause)
		})
	}
	if err := l.endOnHold(in, "abort", run); err != nil {
		return err
	}
	l.log.InfoContext(ctx, "lakewrite intent aborted", "txn_id", in.ID, "dataset_id", in.DatasetID, "cause", causeText(cause))
	return nil
}

// Withdraw deletes an intent that was opened but must not be used (its
// writer found, before writing anything, that it opened it for the wrong
// sink): unlike Abort it leaves no trace in the ledger. The intent must
// still be open with its attempt (ErrNotOpen otherwise, and nothing is
// deleted); its hold is released either way.
func (l *Ledger) Withdraw(ctx context.Context, in *Intent) error {
	if err := in.validate(); err != nil {
		return err
	}
	defer in.Release()
	run := func(db DB) error {
		tag, err := db.Exec(ctx, `DELETE FROM `+l.table("pipeline_build_transactions")+`
			WHERE id = $1 AND status = 'open' AND attempt = $2`, in.ID, in.Attempt)
		if err == nil && tag.RowsAffected() != 1 {
			err = l.stateError(ctx, db, in)
		}
		return err
	}
	return l.endOnHold(in, "withdraw", run)
}

// endOnHold runs run, which ends in, on the writer's held session, or on
// the ledger's DB when that session cannot run it (the hold is gone or
// broke, or the session runs a transaction: Intent.BeginTx). An error is
// wrapped as op's; on success in is marked finished. The caller releases
// the hold.
func (l *Ledger) endOnHold(in *Intent, op string, run func(db DB) error) error {
	err := l.use(in, run)
	var broke *holdBroke
	if errors.Is(err, errHoldGone) || errors.Is(err, errSessionInTx) || errors.As(err, &broke) {
		err = run(l.db)
	}
	if err != nil {
		return l.wrap(op, in.ID, err)
	}
	in.mark(true, false)
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
// abort). It is the ledger's pgx.BeginFunc. The abort runs under a fresh
// context (context.WithoutCancel of ctx, bounded by Config.CleanupTimeout)
// made when fn has returned, so a late failure or a cancelled ctx still
// aborts. With releases the hold in every case.
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
	out, err = fn(ctx, in)
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
// the abort's reason and returned as a *VetoError); a panic is re-raised
// after the abort. When committing the transaction fails, WithTx asks the
// ledger which way it went: the intent committed means the transaction did
// (nil is returned), the intent still open means it did not (it is
// aborted). The clean-up runs under context.WithoutCancel of ctx bounded by
// Config.CleanupTimeout. WithTx releases the hold in every case.
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
	out, err = fn(ctx, tx, in)
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
		if t, gerr := l.Get(cctx, in.ID); gerr == nil && t.Status == StatusCommitted && t.Attempt == in.Attempt {
			return out, nil // it committed before the error
		}
		return Outcome{}, errors.Join(fmt.Errorf("%w: %w", ErrOutcomeUnknown, cerr), aerr)
	}
	in.mark(true, false)
	return out, nil
}
