package ledger_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/ledger"
)

// lockGranted reports whether the session lock recorded on intent id is
// held by any session.
func lockGranted(t *testing.T, pool *pgxpool.Pool, id string) bool {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks k
		JOIN lakewrite.pipeline_build_transactions t ON ((k.classid::bigint << 32) | k.objid::bigint) = t.lock_key
		WHERE t.id = $1 AND k.locktype = 'advisory' AND k.objsubid = 1 AND k.granted`, id).Scan(&n))
	return n > 0
}

// A transaction begun on the intent's held session needs no other
// connection; CommitTxNow in it stamps the database clock and gives up the
// hold at once (the transaction holds the intent until it ends); the
// session goes back to the pool when the transaction ends.
func TestBeginTxOnHeldSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, pool := newLedger(t, ledger.WithLockTimeout(&ledger.Config{WaitTimeout: 500 * time.Millisecond}, 100*time.Millisecond))
	ensure(t, l, "d")
	asked := 0
	p := params("d")
	p.Lookup = func(ctx context.Context, in ledger.Intent) (ledger.Landing, error) {
		asked++
		return ledger.Landing{}, nil
	}

	for _, commit := range []bool{true, false} {
		in, err := l.Open(ctx, params("d"))
		require.NoError(t, err)
		held(t, in)
		tx, ok, err := in.BeginTx(ctx, pgx.TxOptions{})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, int32(1), pool.Stat().AcquiredConns(), "the transaction runs on the held session")
		_, _, err = in.BeginTx(ctx, pgx.TxOptions{})
		require.NoError(t, err)
		require.ErrorIs(t, l.Commit(ctx, in, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}), ledger.ErrInvalid,
			"the session is the transaction's")
		require.True(t, lockGranted(t, pool, in.ID))

		_, err = l.CommitTxNow(ctx, tx, in, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()})
		require.ErrorIs(t, err, ledger.ErrInvalid, "the clock sets the commit time")
		at, err := l.CommitTxNow(ctx, tx, in, ledger.Outcome{RowCount: 3})
		require.NoError(t, err)
		require.False(t, at.IsZero())
		require.False(t, lockGranted(t, pool, in.ID), "the hold was given up with the update")
		_, err = l.Open(ctx, p)
		require.ErrorIs(t, err, ledger.ErrBusy, "the transaction holds the intent")
		require.Zero(t, asked)
		require.Equal(t, int32(1), pool.Stat().AcquiredConns(), "the session is back once the transaction ends")
		if commit {
			require.NoError(t, tx.Commit(ctx))
			noLeak(t, pool)
			got, err := l.Get(ctx, in.ID)
			require.NoError(t, err)
			require.Equal(t, ledger.StatusCommitted, got.Status)
			require.True(t, at.Equal(got.CommittedAt), "stamped %v, returned %v", got.CommittedAt, at)
			ds, err := l.Dataset(ctx, "d")
			require.NoError(t, err)
			require.EqualValues(t, 3, ds.RowCount)
			require.True(t, at.Equal(ds.SourceWatermark))
			continue
		}
		require.NoError(t, tx.Rollback(ctx))
		noLeak(t, pool)
		next, err := l.Open(ctx, p)
		require.NoError(t, err)
		held(t, next)
		require.Equal(t, 1, asked, "rolled back: open, held by nobody, reconciled at once")
		got, err := l.Get(ctx, in.ID)
		require.NoError(t, err)
		require.Equal(t, ledger.StatusAborted, got.Status)
		require.NoError(t, l.Abort(ctx, next, nil))
	}

	// Released while its transaction runs: the session goes back when the
	// transaction ends; the intent can still be aborted.
	in, err := l.Open(ctx, params("d"))
	require.NoError(t, err)
	tx, ok, err := in.BeginTx(ctx, pgx.TxOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	in.Release()
	require.Equal(t, int32(1), pool.Stat().AcquiredConns())
	_, ok, err = in.BeginTx(ctx, pgx.TxOptions{})
	require.NoError(t, err)
	require.False(t, ok, "released: nothing to begin on")
	require.NoError(t, tx.Rollback(ctx))
	noLeak(t, pool)
	require.False(t, lockGranted(t, pool, in.ID))
	require.NoError(t, l.Abort(ctx, in, nil))
	noLeak(t, pool)
}

// An intent whose lock key is held by another session (a live holder of
// the same id elsewhere, or a collision) is opened without liveness: no
// lock key recorded, no session kept.
func TestOpenLockRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, pool := newLedger(t, nil)
	ensure(t, l, "d")
	id := ledger.NewID()
	h := sha256.Sum256([]byte("lakewrite.intent\x00lakewrite\x00" + id))
	other, err := pool.Acquire(ctx)
	require.NoError(t, err)
	_, err = other.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(binary.BigEndian.Uint64(h[:8])))
	require.NoError(t, err)

	p := params("d")
	p.SetID(id)
	in, err := l.Open(ctx, p)
	require.NoError(t, err)
	held(t, in)
	require.Equal(t, int32(1), pool.Stat().AcquiredConns(), "only the other session")
	var key *int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT lock_key FROM lakewrite.pipeline_build_transactions WHERE id = $1`, id).Scan(&key))
	require.Nil(t, key)
	_, ok, err := in.BeginTx(ctx, pgx.TxOptions{})
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, in.Alive(ctx))
	require.NoError(t, l.Commit(ctx, in, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}))
	_, err = other.Exec(ctx, `SELECT pg_advisory_unlock_all()`)
	require.NoError(t, err)
	other.Release()
	noLeak(t, pool)
}

