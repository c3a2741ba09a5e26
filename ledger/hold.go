package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// acquirer is the optional ability of a DB to hand out a dedicated
// connection; *pgxpool.Pool has it.
type acquirer interface {
	Acquire(ctx context.Context) (*pgxpool.Conn, error)
}

// intentState is what the copies of an Intent returned by Open share: the
// writer's hold on the intent and what was done with it.
type intentState struct {
	mu      sync.Mutex
	key     int64
	table   string        // the ledger table, for Alive
	cleanup time.Duration // bound of the unlock in release
	// conn is the session holding the lock (an acquired pool connection, or
	// the ledger's *pgx.Conn); nil when the intent has no liveness.
	conn   *pgx.Conn
	pooled *pgxpool.Conn // set when conn was acquired (and must go back)
	// hadHold: the intent was opened with liveness (conn was set).
	hadHold bool
	// released: Release ran; lost: the session broke, with its error.
	released bool
	lost     error
	// finished: Commit or Abort ended the intent through this Intent;
	// inTx: CommitTx committed it inside a caller's transaction.
	finished bool
	inTx     bool
	// txOpen: a transaction begun with Intent.BeginTx runs on conn; the
	// connection is given back only once it ended. unlocked: the lock was
	// given up already (inside that transaction, by CommitTx).
	txOpen   bool
	unlocked bool
	// lockPending: the session is taken, its lock not asked for yet.
	lockPending bool
	// leased: the intent is held by a lease (lease_until) instead of a
	// session lock; lease is its length, db where it is renewed.
	leased bool
	lease  time.Duration
	db     DB
}

// liveSQL is true for an open intent whose writer is alive: its session
// lock is granted, or its lease has not lapsed (database clock).
const liveSQL = `(coalesce(lock_key IN (` + heldKeys + `), false) OR coalesce(lease_until > clock_timestamp(), false))`

// lockKey is the advisory lock key of intent id in schema: 64 bits of a
// SHA-256 of both. Two intents colliding on a key (odds about 2^-64 per
// pair) or a key colliding with another application's advisory lock only
// make a dead writer look alive while the other lock is held: that intent
// then waits for age-based recovery (Sweep, Recover), as one without
// liveness does.
func lockKey(schema, id string) int64 {
	h := sha256.Sum256([]byte("lakewrite.intent\x00" + schema + "\x00" + strings.ToLower(id)))
	return int64(binary.BigEndian.Uint64(h[:8]))
}

// heldKeys is the set of advisory lock keys granted in the current
// database, as bigint keys (pg_advisory_lock(bigint) shows its key's high
// half in classid, its low half in objid, and objsubid 1).
const heldKeys = `SELECT (k.classid::pg_catalog.int8 << 32) | k.objid::pg_catalog.int8 FROM pg_catalog.pg_locks k
	WHERE k.locktype = 'advisory' AND k.objsubid = 1 AND k.granted
	  AND k.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())`

// session returns a dedicated session: an acquired pool connection, the
// ledger's own *pgx.Conn, or nil when the DB cannot give one.
func (l *Ledger) session(ctx context.Context) (*pgx.Conn, *pgxpool.Conn, error) {
	switch db := l.db.(type) {
	case *pgx.Conn:
		return db, nil, nil
	case acquirer:
		// Bounded: a writer opening its second intent (a split pair) holds
		// the first one's connection while it waits here; with a pool too
		// small for the writes running at once, they fail instead of
		// waiting on each other for ever.
		actx, cancel := context.WithTimeout(ctx, l.cfg.WaitTimeout)
		defer cancel()
		pc, err := db.Acquire(actx)
		if err != nil {
			if ctx.Err() == nil && actx.Err() != nil {
				err = fmt.Errorf("%w within %s (each open intent holds one: size the pool for the writes running at once): %w", ErrNoConnection, l.cfg.WaitTimeout, err)
			}
			return nil, nil, err
		}
		return pc.Conn(), pc, nil
	}
	return nil, nil, nil
}

// lockSession returns a dedicated session that can hold a session lock: one
// whose connection reaches PostgreSQL directly (directSession). It is nil
// when the DB cannot give a session, or its connections go through a
// pooler (pooled is then true).
func (l *Ledger) lockSession(ctx context.Context) (conn *pgx.Conn, pc *pgxpool.Conn, pooled bool, err error) {
	conn, pc, err = l.session(ctx)
	if err != nil || conn == nil {
		return nil, nil, false, err
	}
	direct, err := directSession(ctx, conn)
	if err != nil || !direct {
		if pc != nil {
			giveBack(pc, !conn.IsClosed(), l.cfg.cleanupTimeout)
		}
		return nil, nil, err == nil, err
	}
	return conn, pc, false, nil
}

