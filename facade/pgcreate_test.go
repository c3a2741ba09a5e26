package facade_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/internal/contract"
)

// stage stages n rows for dataset on the Postgres catalog's facade.
func (e *pgCatalogEnv) stage(t *testing.T, dataset string, mode facade.WriteMode, n int) facade.Staged {
	t.Helper()
	sc := contract.Schema()
	bs := contract.Batches(e.mem, sc, 0, n, 100, n)
	defer func() {
		for _, b := range bs {
			b.Release()
		}
	}()
	st, err := e.viaPG.Stage(context.Background(), facade.Target{DatasetID: dataset, WriterID: "w"},
		facade.WriteRequest{Mode: mode, Schema: sc, Rows: contract.Seq(bs)})
	require.NoError(t, err)
	return st
}

func localPath(p string) string { return strings.TrimPrefix(p, "file://") }

// TestPostgresCatalogFirstCommitCreatesTable: on the catalog of NewPostgresCatalog the
// first write's commit creates the table, with its snapshot in its first
// metadata file; a write that rolls back or aborts leaves no table.
func TestPostgresCatalogFirstCommitCreatesTable(t *testing.T) {
	e := newPGCatalogEnv(t, false)
	ctx := context.Background()

	// Staged and committed into a transaction that rolls back: no table,
	// and Abort deletes the data files.
	st := e.stage(t, "fresh", facade.Replace, 250)
	_, err := e.viaPG.LoadTable(ctx, "fresh")
	require.ErrorIs(t, err, facade.ErrTableNotFound, "staging creates nothing")
	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	res, err := st.(facade.TxStaged).CommitTx(ctx, tx)
	require.NoError(t, err)
	require.EqualValues(t, 250, res.Rows)
	require.NoError(t, tx.Rollback(ctx))
	require.NoError(t, st.Abort(ctx))
	_, err = e.viaPG.LoadTable(ctx, "fresh")
	require.ErrorIs(t, err, facade.ErrTableNotFound, "the creation rolled back")
	for _, df := range st.Info().DataFiles {
		_, err := os.Stat(localPath(df.Path))
		require.ErrorIs(t, err, os.ErrNotExist, df.Path)
	}

	// Committed: the table exists with the snapshot in its first metadata
	// file, the only one.
	st = e.stage(t, "fresh", facade.Replace, 300)
	tx, err = e.pool.Begin(ctx)
	require.NoError(t, err)
	res, err = st.(facade.TxStaged).CommitTx(ctx, tx)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	tbl, err := e.viaPG.LoadTable(ctx, "fresh")
	require.NoError(t, err)
	require.NotNil(t, tbl.CurrentSnapshot())
	require.Equal(t, res.SnapshotID, tbl.CurrentSnapshot().SnapshotID)
	require.Contains(t, filepath.Base(tbl.MetadataLocation()), "00000-")
	prev := 0
	for range tbl.Metadata().PreviousFiles() {
		prev++
	}
	require.Zero(t, prev, "the first metadata file holds the first snapshot")
	// The rolled-back commit's metadata file is left unreferenced (the
	// lifecycle's orphan pass removes such files); nothing else was written.
	metas, err := filepath.Glob(filepath.Join(filepath.Dir(localPath(tbl.MetadataLocation())), "*.metadata.json"))
	require.NoError(t, err)
	require.Len(t, metas, 2)
	require.Contains(t, metas, localPath(tbl.MetadataLocation()))
	require.EqualValues(t, 300, scanRows(t, e.pg, tbl.Identifier()))
	sum, err := e.viaPG.Checksum(ctx, "fresh", 0)
	require.NoError(t, err)
	require.Equal(t, res.Checksum, sum)

	// Two first writes staged before either commits: the second finds the
	// table created and commits on top of it (a clean conflict, retried).
	a := e.stage(t, "race", facade.Replace, 100)
	b := e.stage(t, "race", facade.Replace, 120)
	ra, err := a.Commit(ctx)
	require.NoError(t, err)
	rb, err := b.Commit(ctx)
	require.NoError(t, err)
	tbl, err = e.viaPG.LoadTable(ctx, "race")
	require.NoError(t, err)
	require.Equal(t, rb.SnapshotID, tbl.CurrentSnapshot().SnapshotID)
	require.NotEqual(t, ra.SnapshotID, rb.SnapshotID)
	require.EqualValues(t, 120, scanRows(t, e.pg, tbl.Identifier()))

	// A pending table in a multi-table commit.
	c := e.stage(t, "multi_a", facade.Append, 10)
	d := e.stage(t, "multi_b", facade.Replace, 20)
	rs, err := e.viaPG.CommitAll(ctx, c, d)
	require.NoError(t, err)
	require.Len(t, rs, 2)
	for i, ds := range []string{"multi_a", "multi_b"} {
		tbl, err := e.viaPG.LoadTable(ctx, ds)
		require.NoError(t, err)
		require.Equal(t, rs[i].SnapshotID, tbl.CurrentSnapshot().SnapshotID)
		require.EqualValues(t, 10*(i+1), scanRows(t, e.pg, tbl.Identifier()))
	}
}

// TestCommitAllOntoTableCreatedMeanwhile: two first appends of a dataset
// are staged before either commits; the first creates the table, the
// second goes through CommitAll. The second must not land its rows with
// the __row_index base it staged with (they would repeat the first's):
// it is a conflict, or, with the same txn id, a replay of the first.
func TestCommitAllOntoTableCreatedMeanwhile(t *testing.T) {
	e := newPGCatalogEnv(t, false)
	ctx := context.Background()
	rows := func(dataset string) int64 {
		sum, err := e.viaPG.Checksum(ctx, dataset, 0)
		require.NoError(t, err)
		return sum.Rows
	}

	a := e.stage(t, "race", facade.Append, 100)
	b := e.stage(t, "race", facade.Append, 50)
	_, err := a.Commit(ctx)
	require.NoError(t, err)
	_, err = e.viaPG.CommitAll(ctx, b)
	require.ErrorIs(t, err, facade.ErrCommitConflict)
	require.EqualValues(t, 100, rows("race"))

	stageTxn := func(n int) facade.Staged {
		sc := contract.Schema()
		bs := contract.Batches(e.mem, sc, 0, n, 100, n)
		defer func() {
			for _, b := range bs {
				b.Release()
			}
		}()
		st, err := e.viaPG.Stage(ctx, facade.Target{DatasetID: "replay", WriterID: "w"},
			facade.WriteRequest{Mode: facade.Append, Schema: sc, Rows: contract.Seq(bs), TxnID: "txn-1"})
		require.NoError(t, err)
		return st
	}
	first, again := stageTxn(100), stageTxn(100)
	res, err := first.Commit(ctx)
	require.NoError(t, err)
	got, err := e.viaPG.CommitAll(ctx, again)
	require.NoError(t, err)
	require.True(t, got[0].Replayed)
	require.Equal(t, res.SnapshotID, got[0].SnapshotID)
	require.EqualValues(t, 100, rows("replay"))
}
