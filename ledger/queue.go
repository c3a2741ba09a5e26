package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// The writers waiting to open an intent of a dataset form a queue, served
// in the order they joined it. Without one, a waiter that looks at the
// dataset between backoff sleeps can lose it for ever to writers that end
// an intent and open the next within a few milliseconds (a write followed
// by its shadow write, a loop of writes, two such writers taking turns):
// the dataset is then busy for longer than Config.WaitTimeout although no
// intent of it stays open for long.
//
// The queue is a session-level advisory lock of the dataset (queueKey),
// waited for on the waiter's held session: Postgres grants a lock to its
// waiters in the order they asked. Holding it, the head of the queue waits
// for the open intent to end (on the holder's own lock when it has one,
// so it wakes as soon as the holder lets go) and opens; it gives the queue
// lock up as soon as it opened or gave up. Every attempt to open checks
// the queue in the statement that inserts the intent: while another
// session holds the queue lock or waits for it, the insert is refused and
// the writer joins the queue behind them. Only a writer with a dedicated
// session of a pool queues; one on the ledger's *pgx.Conn or without
// liveness respects the queue and waits with backoff, and one opening
// through a pgx.Tx does not see it.

// errNoHolderLock: the holder of the dataset has no lock to wait on.
var errNoHolderLock = errors.New("ledger: the holder has no lock")

// errQueued: the insert was refused because other writers are queued for
// the dataset.
var errQueued = errors.New("ledger: writers are queued for the dataset")

// queueKey is the advisory lock key of the queue of dataset datasetID in
// schema (see lockKey on collisions: one only makes an Open wait behind an
// unrelated holder of the key).
func queueKey(schema, datasetID string) int64 {
	h := sha256.Sum256([]byte("lakewrite.queue\x00" + schema + "\x00" + datasetID))
	return int64(binary.BigEndian.Uint64(h[:8]))
}

// canQueue reports whether the writer of st can join a queue: it holds a
// dedicated pooled session.
func (st *intentState) canQueue() bool {
	return st.conn != nil && st.pooled != nil && !st.lockPending
}

// lockTimeoutUntil is the lock_timeout setting of a wait ending at end (or
// at ctx's deadline when earlier); ok is false when no time is left.
func lockTimeoutUntil(ctx context.Context, end time.Time) (setting string, ok bool) {
	if dl, has := ctx.Deadline(); has && dl.Before(end) {
		end = dl
	}
	ms := time.Until(end).Milliseconds()
	if ms < 1 {
		return "", false
	}
	return fmt.Sprintf("%dms", ms), true
}

// waitCause is the cause of a wait that ran out: the context's error when
// its deadline, not end, bounded the wait.
func waitCause(ctx context.Context, end time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, has := ctx.Deadline(); has && dl.Before(end) {
		return context.DeadlineExceeded
	}
	return nil
}

// lockTimedOut reports a lock wait that lock_timeout ended.
func lockTimedOut(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgLockNotAvailable
}

// joinQueue waits on st's session, until end at the latest, for the queue
// lock key. timedOut reports that the wait ran out (the lock is not held);
// on another error the session is marked lost, so that it is closed
// rather than reused with the lock possibly held.
func (st *intentState) joinQueue(ctx context.Context, key int64, end time.Time) (timedOut bool, err error) {
	lt, ok := lockTimeoutUntil(ctx, end)
	if !ok {
		return true, nil
	}
	_, err = st.conn.Exec(ctx, `WITH lt AS MATERIALIZED (SELECT pg_catalog.set_config('lock_timeout', $2, true))
		SELECT pg_catalog.pg_advisory_lock($1) FROM lt`, key, lt)
	if lockTimedOut(err) {
		return true, nil
	}
	if err != nil {
		st.lost = err
	}
	return false, err
}

// leaveQueue gives up the queue lock key held by st's session, within the
// clean-up bound. When that fails the session is marked lost: it is closed
// when released, which ends the lock with it.
func (st *intentState) leaveQueue(key int64) {
	if st.conn == nil || st.lost != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), st.cleanup)
	defer cancel()
	var ok bool
	err := st.conn.QueryRow(ctx, `SELECT pg_catalog.pg_advisory_unlock($1)`, key).Scan(&ok)
	if err == nil && !ok {
		err = errors.New("the queue lock was not held")
	}
	if err != nil {
		st.mu.Lock()
		st.lost = fmt.Errorf("ledger: leave the dataset's queue: %w", err)
		st.mu.Unlock()
	}
}

// awaitHolder waits on st's session, until end at the latest, for the
// holder's lock key to be let go (its intent ended, or its writer died).
// timedOut reports that the wait ran out.
func (st *intentState) awaitHolder(ctx context.Context, key int64, end time.Time) (timedOut bool, err error) {
	lt, ok := lockTimeoutUntil(ctx, end)
	if !ok {
		return true, nil
	}
	_, err = st.conn.Exec(ctx, `WITH lt AS MATERIALIZED (SELECT pg_catalog.set_config('lock_timeout', $2, true)),
		w AS MATERIALIZED (SELECT pg_catalog.pg_advisory_lock_shared($1) FROM lt)
		SELECT pg_catalog.pg_advisory_unlock_shared($1) FROM w`, key, lt)
	if lockTimedOut(err) {
		return true, nil
	}
	if err != nil {
		st.lost = err
	}
	return false, err
}
