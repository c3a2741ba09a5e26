package writestrategy_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// The soak tests run incremental pipelines the way a pipeline service
// meets them after weeks in production: many runs of a snapshot_replace
// and an append_new over a changing source (mergeSource), through the
// public Dispatcher, with flips, schema changes, restarts, concurrent
// writers and maintenance in between. After each write they compare the
// target with a full rebuild of the same source.

// sortedText is the rows' text forms, one string per row, sorted.
func sortedText(rows [][]string) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = strings.Join(r, "|")
	}
	slices.Sort(out)
	return out
}

// soakDatasetRows is the sorted text of dataset id's rows with the columns
// of s, wherever the dataset lives.
func soakDatasetRows(w *world, s writestrategy.Schema, id string) []string {
	w.t.Helper()
	return sortedText(w.datasetText(s, id))
}

// soakSourceRows is the sorted text of the rows of merge_src with the
// columns of s: what a full rebuild of a snapshot_replace holds.
func soakSourceRows(w *world, s writestrategy.Schema) []string {
	w.t.Helper()
	return sortedText(w.sourceText(s, `SELECT * FROM merge_src`))
}

// sourceCount is the number of rows of merge_src.
func sourceCount(t *testing.T, w *world) int64 {
	t.Helper()
	var n int64
	require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT count(*) FROM merge_src`).Scan(&n))
	return n
}

// rowStoreIdentities maps each id of a row-store dataset to its identity
// (row_index and txn_id).
func rowStoreIdentities(t *testing.T, w *world, id string) map[int64][2]string {
	t.Helper()
	out := map[int64][2]string{}
	rows, err := w.pool.Query(context.Background(), `SELECT (data->>'id')::bigint, row_index::text, txn_id::text
		FROM lakewrite.dataset_rows WHERE dataset_id = $1`, id)
	require.NoError(t, err)
	var k int64
	var ri, txn string
	_, err = pgx.ForEachRow(rows, []any{&k, &ri, &txn}, func() error {
		_, dup := out[k]
		require.False(t, dup, "%s: id %d twice", id, k)
		out[k] = [2]string{ri, txn}
		return nil
	})
	require.NoError(t, err)
	return out
}

// writeSummary is the summary of a write's own snapshot, whatever
// maintenance committed after it.
func writeSummary(t *testing.T, w *world, res writestrategy.WriteResult) map[string]string {
	t.Helper()
	f, ok := w.lake.(*facade.Facade)
	require.True(t, ok)
	tbl, err := f.LoadTable(context.Background(), res.DatasetID)
	require.NoError(t, err)
	snap := tbl.SnapshotByID(res.SnapshotID)
	require.NotNil(t, snap, "snapshot %d of %s", res.SnapshotID, res.DatasetID)
	return snap.Summary.Properties
}

// writtenRecords is the rows the snapshot of a write added.
func writtenRecords(t *testing.T, w *world, res writestrategy.WriteResult) int64 {
	t.Helper()
	return summaryInt(t, writeSummary(t, w, res), "added-records")
}

// requireMerged checks that res wrote changed rows as a merge: exactly
// those when it is merge-on-read; when it is copy-on-write (its snapshot
// removes the data files it touched) those plus the rewrites of the
// touched files' other rows.
func requireMerged(t *testing.T, w *world, res writestrategy.WriteResult, changed int64, msg string) {
	t.Helper()
	sum := writeSummary(t, w, res)
	added := summaryInt(t, sum, "added-records")
	if summaryInt(t, sum, "deleted-data-files") > 0 {
		require.GreaterOrEqual(t, added, changed, "%s: a copy-on-write merge", msg)
		return
	}
	require.Equal(t, changed, added, "%s: a merge writes only the new and changed rows", msg)
}

// keptIdentities counts the keys whose identity is the same in before and
// after.
func keptIdentities[V comparable](before, after map[int64]V) int64 {
	var n int64
	for k, v := range after {
		if old, ok := before[k]; ok && old == v {
			n++
		}
	}
	return n
}

// verifyReplace checks with Dispatcher.Verify that a snapshot_replace of
// "src" into out holds what a fresh compute of it gives.
func verifyReplace(t *testing.T, w *world, out, msg string) {
	t.Helper()
	ps, err := w.d.Verify(context.Background(), writestrategy.Request{WriterID: writer, Strategy: mergeDeploy(out)})
	require.NoError(t, err)
	require.True(t, ps[0].OK(), "%s: %s", msg, ps[0])
}
