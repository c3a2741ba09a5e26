package writestrategy_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgcluster"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// pauseAt is an Observer that stops the first write of dataset at a point
// (the start of phase, or its first streamed batch with progress) until
// resume is closed.
type pauseAt struct {
	dataset  string
	phase    writestrategy.Phase
	progress bool
	once     sync.Once
	reached  chan struct{}
	resume   chan struct{}
}

func newPauseAt(dataset string, phase writestrategy.Phase, progress bool) *pauseAt {
	return &pauseAt{dataset: dataset, phase: phase, progress: progress, reached: make(chan struct{}), resume: make(chan struct{})}
}

func (p *pauseAt) pause() {
	p.once.Do(func() {
		close(p.reached)
		<-p.resume
	})
}

func (p *pauseAt) PhaseStart(ctx context.Context, ev writestrategy.PhaseEvent) context.Context {
	if !p.progress && ev.Phase == p.phase && len(ev.DatasetIDs) > 0 && ev.DatasetIDs[0] == p.dataset {
		p.pause()
	}
	return ctx
}

func (p *pauseAt) PhaseEnd(context.Context, writestrategy.PhaseEvent) {}

func (p *pauseAt) Progress(_ context.Context, ev writestrategy.ProgressEvent) {
	if p.progress && ev.DatasetID == p.dataset {
		p.pause()
	}
}

// A merge (snapshot_replace on Iceberg) whose Postgres sessions all end
// while it streams, or at its ledger commit: by a crash restart of the
// server, or by pg_terminate_backend of every other session. The writer
// fails with ErrConnectionLost. On the SQL catalog, stopped at the ledger
// commit, its snapshot has landed: the table holds the merge's rows, each
// key once, and the next write rolls the intent forward. Mid-stream, or on
// facade.NewPostgresCatalog's catalog (whose snapshot commit is the ledger
// commit's transaction), nothing is visible and the next write aborts the intent.
// Either way the next write merges: its rows, counts and checksum are a
// full rebuild's, and it writes only the changed rows.
func TestSoakPostgresRestartDuringMerge(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		restart  bool // a crash restart of a cluster of the test's own, else pg_terminate_backend
		atLedger bool // paused at the ledger commit, else at the first streamed batch
		// pgCatalog: the Iceberg catalog is facade.NewPostgresCatalog's on the
		// ledger's pool, whose snapshot commit is the ledger commit's
		// transaction: nothing lands when the sessions end before it.
		pgCatalog bool
	}{
		{"crash restart mid-stream", true, false, false},
		{"crash restart before ledger commit", true, true, false},
		{"terminate backends mid-stream", false, false, false},
		{"terminate backends before ledger commit", false, true, false},
		{"postgres catalog: terminate backends at the commit", false, true, true},
	} {
		landed := c.atLedger && !c.pgCatalog
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var w *world
			var cluster *pgcluster.Cluster
			if c.restart {
				w, cluster = newCrashableWorld(t)
			} else if c.pgCatalog {
				w = newPGWorld(t, nil, nil).world
			} else {
				w = newWorld(t, nil)
			}
			src := newMergeSource(t, w.pool, 1500)
			ensureOutputs(t, w.pool, "sr")
			w.iceberg("sr")
			w.mustWrite(mergeDeploy("sr"))
			before := w.checksum("sr")
			src.change(20, 10, 5)
			count := sourceCount(t, w)
			rows := soakSourceRows(w, mergeSchema)

			obs := newPauseAt("sr", writestrategy.PhaseLedgerCommit, !c.atLedger)
			d, err := writestrategy.NewDispatcher(w.pool, &writestrategy.DispatchConfig{Ledger: w.ledger, Resolver: w.resolver,
				Lakehouse: w.lake, Workspace: "test", Observer: obs})
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() {
				_, err := d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: mergeDeploy("sr")})
				done <- err
			}()
			select {
			case <-obs.reached:
			case err := <-done:
				t.Fatalf("the merge ended before its pause: %v", err)
			}
			dead := openIntent(t, w, "sr")
			if c.restart {
				require.NoError(t, cluster.CrashRestart(ctx))
			} else {
				conn, err := pgx.Connect(ctx, w.pool.Config().ConnString())
				require.NoError(t, err)
				var n int
				require.NoError(t, conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
					WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n))
				require.Positive(t, n)
				require.NoError(t, conn.Close(ctx))
			}
			close(obs.resume)
			select {
			case err := <-done:
				require.ErrorIs(t, err, writestrategy.ErrConnectionLost)
			case <-time.After(time.Minute):
				t.Fatal("the merge did not fail within a minute of losing its sessions")
			}
			w.pool.Reset() // the pool's idle sessions ended too

			found, ok, err := w.lake.FindTxn(ctx, "sr", dead.ID)
			require.NoError(t, err)
			require.Equal(t, landed, ok, "the merge's snapshot landed")
			if landed {
				require.Equal(t, count, found.Rows)
				require.Len(t, rowIdentities(t, w.lake, "sr"), int(count), "each key once")
				require.Equal(t, lakeChecksum(t, w, "sr").Rows, count)
				require.Equal(t, rows, soakDatasetRows(w, mergeSchema, "sr"), "the landed merge holds the new rows")
				requireMerged(t, w, writestrategy.WriteResult{DatasetID: "sr", SnapshotID: found.SnapshotID}, 30, "the landed merge")
			} else {
				require.Equal(t, before, lakeChecksum(t, w, "sr"), "nothing visible")
			}

			next := w.mustWrite(mergeDeploy("sr"))[0]
			txn, err := w.ledger.Get(ctx, dead.ID)
			require.NoError(t, err)
			if landed {
				require.Equal(t, ledger.StatusCommitted, txn.Status, "rolled forward")
				require.Equal(t, count, txn.RowCount)
				require.Equal(t, count, next.Preserved, "nothing changed since the landed merge")
				require.Zero(t, writtenRecords(t, w, next))
			} else {
				require.Equal(t, ledger.StatusAborted, txn.Status)
				require.Equal(t, count-30, next.Preserved)
				requireMerged(t, w, next, 30, "the next write")
			}
			require.Equal(t, count, next.Rows)
			require.Equal(t, rows, soakDatasetRows(w, mergeSchema, "sr"), "every key once, none lost")
			require.Len(t, rowIdentities(t, w.lake, "sr"), int(count))
			verifyReplace(t, w, "sr", c.name)
			require.Zero(t, w.openIntents("sr"))
		})
	}
}
