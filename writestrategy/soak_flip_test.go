package writestrategy_test

import (
	"context"
	"flag"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// soakFlipRuns sizes TestSoakCanaryFlipAndRevert: the writes of each
// phase on a sink.
var soakFlipRuns = flag.Int("soak.flip.runs", 3, "writes per sink phase of TestSoakCanaryFlipAndRevert")

func appendNewDeploy(out string) writestrategy.Deploy {
	return writestrategy.Deploy{Mode: writestrategy.KindAppendNew, Source: "src", Target: out, Key: []string{"id"}}
}

// A snapshot_replace and an append_new written many times on the Postgres
// arm, flipped to Iceberg (the first write there a full rebuild, then
// merges and key-only appends), reverted to Postgres, and flipped again:
// after every write the snapshot_replace holds exactly the source's rows
// (Verify and row by row), the append_new exactly the rows of the same
// append_new kept on Postgres throughout; the counts are exact, and
// between two writes on the same sink every unchanged row keeps its
// identity (row_index and txn_id on Postgres; __row_index, __row_id and
// __created_at on Iceberg).
func TestSoakCanaryFlipAndRevert(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	src := newMergeSource(t, w.pool, 400)
	ensureOutputs(t, w.pool, "sr", "an", "ref_an")
	phases := []sink.Sink{sink.Postgres, sink.Iceberg, sink.Postgres, sink.Iceberg}

	var prevSink sink.Sink
	var prevCount int64
	var pgIDs map[int64][2]string
	var iceIDs map[int64][3]int64
	run := 0
	for p, to := range phases {
		switch {
		case p == 0:
		case to == sink.Iceberg:
			w.iceberg("sr", "an")
		default:
			_, err := w.flags.ClearOverride(ctx, writer, "sr", "an")
			require.NoError(t, err)
			w.resolver.Invalidate()
		}
		for i := 0; i < *soakFlipRuns; i, run = i+1, run+1 {
			msg := fmt.Sprintf("phase %d (%s) write %d", p, to, i)
			var u, n, d int
			if run > 0 {
				u, n, d = 1+src.rnd.IntN(15), 1+src.rnd.IntN(8), 1+src.rnd.IntN(6)
				src.change(u, n, d)
			}
			count := sourceCount(t, w)
			flip := run > 0 && to != prevSink

			sr := w.mustWrite(mergeDeploy("sr"))[0]
			require.Equal(t, to, sr.Sink, msg)
			require.Equal(t, facade.Replace, sr.Mode, msg)
			require.Equal(t, count, sr.Rows, msg)
			require.Zero(t, sr.Skipped, msg)
			if run == 0 || flip {
				// A full rebuild on the sink: no row of it kept.
				require.Zero(t, sr.Preserved, msg)
			} else {
				require.Equal(t, prevCount-int64(u)-int64(d), sr.Preserved, "%s: the unchanged rows", msg)
			}
			verifyReplace(t, w, "sr", msg)
			require.Equal(t, soakSourceRows(w, mergeSchema), soakDatasetRows(w, mergeSchema, "sr"), "%s: a full rebuild's rows", msg)
			if to == sink.Postgres {
				ids := rowStoreIdentities(t, w, "sr")
				if !flip && run > 0 {
					require.Equal(t, sr.Preserved, keptIdentities(pgIDs, ids), "%s: unchanged rows keep row_index and txn_id", msg)
				}
				pgIDs = ids
			} else {
				ids := rowIdentities(t, w.lake, "sr")
				if !flip {
					require.Equal(t, sr.Preserved, keptIdentities(iceIDs, ids), "%s: unchanged rows keep their identity columns", msg)
					requireMerged(t, w, sr, int64(n+u), msg)
				}
				iceIDs = ids
			}

			ref := w.mustWrite(appendNewDeploy("ref_an"))[0]
			require.Equal(t, sink.Postgres, ref.Sink)
			an := w.mustWrite(appendNewDeploy("an"))[0]
			require.Equal(t, to, an.Sink, msg)
			switch {
			case run == 0:
				require.Equal(t, count, an.Rows, msg)
			case flip:
				// The first write on the other sink rebuilds the target:
				// its current rows and the new keys, as one replace.
				require.Equal(t, facade.Replace, an.Mode, msg)
				require.Equal(t, w.checksum("ref_an").Rows, an.Rows, msg)
				require.Equal(t, count-int64(n), an.Skipped, "%s: the source rows whose key was there", msg)
			default:
				require.Equal(t, facade.Append, an.Mode, msg)
				require.Equal(t, int64(n), an.Rows, "%s: the new keys", msg)
				require.Equal(t, count-int64(n), an.Skipped, "%s: the keys already there", msg)
			}
			if !flip {
				require.Equal(t, ref.Rows, an.Rows, msg)
				require.Equal(t, ref.Skipped, an.Skipped, msg)
			}
			require.Equal(t, w.checksum("ref_an"), w.checksum("an"), msg)
			require.Equal(t, soakDatasetRows(w, mergeSchema, "ref_an"), soakDatasetRows(w, mergeSchema, "an"), msg)
			prevSink, prevCount = to, count
		}
	}
	require.Equal(t, map[string]int{"committed/pg": 2 * *soakFlipRuns, "committed/iceberg_native": 2 * *soakFlipRuns},
		intentRows(t, w, "sr"), "one intent per write")
}
