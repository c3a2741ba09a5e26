package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/ledger"
)

// lastIntent returns the dataset's most recent intent.
func lastIntent(t *testing.T, l *ledger.Ledger, pool *pgxpool.Pool, ds string) ledger.Txn {
	t.Helper()
	var id string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT id::text FROM lakewrite.pipeline_build_transactions
		WHERE dataset_id = $1 ORDER BY created_at DESC LIMIT 1`, ds).Scan(&id))
	txn, err := l.Get(context.Background(), id)
	require.NoError(t, err)
	return txn
}

// With aborts a write that fails after the clean-up timeout, or after the
// caller's context ended: the clean-up context is made when fn returns.
func TestWithLateFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, pool := newLedger(t, ledger.WithCleanupTimeout(&ledger.Config{}, 100*time.Millisecond))
	ensure(t, l, "d")

	late := errors.New("failed after a long write")
	_, err := l.With(ctx, params("d"), func(ctx context.Context, in *ledger.Intent) (ledger.Outcome, error) {
		time.Sleep(300 * time.Millisecond) // longer than the clean-up timeout
		return ledger.Outcome{}, late
	})
	require.ErrorIs(t, err, late)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	txn := lastIntent(t, l, pool, "d")
	require.Equal(t, ledger.StatusAborted, txn.Status)
	require.Equal(t, late.Error(), txn.Error)
	noLeak(t, pool)

	cctx, cancel := context.WithCancel(ctx)
	_, err = l.With(cctx, params("d"), func(ctx context.Context, in *ledger.Intent) (ledger.Outcome, error) {
		cancel()
		return ledger.Outcome{}, ctx.Err()
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, ledger.StatusAborted, lastIntent(t, l, pool, "d").Status)
	noLeak(t, pool)

	// Outcome unknown: left open, but no longer held, so the next Open
	// with a Lookup reconciles it at once.
	_, err = l.With(ctx, params("d"), func(ctx context.Context, in *ledger.Intent) (ledger.Outcome, error) {
		return ledger.Outcome{}, ledger.ErrOutcomeUnknown
	})
	require.ErrorIs(t, err, ledger.ErrOutcomeUnknown)
	unknown := lastIntent(t, l, pool, "d")
	require.Equal(t, ledger.StatusOpen, unknown.Status)
	noLeak(t, pool)
	p := params("d")
	p.Lookup = absent
	long, err := ledger.New(pool, &ledger.Config{WaitTimeout: longWait})
	require.NoError(t, err)
	next, took := openTimed(t, long, p)
	require.Less(t, took, livenessBound)
	got, err := l.Get(ctx, unknown.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusAborted, got.Status)
	require.NoError(t, l.Abort(ctx, next, nil))
	noLeak(t, pool)
}

// fn committing the intent itself inside With is a clear error, not a
// confusing ErrNotOpen after a successful write.
func TestWithCommitTxIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, pool := newLedger(t, nil)
	ensure(t, l, "d")
	for _, commit := range []bool{true, false} {
		_, err := l.With(ctx, params("d"), func(ctx context.Context, in *ledger.Intent) (ledger.Outcome, error) {
			out := ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}
			return out, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if err := l.CommitTx(ctx, tx, in, out); err != nil {
					return err
				}
				if !commit {
					return errRolledBack
				}
				return nil
			})
		})
		txn := lastIntent(t, l, pool, "d")
		if commit {
			require.ErrorIs(t, err, ledger.ErrInvalid)
			require.Contains(t, err.Error(), "WithTx")
			require.Contains(t, err.Error(), "is committed")
			require.Equal(t, ledger.StatusCommitted, txn.Status, "the caller's commit stands")
		} else {
			require.ErrorIs(t, err, errRolledBack, "fn's own error")
			require.Equal(t, ledger.StatusAborted, txn.Status)
		}
		noLeak(t, pool)
	}
	// fn returning success after its transaction rolled back: the intent
	// is still open; With refuses and aborts it.
	_, err := l.With(ctx, params("d"), func(ctx context.Context, in *ledger.Intent) (ledger.Outcome, error) {
		out := ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}
		tx, err := pool.Begin(ctx)
		if err != nil {
			return out, err
		}
		if err := l.CommitTx(ctx, tx, in, out); err != nil {
			return out, err
		}
		return out, tx.Rollback(ctx)
	})
	require.ErrorIs(t, err, ledger.ErrInvalid)
	require.Contains(t, err.Error(), "now aborted")
	require.Equal(t, ledger.StatusAborted, lastIntent(t, l, pool, "d").Status)
	noLeak(t, pool)
}

var errRolledBack = errors.New("rolled back")

func TestWithTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, pool := newLedger(t, &ledger.Config{Expectations: []ledger.Expectation{atLeast10(nil)}})
	ensure(t, l, "d")
	rows := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.dataset_rows WHERE dataset_id = 'd'`).Scan(&n))
		return n
	}
	write := func(n int64, fail error, panicking bool) (ledger.Outcome, error) {
		return l.WithTx(ctx, params("d"), func(ctx context.Context, tx pgx.Tx, in *ledger.Intent) (ledger.Outcome, error) {
			if _, err := tx.Exec(ctx, `INSERT INTO lakewrite.dataset_rows (dataset_id, row_index, data, txn_id)
				SELECT 'd', g, '{}', $1 FROM generate_series(1, $2) g
				ON CONFLICT (dataset_id, row_index) DO UPDATE SET txn_id = excluded.txn_id`, in.ID, n); err != nil {
				return ledger.Outcome{}, err
			}
			if panicking {
				panic("kaboom")
			}
			return ledger.Outcome{RowCount: n, CommittedAt: time.Now()}, fail
		})
	}

	out, err := write(12, nil, false)
	require.NoError(t, err)
	require.Equal(t, int64(12), out.RowCount)
	ok := lastIntent(t, l, pool, "d")
	require.Equal(t, ledger.StatusCommitted, ok.Status)
	require.Equal(t, 12, rows())
	ds, err := l.Dataset(ctx, "d")
	require.NoError(t, err)
	require.Equal(t, int64(12), ds.RowCount)
	noLeak(t, pool)

	boom := errors.New("boom")
	_, err = write(20, boom, false)
	require.ErrorIs(t, err, boom)
	txn := lastIntent(t, l, pool, "d")
	require.Equal(t, ledger.StatusAborted, txn.Status)
	require.Equal(t, "boom", txn.Error)
	require.Equal(t, 12, rows(), "the failed write's rows rolled back")
	noLeak(t, pool)

	_, err = write(3, nil, false)
	require.ErrorIs(t, err, ledger.ErrVetoed)
	require.ErrorIs(t, err, errTooFew)
	txn = lastIntent(t, l, pool, "d")
	require.Equal(t, ledger.StatusAborted, txn.Status)
	require.Contains(t, txn.Error, "expected at least 10 rows")
	require.Equal(t, 12, rows())
	noLeak(t, pool)

	require.PanicsWithValue(t, "kaboom", func() { _, _ = write(30, nil, true) })
	txn = lastIntent(t, l, pool, "d")
	require.Equal(t, ledger.StatusAborted, txn.Status)
	require.Contains(t, txn.Error, "kaboom")
	require.Equal(t, 12, rows())
	noLeak(t, pool)

	// fn must not commit the intent itself.
	_, err = l.WithTx(ctx, params("d"), func(ctx context.Context, tx pgx.Tx, in *ledger.Intent) (ledger.Outcome, error) {
		out := ledger.Outcome{RowCount: 11, CommittedAt: time.Now()}
		return out, l.CommitTx(ctx, tx, in, out)
	})
	require.ErrorIs(t, err, ledger.ErrInvalid)
	require.Equal(t, ledger.StatusAborted, lastIntent(t, l, pool, "d").Status)
	noLeak(t, pool)

	ds2, err := l.Dataset(ctx, "d")
	require.NoError(t, err)
	require.True(t, ds2.SourceWatermark.Equal(ds.SourceWatermark), "no failed write moved the watermark")
}

// CommitTx hands the hold over to the caller's transaction: the held
// connection goes back at once, the intent cannot be reconciled while the
// transaction runs, and a rolled-back transaction leaves an intent that is
// reconciled at once.
func TestCommitTxHandsOverToTheTransaction(t *testing.T) {
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
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, l.CommitTx(ctx, tx, in, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}))
		require.Equal(t, int32(1), pool.Stat().AcquiredConns(), "only the transaction's connection")
		_, err = l.Open(ctx, p)
		require.ErrorIs(t, err, ledger.ErrBusy, "the transaction holds the intent")
		require.Zero(t, asked)
		if commit {
			require.NoError(t, tx.Commit(ctx))
			require.Equal(t, ledger.StatusCommitted, lastIntent(t, l, pool, "d").Status)
			continue
		}
		require.NoError(t, tx.Rollback(ctx))
		next, err := l.Open(ctx, p)
		require.NoError(t, err)
		held(t, next)
		require.Equal(t, 1, asked)
		got, err := l.Get(ctx, in.ID)
		require.NoError(t, err)
		require.Equal(t, ledger.StatusAborted, got.Status)
		require.NoError(t, l.Abort(ctx, next, nil))
	}
	noLeak(t, pool)
}