// RecoverDataset reads the dataset with the intents it reconciles: a dead
// writer's landed intent is rolled forward and the row returned is the
// one after it; a live writer's intent is left alone; an unknown dataset
// is ErrDatasetNotFound.
func TestRecoverDataset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, pool := newLedger(t, nil)
	ensure(t, l, "d", "live")
	at := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)

	var answer int
	ds, rep, err := l.RecoverDataset(ctx, "d", time.Minute, absent, func(b *pgx.Batch) func(pgx.BatchResults) error {
		b.Queue(`SELECT 41 + 1`)
		return func(br pgx.BatchResults) error { return br.QueryRow().Scan(&answer) }
	})
	require.NoError(t, err)
	require.Equal(t, 42, answer, "the caller's read went in the same batch")
	require.Equal(t, "d", ds.ID)
	require.Equal(t, "d name", ds.Name)
	require.Zero(t, len(rep.RolledForward)+len(rep.Aborted)+len(rep.Unresolved)+len(rep.Live))

	dead, err := l.Open(ctx, params("d"))
	require.NoError(t, err)
	dead.Release() // its writer is gone
	ds, rep, err = l.RecoverDataset(ctx, "d", time.Minute, landedAt(at, 42))
	require.NoError(t, err)
	require.Len(t, rep.RolledForward, 1)
	require.Equal(t, dead.ID, rep.RolledForward[0].ID)
	require.EqualValues(t, 42, ds.RowCount, "the row after the roll-forward")
	require.True(t, ds.SourceWatermark.Equal(at))

	alive := held(t, mustOpen(t, l, params("live")))
	ds, rep, err = l.RecoverDataset(ctx, "live", 0, absent)
	require.NoError(t, err)
	require.Equal(t, "live", ds.ID)
	require.Len(t, rep.Live, 1)
	require.Equal(t, alive.ID, rep.Live[0].ID)
	require.NoError(t, l.Abort(ctx, alive, nil))

	_, _, err = l.RecoverDataset(ctx, "nope", 0, absent)
	require.ErrorIs(t, err, ledger.ErrDatasetNotFound)
	_, _, err = l.RecoverDataset(ctx, "d", 0, nil)
	require.ErrorIs(t, err, ledger.ErrInvalid)
	_, _, err = l.RecoverDataset(ctx, "", 0, absent)
	require.ErrorIs(t, err, ledger.ErrInvalid)
	noLeak(t, pool)
}

func mustOpen(t *testing.T, l *ledger.Ledger, p ledger.OpenParams) *ledger.Intent {
	t.Helper()
	in, err := l.Open(context.Background(), p)
	require.NoError(t, err)
	return in
}

