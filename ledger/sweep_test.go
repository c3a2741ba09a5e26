package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/ledger"
)

// Intents without liveness (rows older than liveness, or opened through a
// pgx.Tx: neither a session lock nor a lease) are reconciled by age only.
func TestSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, pool := newLedger(t, &ledger.Config{Liveness: ledger.LivenessOff})
	ensure(t, l, "landed", "absent", "unknown", "fresh")

	open := func(ds string) *ledger.Intent {
		in, err := l.Open(ctx, params(ds))
		require.NoError(t, err)
		return in
	}
	landed, absent, unknown, fresh := open("landed"), open("absent"), open("unknown"), open("fresh")
	// Rows without liveness; all but "fresh" aged by an hour.
	_, err := pool.Exec(ctx, `UPDATE lakewrite.pipeline_build_transactions SET lease_until = NULL`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE lakewrite.pipeline_build_transactions SET created_at = created_at - interval '1 hour' WHERE dataset_id <> 'fresh'`)
	require.NoError(t, err)

	snapTime := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	catalogDown := errors.New("catalog unreachable")
	var asked []string
	lookup := func(ctx context.Context, in ledger.Intent) (ledger.Landing, error) {
		asked = append(asked, in.DatasetID)
		switch in.DatasetID {
		case "landed":
			return ledger.Landing{Landed: true, Outcome: ledger.Outcome{RowCount: 99, SnapshotID: 1234, CommittedAt: snapTime}}, nil
		case "absent":
			return ledger.Landing{}, nil
		default:
			return ledger.Landing{}, catalogDown
		}
	}
	rep, err := l.Sweep(ctx, ledger.SweepParams{OlderThan: 30 * time.Minute, Lookup: lookup})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"landed", "absent", "unknown"}, asked, "fresh intents are not swept")
	require.Len(t, rep.RolledForward, 1)
	require.Equal(t, landed.ID, rep.RolledForward[0].ID)
	require.Len(t, rep.Aborted, 1)
	require.Equal(t, absent.ID, rep.Aborted[0].ID)
	require.Len(t, rep.Unresolved, 1)
	require.Equal(t, unknown.ID, rep.Unresolved[0].Intent.ID)
	require.ErrorIs(t, rep.Unresolved[0].Err, catalogDown)

	got, err := l.Get(ctx, landed.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusCommitted, got.Status)
	require.Equal(t, int64(99), got.RowCount)
	require.True(t, got.CommittedAt.Equal(snapTime))
	ds, err := l.Dataset(ctx, "landed")
	require.NoError(t, err)
	require.True(t, ds.SourceWatermark.Equal(snapTime))

	got, err = l.Get(ctx, absent.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusAborted, got.Status)
	ds, err = l.Dataset(ctx, "absent")
	require.NoError(t, err)
	require.True(t, ds.SourceWatermark.IsZero(), "abort leaves the watermark")

	got, err = l.Get(ctx, unknown.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusOpen, got.Status, "unknown is never aborted blindly")

	// The original writers are fenced out: a swept intent cannot commit.
	err = l.Commit(ctx, unknown, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()})
	require.ErrorIs(t, err, ledger.ErrFenced)
	require.ErrorIs(t, l.Abort(ctx, unknown, nil), ledger.ErrFenced)
	require.ErrorIs(t, l.Commit(ctx, absent, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}), ledger.ErrNotOpen)
	require.ErrorIs(t, l.Commit(ctx, landed, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}), ledger.ErrNotOpen)

	// The fresh intent's writer is untouched.
	require.NoError(t, l.Commit(ctx, fresh, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}))

	// Recover for one dataset: the catalog is back and the write is absent.
	rep, err = l.Recover(ctx, "unknown", 30*time.Minute, func(ctx context.Context, in ledger.Intent) (ledger.Landing, error) {
		return ledger.Landing{}, nil
	})
	require.NoError(t, err)
	require.Len(t, rep.Aborted, 1)
	_, err = l.Open(ctx, params("unknown"))
	require.NoError(t, err, "the dataset is free after Recover")

	_, err = l.Sweep(ctx, ledger.SweepParams{OlderThan: time.Minute})
	require.ErrorIs(t, err, ledger.ErrInvalid)
	_, err = l.Sweep(ctx, ledger.SweepParams{OlderThan: -time.Minute, Lookup: lookup})
	require.ErrorIs(t, err, ledger.ErrInvalid)
	// OlderThan zero: only intents whose writer is gone; these have no
	// liveness, so nothing is swept.
	asked = nil
	_, err = pool.Exec(ctx, `UPDATE lakewrite.pipeline_build_transactions SET created_at = created_at - interval '1 hour' WHERE status = 'open'`)
	require.NoError(t, err)
	rep, err = l.Sweep(ctx, ledger.SweepParams{Lookup: lookup})
	require.NoError(t, err)
	require.Empty(t, asked)
	require.Empty(t, rep.Aborted)
}

func TestCommittedWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, _ := newLedger(t, nil)
	ensure(t, l, "d", "other")
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ids []string
	for i := 1; i <= 5; i++ {
		in, err := l.Open(ctx, params("d"))
		require.NoError(t, err)
		require.NoError(t, l.Commit(ctx, in, ledger.Outcome{RowCount: int64(i), CommittedAt: base.Add(time.Duration(i) * time.Minute)}))
		ids = append(ids, in.ID)
	}
	in, err := l.Open(ctx, params("other"))
	require.NoError(t, err)
	require.NoError(t, l.Commit(ctx, in, ledger.Outcome{RowCount: 1, CommittedAt: base.Add(2 * time.Minute)}))
	aborted, err := l.Open(ctx, params("d"))
	require.NoError(t, err)
	require.NoError(t, l.Abort(ctx, aborted, nil))

	got, err := l.Committed(ctx, "d", base.Add(time.Minute), base.Add(3*time.Minute))
	require.NoError(t, err)
	require.Len(t, got, 2) // (1m, 3m] holds 2m and 3m
	require.Equal(t, ids[1], got[0].ID)
	require.Equal(t, ids[2], got[1].ID)

	all, err := l.Committed(ctx, "d", time.Time{}, base.Add(time.Hour))
	require.NoError(t, err)
	require.Len(t, all, 5)

	oldest, ok, err := l.OldestOpen(ctx, "d")
	require.NoError(t, err)
	require.False(t, ok)
	require.True(t, oldest.IsZero())
	open, err := l.Open(ctx, params("d"))
	require.NoError(t, err)
	defer open.Release()
	oldest, ok, err = l.OldestOpen(ctx, "d")
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, oldest.Equal(open.CreatedAt))

	_, err = l.Committed(ctx, "d", base.Add(time.Hour), base)
	require.ErrorIs(t, err, ledger.ErrInvalid)
}