// renewable reports whether the ledger's DB can renew a lease outside any
// transaction of the caller's: a pool, or the ledger's own *pgx.Conn (a
// pgx.Tx cannot: its renewals would not be seen before it commits).
func (l *Ledger) renewable() bool {
	switch l.db.(type) {
	case *pgx.Conn, acquirer:
		return true
	}
	return false
}

// newState takes the hold of a new intent of id. On a direct connection
// (LivenessAuto) that is a session and, on it, the intent's advisory lock
// (the key is the intent's own, so it is free unless the same id is held
// by a live writer, or in the rare collision), taken by the first attempt
// to insert the intent, in the same round trip (tryOpen); until then the
// state is lockPending. Through a pooler, or with LivenessLease, it is a
// lease, stamped by the insert. Without either (a pgx.Tx) the state has no
// liveness.
func (l *Ledger) newState(ctx context.Context, id string) (*intentState, error) {
	st := &intentState{key: lockKey(l.cfg.Schema, id), table: l.table("pipeline_build_transactions"), cleanup: l.cfg.cleanupTimeout,
		lease: l.cfg.Lease, db: l.db}
	if !l.renewable() {
		return st, nil
	}
	if l.cfg.Liveness == LivenessLease {
		st.leased = true
		return st, nil
	}
	conn, pooled, viaPooler, err := l.lockSession(ctx)
	if err != nil {
		return st, err
	}
	if conn == nil {
		st.leased = viaPooler
		return st, nil
	}
	st.conn, st.pooled, st.hadHold, st.lockPending = conn, pooled, true, true
	return st, nil
}

// lock takes the pending lock of st in a round trip of its own (when it
// cannot share one with the insert of the intent).
func (st *intentState) lock(ctx context.Context) error {
	if !st.lockPending {
		return nil
	}
	var ok bool
	if err := st.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, st.key).Scan(&ok); err != nil {
		return err
	}
	st.locked(ok)
	return nil
}

// locked records the answer of the pending lock: granted, the state holds
// the intent; refused, it has no liveness and gives its session back.
func (st *intentState) locked(ok bool) {
	st.lockPending = false
	if ok {
		return
	}
	conn, pooled := st.conn, st.pooled
	st.conn, st.pooled, st.hadHold = nil, nil, false
	if pooled != nil {
		giveBack(pooled, !conn.IsClosed(), st.cleanup)
	}
}

// giveBack returns an acquired connection to its pool, or, when it is not
// reusable, takes it out of the pool at once (so the pool's count is right
// when this returns) and closes it, which ends its session and its locks.
func giveBack(pc *pgxpool.Conn, reusable bool, timeout time.Duration) {
	if reusable {
		pc.Release()
		return
	}
	c := pc.Hijack()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_ = c.Close(ctx)
}

// replacement opens a connection in the place of the intent's broken
// session, for ending the intent when its hold broke (a query the caller's
// deadline interrupted closes the connection). The broken connection still
// occupies its place in the pool until the hold is released, so the new
// one keeps the write within the connections it holds: ending the intent
// does not wait for the pool to free another one, which a pool busy with
// other writers may not do within the caller's bound. It is opened with
// the broken connection's configuration under ctx; nil when the session
// did not break, is not a pool's, or the connection cannot be opened (the
// caller then uses the ledger's DB). The caller closes it (closeConn).
func (st *intentState) replacement(ctx context.Context) *pgx.Conn {
	if st == nil {
		return nil
	}
	st.mu.Lock()
	broken := st.pooled != nil && st.conn != nil && st.conn.IsClosed()
	var cfg *pgx.ConnConfig
	if broken {
		cfg = st.conn.Config()
	}
	st.mu.Unlock()
	if cfg == nil {
		return nil
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil
	}
	return c
}

// closeConn closes c within timeout.
func closeConn(c *pgx.Conn, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_ = c.Close(ctx)
}

// lockKeyArg is the lock_key stored on the intent row: NULL without a hold.
func (st *intentState) lockKeyArg() any {
	if st == nil || st.conn == nil {
		return nil
	}
	return st.key
}

// leaseArg is the length of the lease stamped on the intent row, in
// microseconds: NULL without a lease.
func (st *intentState) leaseArg() any {
	if st == nil || !st.leased {
		return nil
	}
	return st.lease.Microseconds()
}

// release unlocks and gives the connection back; a broken connection is
// closed instead (the pool then discards it). Idempotent: it reports
// whether this call released the hold of an intent its writer did not end.
func (st *intentState) release() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.released {
		return false
	}
	st.released = true
	st.giveBackLocked()
	return !st.finished && !st.inTx
}