// CommitTxEnd commits the intent and its transaction together: in one
// round trip on the intent's own session, or CommitTx then Commit on any
// other transaction. A refused ledger commit never commits the
// transaction.
func TestCommitTxEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, pool := newLedger(t, nil)
	ensure(t, l, "d")
	rename := func(tx pgx.Tx, name string) {
		t.Helper()
		_, err := tx.Exec(ctx, `UPDATE lakewrite.datasets SET name = $1 WHERE id = 'd'`, name)
		require.NoError(t, err)
	}
	name := func() string {
		t.Helper()
		ds, err := l.Dataset(ctx, "d")
		require.NoError(t, err)
		return ds.Name
	}

	for _, onSession := range []bool{true, false} {
		in := held(t, mustOpen(t, l, params("d")))
		var tx pgx.Tx
		if onSession {
			var ok bool
			var err error
			tx, ok, err = in.BeginTx(ctx, pgx.TxOptions{})
			require.NoError(t, err)
			require.True(t, ok)
		} else {
			var err error
			tx, err = pool.Begin(ctx)
			require.NoError(t, err)
		}
		rename(tx, "renamed")
		at, err := l.CommitTxEnd(ctx, tx, in, ledger.Outcome{RowCount: 5})
		require.NoError(t, err)
		require.ErrorIs(t, tx.Commit(ctx), pgx.ErrTxClosed, "committed already")
		require.ErrorIs(t, tx.Rollback(ctx), pgx.ErrTxClosed)
		noLeak(t, pool)
		got, err := l.Get(ctx, in.ID)
		require.NoError(t, err)
		require.Equal(t, ledger.StatusCommitted, got.Status)
		require.True(t, at.Equal(got.CommittedAt))
		require.Equal(t, "renamed", name(), "the transaction's own write committed")
		require.False(t, lockGranted(t, pool, in.ID))

		// Refused: the intent was aborted meanwhile; the transaction is
		// left open and usable, and commits nothing.
		in = held(t, mustOpen(t, l, params("d")))
		if onSession {
			var ok bool
			tx, ok, err = in.BeginTx(ctx, pgx.TxOptions{})
			require.NoError(t, err)
			require.True(t, ok)
		} else {
			tx, err = pool.Begin(ctx)
			require.NoError(t, err)
		}
		rename(tx, "lost")
		// An operator aborts it through a value that holds nothing.
		txn, err := l.Get(ctx, in.ID)
		require.NoError(t, err)
		other := txn.AsIntent()
		require.NoError(t, l.Abort(ctx, other, nil))
		_, err = l.CommitTxEnd(ctx, tx, in, ledger.Outcome{RowCount: 5, CommittedAt: time.Now()})
		require.ErrorIs(t, err, ledger.ErrNotOpen)
		rename(tx, "still usable")
		require.NoError(t, tx.Rollback(ctx))
		require.Equal(t, "renamed", name())
		in.Release()
		noLeak(t, pool)
	}
}

// Open's Reads run in the round trip of the intent's insert, on its held
// session, and see the insert; a read the server refuses fails Open with
// nothing left open; a Scan's own error is not Open's. Without a held
// session (liveness off) they do not run.
func TestOpenReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, pool := newLedger(t, nil)
	ensure(t, l, "d", "e", "f")

	var open int
	var session *pgx.Conn
	p := params("d")
	p.Reads = []ledger.Read{{
		SQL:  `SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE dataset_id = $1 AND status = 'open'`,
		Args: []any{"d"},
		Scan: func(rows pgx.Rows) error {
			session = rows.Conn()
			for rows.Next() {
				if err := rows.Scan(&open); err != nil {
					return err
				}
			}
			return rows.Err()
		},
	}}
	in, err := l.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, 1, open, "the read saw the intent it was sent with")
	tx, ok, err := in.BeginTx(ctx, pgx.TxOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	require.Same(t, session, tx.Conn(), "on the session the intent's transaction runs on")
	require.NoError(t, tx.Rollback(ctx))
	require.NoError(t, l.Commit(ctx, in, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}))

	// Refused by the server: Open fails, the dataset has no intent.
	p = params("e")
	p.Reads = []ledger.Read{{SQL: `SELECT 1/0`}}
	_, err = l.Open(ctx, p)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "22012", pgErr.Code)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE dataset_id = 'e'`).Scan(&n))
	require.Zero(t, n, "the insert was undone with the read")
	in, err = l.Open(ctx, params("e"))
	require.NoError(t, err, "nothing held")
	require.NoError(t, l.Abort(ctx, in, errors.New("done")))

	// A Scan failing on the client is the caller's: the intent is open.
	p = params("f")
	p.Reads = []ledger.Read{{SQL: `SELECT 'x'`, Scan: func(rows pgx.Rows) error {
		var i int
		for rows.Next() {
			if err := rows.Scan(&i); err != nil {
				return err
			}
		}
		return rows.Err()
	}}}
	in, err = l.Open(ctx, p)
	require.NoError(t, err)
	held(t, in)
	require.NoError(t, l.Commit(ctx, in, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}))

	// No held session: the reads do not run.
	off, _ := newLedger(t, &ledger.Config{Liveness: ledger.LivenessLease})
	ensure(t, off, "g")
	ran := false
	p = params("g")
	p.Reads = []ledger.Read{{SQL: `SELECT 1`, Scan: func(pgx.Rows) error { ran = true; return nil }}}
	in, err = off.Open(ctx, p)
	require.NoError(t, err)
	require.False(t, ran)
	require.NoError(t, off.Abort(ctx, in, errors.New("done")))
	noLeak(t, pool)
}
