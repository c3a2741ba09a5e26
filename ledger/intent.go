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
// returns it.
//
// With liveness (see the package documentation) Open, on a direct
// connection, first takes a dedicated session and, on it, the intent's
// advisory lock, then inserts the row carrying the lock's key; through a
// pooler it inserts the row with a lease instead. From the moment the
// intent is visible, its writer is seen alive until Commit, Abort or
// Release (or its death, or, for a lease, until the lease lapses unrenewed:
// see KeepAlive). On any failure Open gives the session back and leaves no
// intent.
//
// While another intent of the same dataset is open, Open waits with
// jittered exponential backoff until that one ends, and returns an
// error matching ErrBusy (errors.Is) once Config.WaitTimeout or ctx runs
// out, or at once with p.NoWait. Intents of different datasets never wait
// on each other. When the holder's writer is gone (its lock is no longer
// held, or its lease lapsed) Open does not wait: with p.Lookup it reconciles the holder at once
// (claim, then roll forward, abort, or an error matching ErrUnresolved
// when Lookup cannot tell) and opens; a dead maintenance holder is aborted without a
// Lookup. A holder without liveness is reconciled the same way, by its
// age, when p.RecoverAfter is set (with p.Lookup); otherwise only Sweep
// and Recover reconcile it.
func (l *Ledger) Open(ctx context.Context, p OpenParams) (*Intent, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	id := p.id
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
	backoff := l.cfg.minBackoff
	qk := queueKey(l.cfg.Schema, p.DatasetID)
	queued := false // st's session holds the dataset's queue lock
	defer func() {
		if queued {
			st.leaveQueue(qk)
		}
	}()
	for {
		db := l.db
		if st.conn != nil {
			db = st.conn
		}
		check := &qk // the head of the queue needs not check it
		if queued {
			check = nil
		}
		in, h, err := l.tryOpen(ctx, db, id, p, st, check)
		if err == nil {
			return in, nil
		}
		if !errors.Is(err, ErrBusy) {
			return nil, err
		}
		gone := h != nil && (h.key != nil || h.leased) && !h.live
		// A holder without liveness is taken for gone by its age alone.
		aged := h != nil && h.key == nil && !h.leased && h.aged && p.Lookup != nil
		if (gone && (h.txn.WriteMode == Maintenance || p.Lookup != nil)) || aged {
			r, err := l.reconcile(ctx, st.conn, h.txn, h.key, p.Lookup)
			if err != nil {
				return nil, err
			}
			switch r.kind {
			case recUnresolved:
				return nil, &unresolvedError{datasetID: p.DatasetID, holderID: h.txn.ID, err: r.err}
			case recRolledForward, recAborted:
				continue // the dataset is free: try again at once
			}
		}
		busy := &busyError{datasetID: p.DatasetID, holderGone: gone}
		if h != nil {
			busy.holderID = h.txn.ID
		}
		if !p.NoWait && st.canQueue() {
			// Wait in turn (see queue.go): join the queue, then, at its
			// head, for the holder to let go.
			var timedOut bool
			switch {
			case !queued:
				timedOut, err = st.joinQueue(ctx, qk, deadline)
				queued = err == nil && !timedOut
			case h != nil && h.key != nil && h.live:
				timedOut, err = st.awaitHolder(ctx, *h.key, deadline)
			default:
				err = errNoHolderLock
			}
			if timedOut {
				busy.waited = time.Since(start).Round(time.Millisecond).String()
				busy.cause = waitCause(ctx, deadline)
				return nil, busy
			}
			if err == nil {
				continue
			}
			if !errors.Is(err, errNoHolderLock) {
				if ctxErr := ctx.Err(); ctxErr != nil {
					busy.waited = time.Since(start).Round(time.Millisecond).String()
					busy.cause = ctxErr
					return nil, busy
				}
				return nil, fmt.Errorf("ledger: open intent for dataset %q: wait in turn: %w", p.DatasetID, err)
			}
			// A holder without a lock to wait on: back off as below.
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		if p.NoWait || time.Now().Add(wait).After(deadline) {
			busy.waited = time.Since(start).Round(time.Millisecond).String()
			return nil, busy
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			busy.waited = time.Since(start).Round(time.Millisecond).String()
			busy.cause = ctx.Err()
			return nil, busy
		case <-t.C:
		}
		backoff = min(backoff*2, l.cfg.maxBackoff)
	}
}

// holder is the open intent of a dataset as Open sees it.
type holder struct {
	txn    Txn
	key    *int64 // lock_key; nil without a session lock
	leased bool   // it is held by a lease (lease_until)
	live   bool   // its lock is granted, or its lease runs: the writer is alive
	aged   bool   // opened at least OpenParams.RecoverAfter ago (when set)
}

func (l *Ledger) holderOf(ctx context.Context, db DB, datasetID string, recoverAfter time.Duration) (*holder, error) {
	var h holder
	t, err := scanTxn(db.QueryRow(ctx, `SELECT `+txnColumns+`, lock_key, lease_until IS NOT NULL, `+liveSQL+`,
		$2 AND created_at <= now() - $3::pg_catalog.interval
		FROM `+l.table("pipeline_build_transactions")+` WHERE dataset_id = $1 AND status = 'open'`,
		datasetID, recoverAfter > 0, recoverAfter),
		&h.key, &h.leased, &h.live, &h.aged)
	if err != nil {
		return nil, err
	}
	h.txn = t
	return &h, nil
}

// tryOpen makes one attempt on db (the held session, or the ledger's DB).
// It returns ErrBusy (and the holder, when known) when another intent of
// the dataset is open.
//
// With queue (the dataset's queue lock key), the insert is refused with
// ErrBusy while another session holds or waits for that lock (see
// queue.go), on a session in autocommit; pass nil at the head of the
// queue.
func (l *Ledger) tryOpen(ctx context.Context, db DB, id string, p OpenParams, st *intentState, queue *int64) (*Intent, *holder, error) {
	in := &Intent{ID: id, DatasetID: p.DatasetID, WriterID: p.WriterID, Sink: p.Sink, WriteMode: p.WriteMode,
		idempotencyKey: p.IdempotencyKey, actor: p.Actor, st: st}
	// Only the owner (or anyone, for an unowned dataset) gets a row.
	insert := func(from, cond string) string {
		return `INSERT INTO ` + l.table("pipeline_build_transactions") + `
			(id, dataset_id, writer_id, sink, write_mode, lock_key, idempotency_key, actor, lease_until)
			SELECT $1, $2, $3, $4, $5, $6, nullif($7, ''), nullif($8, ''),
				clock_timestamp() + $9::pg_catalog.int8 * interval '1 microsecond' FROM ` + from + `
			WHERE d.id = $2 AND (d.owner IS NULL OR d.owner = $3) AND d.status <> '` + StatusDropped + `'` + cond + `
			RETURNING attempt, created_at`
	}
	args := []any{id, p.DatasetID, p.WriterID, p.Sink, p.WriteMode, st.lockKeyArg(), p.IdempotencyKey, p.Actor, st.leaseArg()}
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
			return notOwner(p.DatasetID, *owner, p.WriterID)
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
		// The queue is checked (a shared lock of the transaction, refused
		// while another session holds or waits for the queue lock) before
		// the row is inserted.
		q := `WITH lt AS MATERIALIZED (SELECT set_config('lock_timeout', $10, true),
				CASE WHEN $11 <> '' AND current_setting('server_version_num')::pg_catalog.int4 >= 140000
					THEN set_config('client_connection_check_interval', $11, false) END,
				$12::pg_catalog.int8 IS NULL OR pg_catalog.pg_try_advisory_xact_lock_shared($12::pg_catalog.int8) AS free)
			` + insert(l.table("datasets")+" d CROSS JOIN lt", " AND lt.free")
		check := ""
		if st.conn != nil && db == DB(st.conn) {
			check = l.clientCheckSetting()
		}
		var qk any
		if queue != nil {
			qk = *queue
		}
		args = append(args, l.lockTimeoutSetting(), check, qk)
		if st.lockPending {
			err = l.lockAndInsert(ctx, st, q, args, in, p.Reads)
		} else {
			err = db.QueryRow(ctx, q, args...).Scan(&in.attempt, &in.CreatedAt)
		}
		if st.conn == nil {
			db = l.db // the lock was refused and the session given back
		}
		if errors.Is(err, pgx.ErrNoRows) {
			err = noRow(db)
		}
		if qk != nil && errors.Is(err, pgx.ErrNoRows) {
			err = errQueued // nothing else refuses a row of a dataset that takes it
		}
	} else {
		err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if err := l.setLockTimeout(ctx, tx); err != nil {
				return err
			}
			err := tx.QueryRow(ctx, insert(l.table("datasets")+" d", ""), args...).Scan(&in.attempt, &in.CreatedAt)
			if errors.Is(err, pgx.ErrNoRows) {
				return noRow(tx)
			}
			return err
		})
	}
	if errors.Is(err, ErrNotOwner) || errors.Is(err, ErrDatasetNotFound) || errors.Is(err, ErrDatasetDropped) {
		return nil, nil, err
	}
	if err == nil {
		return in, nil, nil
	}
	if errors.Is(err, errQueued) {
		return nil, nil, ErrBusy
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
		err = br.QueryRow().Scan(&in.attempt, &in.CreatedAt)
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
// is errIDInUse.
func (l *Ledger) reopen(ctx context.Context, db DB, id string, p OpenParams, st *intentState) (*Intent, error) {
	t, err := l.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if t.Status != StatusOpen || t.DatasetID != p.DatasetID || t.WriterID != p.WriterID ||
		t.Sink != p.Sink || t.WriteMode != p.WriteMode || t.idempotencyKey != p.IdempotencyKey || t.Actor != p.Actor {
		return nil, fmt.Errorf("%w: %s is a %s intent of dataset %q", errIDInUse, id, t.Status, t.DatasetID)
	}
	if t.Attempt != 1 {
		return nil, &stateError{id: id, status: string(t.Status), attempt: t.Attempt, kind: ErrFenced}
	}
	if st.conn != nil || st.leased {
		// This writer holds the lock, or the lease, now: record it (the row
		// may have been opened without liveness).
		if _, err := db.Exec(ctx, `UPDATE `+l.table("pipeline_build_transactions")+`
			SET lock_key = $2, lease_until = clock_timestamp() + $3::pg_catalog.int8 * interval '1 microsecond'
			WHERE id = $1 AND status = 'open'`, id, st.lockKeyArg(), st.leaseArg()); err != nil {
			return nil, fmt.Errorf("ledger: reopen intent %s: %w", id, err)
		}
	}
	in := t.intent()
	in.st = st
	return in, nil
}

// Abort marks the open intent aborted with cause as its error text. The
// dataset is left unchanged. Aborting an intent that is not open (or was
// claimed by a sweeper) returns an error matching ErrNotOpen or ErrFenced.
// Abort runs on the writer's held session; when that session broke (a
// deadline interrupting a query closes it), on a connection opened in its place with its configuration,
// so that a failed write ends its intent within ctx without waiting for a
// busy pool; when the hold was released, on the ledger's DB (an abort is
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
	if err := l.endOnHold(ctx, in, "abort", run); err != nil {
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
			WHERE id = $1 AND status = 'open' AND attempt = $2`, in.ID, in.attempt)
		if err == nil && tag.RowsAffected() != 1 {
			err = l.stateError(ctx, db, in)
		}
		return err
	}
	return l.endOnHold(ctx, in, "withdraw", run)
}

// endOnHold runs run, which ends in, on the writer's held session, or
// elsewhere when that session cannot run it (the hold is gone or broke,
// or the session runs a transaction: Intent.BeginTx): on a connection
// taking the broken session's place (replacement), or else on the
// ledger's DB. An error is wrapped as op's; on success in is marked
// finished. The caller releases the hold.
func (l *Ledger) endOnHold(ctx context.Context, in *Intent, op string, run func(db DB) error) error {
	err := l.use(in, run)
	var broke *holdBroke
	if errors.Is(err, errHoldGone) || errors.Is(err, errSessionInTx) || errors.As(err, &broke) {
		if c := in.st.replacement(ctx); c != nil {
			err = run(c)
			closeConn(c, in.st.cleanup)
		} else {
			err = run(l.db)
		}
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
		WHERE id = $1 AND status = 'open' AND attempt = $2`, in.ID, in.attempt, causeText(cause))
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
	var se *stateError
	var ve *vetoError
	if errors.As(err, &se) || errors.As(err, &ve) || errors.Is(err, ErrInvalid) || errors.Is(err, ErrDatasetNotFound) {
		return err
	}
	return fmt.Errorf("ledger: %s intent %s: %w", op, id, err)
}
