package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/ledger"
)

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
