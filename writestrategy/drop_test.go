package writestrategy_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// filesUnder counts the regular files under dir (0 when it is absent).
func filesUnder(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			n++
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	require.NoError(t, err)
	return n
}

func dropWrite(t *testing.T, w *pgWorld, out string) []writestrategy.WriteResult {
	t.Helper()
	w.resolver.Invalidate()
	return w.mustWrite(writestrategy.Transform{Output: out, Source: "orders", Steps: []writestrategy.Step{{Name: "f", SQL: `SELECT id, name FROM source`}}})
}

// Drop removes the table with its files, the overrides and the ledger
// rows; registering and writing the dataset again re-creates it.
func TestDispatchDropThenRecreate(t *testing.T) {
	t.Parallel()
	w := newPGWorld(t, nil, nil)
	seedWorld(t, w.world, 50)
	ctx := context.Background()
	ensureOutputs(t, w.pool, "gone")
	w.iceberg("gone")
	dropWrite(t, w, "gone")
	dropWrite(t, w, "gone")
	tbl, err := w.f.LoadTable(ctx, "gone")
	require.NoError(t, err)
	loc := filepath.Clean(tbl.Location())
	if u := tbl.Location(); len(u) > 7 && u[:7] == "file://" {
		loc = filepath.Clean(u[7:])
	}
	require.Positive(t, filesUnder(t, loc))

	rep, err := w.d.Drop(ctx, "gone")
	require.NoError(t, err)
	require.False(t, rep.Resumed)
	require.True(t, rep.Table.Dropped)
	require.Positive(t, rep.Table.Files)
	require.Equal(t, 0, filesUnder(t, loc), "every file of the table deleted")
	_, err = w.f.LoadTable(ctx, "gone")
	require.ErrorIs(t, err, facade.ErrTableNotFound)
	_, err = w.ledger.Dataset(ctx, "gone")
	require.ErrorIs(t, err, ledger.ErrDatasetNotFound)
	ovr, err := w.flags.Overrides(ctx, writer)
	require.NoError(t, err)
	require.Empty(t, ovr)
	var n int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE dataset_id = 'gone'`).Scan(&n))
	require.Zero(t, n)
	_, err = w.d.Drop(ctx, "gone")
	require.ErrorIs(t, err, ledger.ErrDatasetNotFound)

	// Re-created by registering and writing it again (on either sink).
	ensureOutputs(t, w.pool, "gone")
	res := dropWrite(t, w, "gone")
	require.Equal(t, sink.Postgres, res[0].Sink)
	require.Equal(t, int64(50), res[0].Rows)
	w.iceberg("gone")
	res = dropWrite(t, w, "gone")
	require.Equal(t, sink.Iceberg, res[0].Sink)
	require.Equal(t, int64(50), w.checksum("gone").Rows)
}

// A Drop killed after any step leaves the dataset refusing writes, and the
// next Drop completes it.
func TestDispatchDropResumes(t *testing.T) {
	t.Parallel()
	w := newPGWorld(t, nil, nil)
	seedWorld(t, w.world, 20)
	ctx := context.Background()
	ensureOutputs(t, w.pool, "marked", "purged", "metagone")
	w.iceberg("marked", "purged", "metagone")
	for _, out := range []string{"marked", "purged", "metagone"} {
		dropWrite(t, w, out)
		_, err := w.ledger.MarkDropped(ctx, out) // killed after step 1
		require.NoError(t, err)
		_, err = w.write(writestrategy.Transform{Output: out, Source: "orders", Steps: []writestrategy.Step{{Name: "f", SQL: `SELECT id FROM source`}}})
		require.ErrorIs(t, err, ledger.ErrDatasetDropped, out)
	}
	_, err := w.f.DropTable(ctx, "purged") // killed after step 2
	require.NoError(t, err)
	// Killed inside step 2, after its last file: the catalog entry is left.
	tbl, err := w.f.LoadTable(ctx, "metagone")
	require.NoError(t, err)
	require.NoError(t, os.Remove(tbl.MetadataLocation()[len("file://"):]))

	for _, out := range []string{"marked", "purged", "metagone"} {
		rep, err := w.d.Drop(ctx, out)
		require.NoError(t, err, out)
		require.True(t, rep.Resumed, out)
		require.Equal(t, out != "purged", rep.Table.Dropped, out)
		_, err = w.ledger.Dataset(ctx, out)
		require.ErrorIs(t, err, ledger.ErrDatasetNotFound)
		_, err = w.f.LoadTable(ctx, out)
		require.ErrorIs(t, err, facade.ErrTableNotFound)
	}
}

// An open intent refuses the drop; the intents listing shows a live
// holder's intent as "wait" and a dead holder's as what the next write
// does with it.
func TestDispatchDropBusyAndIntents(t *testing.T) {
	t.Parallel()
	w := newPGWorld(t, nil, nil)
	seedWorld(t, w.world, 5)
	ctx := context.Background()
	ensureOutputs(t, w.pool, "held", "dead")
	in, err := w.ledger.Open(ctx, ledger.OpenParams{DatasetID: "held", WriterID: writer, Sink: sink.Postgres, WriteMode: facade.Replace})
	require.NoError(t, err)
	defer in.Release() // before the pool closes, whatever fails
	_, err = w.d.Drop(ctx, "held")
	require.ErrorIs(t, err, ledger.ErrBusy)
	require.ErrorContains(t, err, in.ID)
	ds, err := w.ledger.Dataset(ctx, "held")
	require.NoError(t, err)
	require.NotEqual(t, ledger.StatusDropped, ds.Status, "not marked")

	// A writer that dies holding "dead": its own session, closed.
	conn, err := pgx.Connect(ctx, w.pool.Config().ConnString())
	require.NoError(t, err)
	dl, err := ledger.New(conn, nil)
	require.NoError(t, err)
	dead, err := dl.Open(ctx, ledger.OpenParams{DatasetID: "dead", WriterID: writer, Sink: sink.Postgres, WriteMode: facade.Replace})
	require.NoError(t, err)
	pid := conn.PgConn().PID()
	require.NoError(t, conn.Close(ctx))
	// Close returns before the server's backend has exited; the holder is
	// dead once its backend is gone.
	require.Eventually(t, func() bool {
		var n int
		return w.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&n) == nil && n == 0
	}, 30*time.Second, 20*time.Millisecond, "the closed session's backend exits")

	st, err := w.d.Intents(ctx)
	require.NoError(t, err)
	require.Len(t, st, 2)
	byID := map[string]writestrategy.IntentStatus{}
	for _, s := range st {
		byID[s.ID] = s
	}
	require.Equal(t, writestrategy.NextWait, byID[in.ID].Next)
	require.True(t, byID[in.ID].HolderAlive)
	d := byID[dead.ID]
	require.Equal(t, "dead", d.DatasetID)
	require.True(t, d.Liveness)
	require.False(t, d.HolderAlive)
	require.Equal(t, writestrategy.NextAbort, d.Next, d.Reason)
	require.GreaterOrEqual(t, d.Age, time.Duration(0))

	// Drop reconciles the dead holder's intent and drops; the live one
	// still refuses until it ends.
	_, err = w.d.Drop(ctx, "dead")
	require.NoError(t, err)
	require.NoError(t, w.ledger.Abort(ctx, in, errors.New("test done")))
	_, err = w.d.Drop(ctx, "held")
	require.NoError(t, err)
	st, err = w.d.Intents(ctx)
	require.NoError(t, err)
	require.Empty(t, st)
}
