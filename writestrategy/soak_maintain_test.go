package writestrategy_test

import (
	"context"
	"flag"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/scanfiles"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// soakMaintainRuns sizes TestSoakMaintenanceBetweenMerges.
var soakMaintainRuns = flag.Int("soak.maintain.runs", 30, "runs of TestSoakMaintenanceBetweenMerges")

// deleteState is what the current snapshot of a dataset applies: its
// distinct delete files, the data files it reads, and the snapshots the
// table keeps.
type deleteState struct {
	deleteFiles, dataFiles, snapshots int
}

func tableState(t *testing.T, w *world, id string) deleteState {
	t.Helper()
	f, ok := w.lake.(*facade.Facade)
	require.True(t, ok)
	tbl, err := f.LoadTable(context.Background(), id)
	require.NoError(t, err)
	tasks, err := scanfiles.Plan(context.Background(), tbl.Scan())
	require.NoError(t, err)
	dels := map[string]bool{}
	for _, tk := range tasks {
		for _, d := range tk.DeleteFiles {
			dels[d.FilePath()] = true
		}
	}
	return deleteState{deleteFiles: len(dels), dataFiles: len(scanfiles.DataFiles(tasks)), snapshots: len(tbl.Metadata().Snapshots())}
}

// Many runs of a snapshot_replace (merges; on an unpartitioned and a
// partitioned table) and an append_new on Iceberg
// under a lifecycle that expires, compacts and deletes files every few
// commits, with Dispatcher.Maintain on demand every few runs, and an
// append_new downstream of the append_new reading delta windows (some
// windows spanning several runs, so their first snapshots were expired
// and compacted away by the time they are read). After every run the
// merged table holds exactly the source's rows and passes Verify, its
// unchanged rows keep their identity, the downstream and the append_new
// equal the same pipelines kept on Postgres; the delete files the current
// snapshot applies and the snapshots kept stay bounded.
func TestSoakMaintenanceBetweenMerges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	life := facade.Lifecycle{KeepLast: 3, EveryCommits: 4, FileGrace: -1}
	part := func(id string) (facade.Partitioning, bool) {
		return facade.Partitioning{Fields: []facade.PartitionField{{Column: "category"}}}, id == "sr_part"
	}
	w := newWorldWith(t, nil, &facade.Config{Lifecycle: life, PartitionFor: part}, nil, nil)
	src := newMergeSource(t, w.pool, 400)
	merged := []string{"sr", "sr_part"}
	ensureOutputs(t, w.pool, "sr", "sr_part", "an", "down", "pg_an", "pg_down")
	w.iceberg("sr", "sr_part", "an", "down")
	down := func(out string) writestrategy.Deploy {
		return writestrategy.Deploy{Mode: writestrategy.KindAppendNew, Source: "an", Target: out, Key: []string{"id"}}
	}
	for _, out := range merged {
		w.mustWrite(mergeDeploy(out))
	}
	first := w.mustWrite(appendNewDeploy("an"))[0]
	w.mustWrite(appendNewDeploy("pg_an"))
	w.mustWrite(down("down"))
	w.mustWrite(down("pg_down"))
	low := first.CommittedAt

	var maxDeletes, maxSnapshots, compactions, expired, deltaReads, wholeReads int
	prev := sourceCount(t, w)
	for run := 1; run <= *soakMaintainRuns; run++ {
		msg := fmt.Sprintf("run %d", run)
		u, n, d := 1+src.rnd.IntN(20), src.rnd.IntN(8), src.rnd.IntN(6)
		src.change(u, n, d)
		count := sourceCount(t, w)

		for _, out := range merged {
			before := rowIdentities(t, w.lake, out)
			sr := w.mustWrite(mergeDeploy(out))[0]
			require.Equal(t, count, sr.Rows, "%s %s", msg, out)
			require.Equal(t, prev-int64(u+d), sr.Preserved, "%s %s", msg, out)
			requireMerged(t, w, sr, int64(u+n), msg+" "+out)
			require.Equal(t, sr.Preserved, keptIdentities(before, rowIdentities(t, w.lake, out)), "%s %s: identity kept", msg, out)
			verifyReplace(t, w, out, msg+" "+out)
			if m := sr.Maintenance; m != nil {
				compactions += min(m.CompactedFiles, 1)
				expired += m.SnapshotsExpired
			}
		}

		an := w.mustWrite(appendNewDeploy("an"))[0]
		require.Equal(t, int64(n), an.Rows, msg)
		require.Equal(t, w.mustWrite(appendNewDeploy("pg_an"))[0].Rows, an.Rows, msg)
		if run%7 == 0 {
			for _, id := range []string{"sr", "sr_part", "an"} {
				rep, err := w.d.Maintain(ctx, writer, id)
				require.NoError(t, err, "%s: maintain %s", msg, id)
				compactions += min(rep.CompactedFiles, 1)
				expired += rep.SnapshotsExpired
			}
		}
		// The downstream reads the append_new's windows, one run in three
		// a window of three runs.
		if run%3 == 0 || run == *soakMaintainRuns {
			win, ids := w.window("an", low, an.TxnID)
			low = win.High
			res := w.deltaWrite(down("down"), "an", ids)
			want := w.deltaWrite(down("pg_down"), "an", ids)
			require.Equal(t, want.Rows, res.Rows, msg)
			if res.FullRead == "" {
				deltaReads++
			} else {
				// A compaction of the upstream in or after the window.
				require.Contains(t, res.FullRead, "does not hold the window as appends only", msg)
				wholeReads++
			}
			require.Equal(t, w.checksum("an"), w.checksum("down"), "%s: the downstream holds every key of its upstream", msg)
			require.Equal(t, w.checksum("pg_down"), w.checksum("down"), msg)
		}
		require.Equal(t, w.checksum("pg_an"), w.checksum("an"), msg)

		for _, out := range merged {
			st := tableState(t, w, out)
			maxDeletes, maxSnapshots = max(maxDeletes, st.deleteFiles), max(maxSnapshots, st.snapshots)
			// Maintenance is due once deletes remove a fifth of the stored
			// rows, and runs right after the write: deletes stay below that
			// share; each snapshot kept adds at most one delete file per
			// data file.
			sum := currentSummary(t, w.lake, out)
			require.Less(t, 5*summaryInt(t, sum, "total-position-deletes"), summaryInt(t, sum, "total-records"), "%s %s: deletes bounded", msg, out)
			require.LessOrEqual(t, st.deleteFiles, st.dataFiles*st.snapshots, "%s %s: delete files bounded (%+v)", msg, out, st)
			require.LessOrEqual(t, st.snapshots, life.KeepLast+life.EveryCommits+2, "%s %s: snapshots bounded (%+v)", msg, out, st)
			if run%10 == 0 || run == *soakMaintainRuns {
				require.Equal(t, soakSourceRows(w, mergeSchema), soakDatasetRows(w, mergeSchema, out), "%s %s: a full rebuild's rows", msg, out)
				require.Len(t, rowIdentities(t, w.lake, out), int(count), "%s %s: each key once", msg, out)
			}
		}
		prev = count
	}
	t.Logf("%d runs: %d compactions, %d snapshots expired, at most %d delete files and %d snapshots; downstream %d delta reads, %d whole",
		*soakMaintainRuns, compactions, expired, maxDeletes, maxSnapshots, deltaReads, wholeReads)
	require.Positive(t, compactions, "maintenance compacted between merges")
	require.Positive(t, expired, "maintenance expired snapshots between merges")
	require.Positive(t, deltaReads)
}
