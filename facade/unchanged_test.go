package facade

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// Unchanged: a table holds the rows of a snapshot while it is the head or
// only compactions follow it (even once it is expired); a write after it,
// a rollback past it or a dropped table do not.
func TestUnchanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newCompactEnv(t).f
	const ds = "unchanged"
	why, err := f.Unchanged(ctx, ds, 1)
	require.NoError(t, err)
	require.Contains(t, why, "does not exist")

	plainWrite(t, f, ds, Append, idRange(0, 100))
	first := headID(t, f, ds)
	plainWrite(t, f, ds, Append, idRange(100, 200))
	second := headID(t, f, ds)
	why, err = f.Unchanged(ctx, ds, second)
	require.NoError(t, err)
	require.Empty(t, why, "the head")
	why, err = f.Unchanged(ctx, ds, first)
	require.NoError(t, err)
	require.Contains(t, why, "a write after it")

	rep, err := f.MaintainWith(ctx, ds, Lifecycle{CompactMinFiles: 2, KeepLast: 1, EveryCommits: 1, FileGrace: -1, OrphanEvery: -1})
	require.NoError(t, err)
	require.NotZero(t, rep.CompactedFiles)
	require.NotEqual(t, second, headID(t, f, ds))
	why, err = f.Unchanged(ctx, ds, second)
	require.NoError(t, err)
	require.Empty(t, why, "only a compaction after it, which expired it")
	why, err = f.Unchanged(ctx, ds, first)
	require.NoError(t, err)
	require.NotEmpty(t, why, "a write after it, expired")

	_, err = f.DropTable(ctx, ds)
	require.NoError(t, err)
	plainWrite(t, f, ds, Append, idRange(0, 10))
	why, err = f.Unchanged(ctx, ds, second)
	require.NoError(t, err)
	require.NotEmpty(t, why, "a table created again")
}

// A table rolled back past a snapshot does not hold its rows; rolled back
// to it, it does.
func TestUnchangedRollback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newCompactEnv(t).f
	const ds = "rolledback"
	plainWrite(t, f, ds, Append, idRange(0, 100))
	first := headID(t, f, ds)
	plainWrite(t, f, ds, Append, idRange(100, 200))
	second := headID(t, f, ds)
	tbl, err := f.LoadTable(ctx, ds)
	require.NoError(t, err)
	txn := tbl.NewTransaction()
	require.NoError(t, txn.RollbackToSnapshot(first))
	_, err = txn.Commit(ctx)
	require.NoError(t, err)
	require.Equal(t, first, headID(t, f, ds))
	why, err := f.Unchanged(ctx, ds, second)
	require.NoError(t, err)
	require.Contains(t, why, "a rollback")
	why, err = f.Unchanged(ctx, ds, first)
	require.NoError(t, err)
	require.Empty(t, why)
}
