package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/ledger"
)

// CommitTxEndAfter runs a writer's statements, then the ledger commit with
// the row count they set, then COMMIT: in one round trip on the intent's
// held session, in several otherwise (on a pool transaction, with
// expectations). A failed statement is a PriorError: nothing after it ran,
// the intent is still open and the statements' effects roll back with tx.
func TestCommitTxEndAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		held   bool
		expect bool
	}{{"held", true, false}, {"pool", false, false}, {"expectations", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var cfg *ledger.Config
			var seen []int64
			if tc.expect {
				cfg = &ledger.Config{Expectations: []ledger.Expectation{func(_ context.Context, _ pgx.Tx, c ledger.Commit) error {
					seen = append(seen, c.Outcome.RowCount)
					return nil
				}}}
			}
			l, pool := newLedger(t, cfg)
			ensure(t, l, "d")
			_, err := pool.Exec(ctx, `CREATE TABLE written (n int)`)
			require.NoError(t, err)
			begin := func(in *ledger.Intent) pgx.Tx {
				t.Helper()
				if tc.held {
					tx, ok, err := in.BeginTx(ctx, pgx.TxOptions{})
					require.NoError(t, err)
					require.True(t, ok)
					return tx
				}
				tx, err := pool.Begin(ctx)
				require.NoError(t, err)
				return tx
			}
			prior := func(failAt int) ledger.Prior {
				b := &pgx.Batch{}
				b.Queue(`DELETE FROM written`)
				if failAt == 1 {
					b.Queue(`INSERT INTO written SELECT 1 / 0`)
				} else {
					b.Queue(`INSERT INTO written SELECT g FROM generate_series(1, 7) g`)
				}
				b.Queue(`SELECT set_config($1, (SELECT count(*) FROM written)::text, true)`, ledger.RowCountSetting)
				return ledger.Prior{Batch: b, RowCountSet: true}
			}

			// A statement fails: nothing committed, the intent still open.
			in, err := l.Open(ctx, params("d"))
			require.NoError(t, err)
			held(t, in)
			tx := begin(in)
			tags, _, err := l.CommitTxEndAfter(ctx, tx, in, ledger.Outcome{Schema: []byte(`{"n":"int"}`)}, prior(1))
			var pe *ledger.PriorError
			require.True(t, errors.As(err, &pe), "%v", err)
			require.Equal(t, 1, pe.Index)
			var pgErr *pgconn.PgError
			require.True(t, errors.As(err, &pgErr))
			require.Equal(t, "22012", pgErr.Code, "division by zero")
			require.Len(t, tags, 1)
			require.NoError(t, tx.Rollback(ctx))
			got, err := l.Get(ctx, in.ID)
			require.NoError(t, err)
			require.Equal(t, ledger.StatusOpen, got.Status)
			require.NoError(t, l.Abort(ctx, in, err))

			// Then a write that lands: its rows and the ledger commit
			// together, the row count taken from the statements.
			in, err = l.Open(ctx, params("d"))
			require.NoError(t, err)
			held(t, in)
			tx = begin(in)
			tags, at, err := l.CommitTxEndAfter(ctx, tx, in, ledger.Outcome{RowCount: 999, Schema: []byte(`{"n":"int"}`)}, prior(-1))
			require.NoError(t, err)
			require.Len(t, tags, 3)
			require.EqualValues(t, 7, tags[1].RowsAffected())
			require.False(t, at.IsZero())
			_ = tx.Rollback(ctx) // harmless: tx ended
			got, err = l.Get(ctx, in.ID)
			require.NoError(t, err)
			require.Equal(t, ledger.StatusCommitted, got.Status)
			require.EqualValues(t, 7, got.RowCount)
			require.True(t, at.Equal(got.CommittedAt))
			ds, err := l.Dataset(ctx, "d")
			require.NoError(t, err)
			require.EqualValues(t, 7, ds.RowCount)
			require.True(t, at.Equal(ds.SourceWatermark))
			var n int
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM written`).Scan(&n))
			require.Equal(t, 7, n)
			if tc.expect {
				require.Equal(t, []int64{7}, seen, "expectations see the row count set")
			}
			noLeak(t, pool)
		})
	}
}

// Withdraw deletes an open intent and gives its hold up: the dataset opens
// again at once and the ledger keeps no trace of it. An intent no longer
// open is not deleted.
func TestWithdraw(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, pool := newLedger(t, nil)
	ensure(t, l, "d")
	in, err := l.Open(ctx, params("d"))
	require.NoError(t, err)
	held(t, in)
	require.True(t, lockGranted(t, pool, in.ID))
	require.NoError(t, l.Withdraw(ctx, in))
	noLeak(t, pool)
	_, err = l.Get(ctx, in.ID)
	require.Error(t, err, "no trace")
	next, err := l.Open(ctx, params("d"))
	require.NoError(t, err, "the dataset is free at once")
	held(t, next)
	require.NoError(t, l.Commit(ctx, next, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}))
	require.ErrorIs(t, l.Withdraw(ctx, next), ledger.ErrNotOpen)
	got, err := l.Get(ctx, next.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusCommitted, got.Status)
	noLeak(t, pool)
}
