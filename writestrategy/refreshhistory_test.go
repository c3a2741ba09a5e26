package writestrategy_test

import (
	"context"
	"flag"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/writestrategy"
)

var refreshHistoryRuns = flag.Int("refresh.history", 40, "keyed runs of TestRefreshLongHistory (a long run: several hundred)")

// A declared GROUP BY over a tracked table, refreshed on Iceberg run after
// run through the maintenance those runs make due (compactions of the
// files each run adds, expiries of its snapshots), stays equal to a full
// recompute after every run and every run stays incremental: a compaction
// or an expiry between two runs is not a change of the output. The
// table's head stays bounded (snapshots, data files, delete files,
// manifests) and its files, read without iceberg-go's scan, hold what its
// Scan returns.
func TestRefreshLongHistory(t *testing.T) {
	t.Parallel()
	t.Run("tight lifecycle", func(t *testing.T) {
		t.Parallel()
		refreshHistory(t, facade.Lifecycle{KeepLast: 2, EveryCommits: 2, FileGrace: time.Nanosecond, OrphanAge: time.Millisecond, OrphanEvery: -1, CompactMinFiles: 3}, false)
	})
	t.Run("default lifecycle", func(t *testing.T) {
		t.Parallel()
		refreshHistory(t, facade.Lifecycle{KeepLast: 10, EveryCommits: 10, CompactMinFiles: 8}, true)
	})
}

// refreshHistory runs TestRefreshLongHistory under life (given with the
// numbers the bounds use; zero: the config leaves them to the defaults).
func refreshHistory(t *testing.T, life facade.Lifecycle, defaults bool) {
	ctx := context.Background()
	cfg := &facade.Config{Lifecycle: life}
	if defaults {
		cfg.Lifecycle = facade.Lifecycle{}
	}
	w := newPGWorld(t, cfg, nil)
	trackedFact(t, w.world, 2000, 150)
	ensureOutputs(t, w.pool, "sums", "sums_ref")
	w.iceberg("sums", "sums_ref")
	steps := []writestrategy.Step{{Name: "g", SQL: `SELECT cust, count(*) AS n, sum(amount) AS total FROM source GROUP BY cust`}}
	declared := writestrategy.Transform{Output: "sums", Source: "fact", Steps: steps,
		Depends: &incremental.Dependency{Key: []string{"cust"}, Sources: map[string][]string{"fact": {"cust"}}}}
	plain := writestrategy.Transform{Output: "sums_ref", Source: "fact", Steps: steps}

	rnd := rand.New(rand.NewPCG(uint64(*refreshHistoryRuns), 0x5e1f))
	next := int64(2001)
	ids := func(n int) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = 1 + rnd.Int64N(next-1)
		}
		return out
	}
	maintained, compacted, expired := 0, 0, 0
	for run := 0; run <= *refreshHistoryRuns; run++ {
		if run > 0 && run%10 != 0 { // every tenth run changes nothing
			w.exec(`UPDATE fact SET amount = amount + 1 WHERE id = ANY ($1)`, ids(5))
			w.exec(`UPDATE fact SET cust = $2 WHERE id = $1`, ids(1)[0], rnd.Int64N(160)) // a key moved, at times to a new group
			w.exec(`DELETE FROM fact WHERE id = ANY ($1)`, ids(2))
			cust := any(rnd.Int64N(150))
			if rnd.IntN(8) == 0 {
				cust = nil
			}
			w.exec(`INSERT INTO fact VALUES ($1, $2, $1), ($1 + 1, $3, 7)`, next, cust, rnd.Int64N(150))
			next += 2
		}
		res := w.mustWrite(declared)
		w.mustWrite(plain)
		r := res[0]
		if run > 0 {
			require.Equal(t, incremental.RefreshIncremental, r.Refresh.Mode, "run %d: %s", run, r.Refresh.Reason)
		}
		if m := r.Maintenance; m != nil {
			maintained++
			compacted += m.CompactedFiles
			expired += m.SnapshotsExpired
		}
		require.Equal(t, w.checksum("sums_ref"), w.checksum("sums"), "run %d: declared output = full recompute", run)
		if run%10 == 9 || run == *refreshHistoryRuns {
			ps, err := w.d.Verify(ctx, writestrategy.Request{Strategy: declared})
			require.NoError(t, err)
			require.True(t, ps[0].OK(), "run %d: %s", run, ps[0])
		}
	}
	if *refreshHistoryRuns >= 4*life.CompactMinFiles {
		require.Positive(t, compacted, "compactions ran (%d maintenance runs)", maintained)
		require.Positive(t, expired, "expiries ran")
	}

	tbl, err := w.f.LoadTable(ctx, "sums")
	require.NoError(t, err)
	snap := tbl.CurrentSnapshot()
	require.NotNil(t, snap)
	require.LessOrEqual(t, len(tbl.Metadata().Snapshots()), life.KeepLast+life.EveryCommits+2, "snapshots kept")
	tasks, err := tbl.Scan(table.WithSnapshotID(snap.SnapshotID)).PlanFiles(ctx)
	require.NoError(t, err)
	deletes := 0
	for _, task := range tasks {
		deletes += len(task.DeleteFiles) + len(task.DeletionVectorFiles)
	}
	// Compaction runs once 2*CompactMinFiles files were added since the
	// last one: the head holds fewer, each with at most a delete file per
	// run since.
	require.Less(t, len(tasks), 4*life.CompactMinFiles, "data files of the head")
	require.Less(t, deletes, 8*life.CompactMinFiles*life.CompactMinFiles, "delete files of the head")
	fs, err := tbl.FS(ctx)
	require.NoError(t, err)
	manifests, err := snap.Manifests(fs)
	require.NoError(t, err)
	require.Less(t, len(manifests), 8*life.CompactMinFiles, "manifests of the head")
	files, err := fileRows(ctx, tbl, snap.SnapshotID)
	require.NoError(t, err)
	scan, err := scanRows(ctx, w.f, "sums", snap.SnapshotID, snapshotSchema(tbl, snap))
	require.NoError(t, err)
	require.Equal(t, scan, files, "the head read from its data and delete files equals its Scan")
	t.Logf("%d runs: %d maintenance runs, %d files compacted, %d snapshots expired; head: %d data files, %d delete files, %d manifests",
		*refreshHistoryRuns, maintained, compacted, expired, len(tasks), deletes, len(manifests))
}

// trackedFact creates the table fact (id, cust, amount) of rows rows,
// cust = id % groups, indexed on cust and analyzed, registered as the
// relation "fact" and tracked for cust.
func trackedFact(t *testing.T, w *world, rows, groups int) {
	t.Helper()
	w.exec(`CREATE TABLE fact (id bigint PRIMARY KEY, cust bigint, amount bigint)`)
	w.exec(`INSERT INTO fact SELECT g, g % $2, g FROM generate_series(1, $1::bigint) g`, rows, groups)
	w.exec(`CREATE INDEX ON fact (cust)`)
	w.exec(`ANALYZE fact`)
	ctx := context.Background()
	_, err := writestrategy.RegisterRelation(ctx, w.pool, nil, "fact", "fact")
	require.NoError(t, err)
	require.NoError(t, w.d.Track(ctx, "fact", "cust"))
}