// expire ends the lease of intent id held with attempt, so that it is
// reconciled at once instead of when the lease would have lapsed.
func (st *intentState) expire(id string, attempt int64) {
	ctx, cancel := context.WithTimeout(context.Background(), st.cleanup)
	defer cancel()
	_, _ = st.db.Exec(ctx, `UPDATE `+st.table+` SET lease_until = clock_timestamp()
		WHERE id = $1 AND status = 'open' AND attempt = $2 AND lease_until > clock_timestamp()`, id, attempt)
}

// giveBackLocked unlocks (unless done already) and gives the connection
// back, unless a transaction still runs on it (then its end does). The
// caller holds st.mu.
func (st *intentState) giveBackLocked() {
	if st.conn == nil || st.txOpen {
		return
	}
	conn, pooled := st.conn, st.pooled
	st.conn, st.pooled = nil, nil
	done := st.unlocked || st.lockPending // nothing to unlock
	ok := done && st.lost == nil && !conn.IsClosed()
	if !done && st.lost == nil && !conn.IsClosed() {
		ctx, cancel := context.WithTimeout(context.Background(), st.cleanup)
		err := conn.QueryRow(ctx, `SELECT pg_advisory_unlock($1)`, st.key).Scan(&ok)
		cancel()
		ok = ok && err == nil
	}
	if pooled == nil {
		return // the ledger's own *pgx.Conn: never closed by the ledger
	}
	giveBack(pooled, ok, st.cleanup)
}

// BeginTx begins a transaction on the session holding the intent, for a
// write whose rows and ledger commit (CommitTx) share one transaction: it
// needs no other connection, and CommitTx in it gives up the hold in the
// same round trip as its update. ok is false (and nothing is begun) when
// the intent holds no session (no liveness) or its hold is gone: begin the
// transaction elsewhere then.
//
// While the transaction runs, the session belongs to it: Commit, Abort
// and Check go through the ledger's DB instead, and Release gives the
// session back only once the transaction has ended (committed or rolled
// back through the returned pgx.Tx). The hold itself lasts until CommitTx
// or Release; if the session breaks, the hold is lost with the
// transaction.
func (in *Intent) BeginTx(ctx context.Context, opts pgx.TxOptions) (tx pgx.Tx, ok bool, err error) {
	if in == nil || in.st == nil {
		return nil, false, nil
	}
	st := in.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.hadHold || st.conn == nil || st.txOpen || st.gone(in.ID) != nil {
		return nil, false, nil
	}
	t, err := st.conn.BeginTx(ctx, opts)
	if err != nil {
		if st.conn.IsClosed() {
			st.lost = err
		}
		return nil, true, err
	}
	st.txOpen = true
	return &heldTx{Tx: t, st: st}, true, nil
}

// heldTx is a transaction on an intent's held session: its end gives the
// session back when the hold was released meanwhile.
type heldTx struct {
	pgx.Tx
	st   *intentState
	done bool // ended; the embedded pgx.Tx is not used any more
}

func (t *heldTx) Commit(ctx context.Context) error {
	if t.done {
		return pgx.ErrTxClosed
	}
	err := t.Tx.Commit(ctx)
	t.finish()
	return err
}

func (t *heldTx) Rollback(ctx context.Context) error {
	if t.done {
		return pgx.ErrTxClosed
	}
	err := t.Tx.Rollback(ctx)
	t.finish()
	return err
}

// finish records the end of the transaction (by Commit, Rollback, or a
// COMMIT the ledger sent itself) and gives the session back when the hold
// was released meanwhile.
func (t *heldTx) finish() {
	t.done = true
	st := t.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.txOpen {
		return
	}
	st.txOpen = false
	if st.conn != nil && st.conn.IsClosed() && st.lost == nil {
		st.lost = errors.New("the session broke during its transaction")
	}
	if st.released {
		st.giveBackLocked()
	}
}

// unlockInTx reports whether tx runs on the intent's held session, and if
// so marks the lock given up by the caller (who unlocks it in tx, in the
// same round trip as its update).
func (in *Intent) unlockInTx(tx pgx.Tx) (key int64, ok bool) {
	if in == nil || in.st == nil {
		return 0, false
	}
	st := in.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.txOpen || st.conn == nil || st.unlocked || tx.Conn() != st.conn {
		return 0, false
	}
	return st.key, true
}

// markUnlocked records that the lock was given up inside the transaction.
func (in *Intent) markUnlocked() {
	in.st.mu.Lock()
	in.st.unlocked = true
	in.st.mu.Unlock()
}

// Release ends this writer's hold on the intent: the session lock is
// unlocked and the dedicated connection goes back to the pool (a broken one
// is closed); a lease is ended (one round trip, when the intent is still
// open). It does not change the intent's status: an intent still open after
// Release (say a write whose outcome is unknown) belongs to reconciliation,
// which the next Open with a Lookup, Sweep or Recover does at once, since
// its writer no longer holds it. Commit and Abort release when they return,
// CommitTx once it updated the intent (the caller's transaction holds it
// from then on); call Release yourself when you leave an intent open.
// Release is idempotent, safe for concurrent use, and a no-op for an Intent
// with no hold.
func (in *Intent) Release() {
	if in == nil || in.st == nil {
		return
	}
	if in.st.release() && in.st.leased {
		in.st.expire(in.ID, in.attempt)
	}
}

// Alive checks, in one round trip on the held connection, that this writer
// still holds the intent and that it is still open with its attempt. Call
// it right before making the write visible outside Postgres (the Iceberg
// catalog commit): an error means another process may reconcile the
// intent at any moment (or already did), so the write must not be
// published. It returns an error matching ErrLostHold (the session
// broke, or the hold was released), ErrFenced or ErrNotOpen, or the
// context's error. For an intent held by a lease, Alive renews the lease
// (Renew) on the ledger's DB: a full lease lies ahead of the publication.
//
// An intent without liveness (opened through a pgx.Tx, or rebuilt from a
// Txn) has no hold to lose: Alive returns nil (unless it was released) and
// only the attempt fence protects it.
//
// A context that ends while the check is in flight breaks the held
// connection (pgx closes a connection whose query was interrupted), and
// with it the hold.
func (in *Intent) Alive(ctx context.Context) error {
	if in == nil || in.st == nil {
		return nil
	}
	st := in.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.gone(in.ID); err != nil {
		return err
	}
	if !st.hadHold {
		if st.leased {
			return st.renew(ctx, st.db, in.ID, in.attempt)
		}
		return nil
	}
	var status string
	var attempt int64
	err := st.conn.QueryRow(ctx, `SELECT status, attempt FROM `+st.table+` WHERE id = $1`, in.ID).Scan(&status, &attempt)
	switch {
	case err != nil && st.conn.IsClosed():
		st.lost = err
		return &stateError{id: in.ID, cause: err, kind: ErrLostHold}
	case errors.Is(err, pgx.ErrNoRows):
		return &stateError{id: in.ID, kind: ErrIntentNotFound}
	case err != nil:
		return err
	case status != string(StatusOpen):
		return &stateError{id: in.ID, status: status, attempt: attempt, kind: ErrNotOpen}
	case attempt != in.attempt:
		return &stateError{id: in.ID, status: status, attempt: attempt, kind: ErrFenced}
	}
	return nil
}

// gone reports a hold that was released or lost. The caller holds st.mu.
func (st *intentState) gone(id string) error {
	switch {
	case st.lost != nil:
		return &stateError{id: id, cause: st.lost, kind: ErrLostHold}
	case st.released:
		return &stateError{id: id, cause: errReleased, kind: ErrLostHold}
	}
	return nil
}

var errReleased = errors.New("the hold was released")

// errHoldGone is returned by use when the intent's hold is already gone.
var errHoldGone = errors.New("ledger: hold gone")

// errSessionInTx is returned by use when the intent's session runs a
// transaction begun with Intent.BeginTx.
var errSessionInTx = errors.New("ledger: the intent's session runs a transaction")

// holdBroke wraps the error of a call whose held connection broke.
type holdBroke struct{ err error }

func (e *holdBroke) Error() string { return e.err.Error() }
func (e *holdBroke) Unwrap() error { return e.err }

// use runs fn on the connection holding in, or on the ledger's DB when in
// has no liveness. It returns errHoldGone when the hold was released or
// lost before, errSessionInTx while a transaction of BeginTx runs on the
// connection, and a *holdBroke when the connection broke during fn.
func (l *Ledger) use(in *Intent, fn func(db DB) error) error {
	st := in.st
	if st == nil {
		return fn(l.db)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.hadHold {
		return fn(l.db)
	}
	if st.gone(in.ID) != nil {
		return errHoldGone
	}
	if st.txOpen {
		return errSessionInTx
	}
	err := fn(st.conn)
	if err != nil && st.conn.IsClosed() {
		st.lost = err
		return &holdBroke{err: err}
	}
	return err
}

// mark records what was done through the intent (for With's misuse check).
func (in *Intent) mark(finished, inTx bool) {
	if in == nil || in.st == nil {
		return
	}
	in.st.mu.Lock()
	in.st.finished = in.st.finished || finished
	in.st.inTx = in.st.inTx || inTx
	in.st.mu.Unlock()
}

// endedByCaller reports that the intent was committed or aborted through
// this Intent (Commit, CommitTx, Abort).
func (in *Intent) endedByCaller() bool {
	if in == nil || in.st == nil {
		return false
	}
	in.st.mu.Lock()
	defer in.st.mu.Unlock()
	return in.st.finished || in.st.inTx
}
