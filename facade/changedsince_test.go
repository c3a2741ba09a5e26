package facade

import (
	"context"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/vocab"
)

// scanIDs returns the ids (sorted) and names a Scan with opts reads, and
// the data files it plans.
func scanIDs(t *testing.T, f *Facade, ds string, opts ScanOptions) ([]int64, map[int64]string, int) {
	t.Helper()
	names := map[int64]string{}
	var ids []int64
	for rec, err := range f.Scan(context.Background(), ds, opts) {
		require.NoError(t, err)
		sc := rec.Schema()
		id := rec.Column(sc.FieldIndices("id")[0]).(*array.Int64)
		nm := rec.Column(sc.FieldIndices("name")[0]).(*array.String)
		for i := range int(rec.NumRows()) {
			ids = append(ids, id.Value(i))
			names[id.Value(i)] = nm.Value(i)
		}
	}
	slices.Sort(ids)
	files, _, err := PlannedFiles(context.Background(), f, ds, opts)
	require.NoError(t, err)
	return ids, names, files
}

func headSnapshot(t *testing.T, f *Facade, ds string) int64 {
	t.Helper()
	tbl, err := f.LoadTable(context.Background(), ds)
	require.NoError(t, err)
	return tbl.CurrentSnapshot().SnapshotID
}

// A key-set scan that states its keys changed since a snapshot reads only
// the files written since, when every write since was a merge by those
// keys (or a compaction); any other write since, or a merge by other
// columns, makes it read as without the statement. The rows read are
// those of a scan without it.
func TestScanChangedSince(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t, mergeOnRead)
	f := env.f
	ctx := context.Background()
	const ds = "since"
	v := func(gen int, changed ...int64) func(int64) string {
		return func(id int64) string {
			if slices.Contains(changed, id) {
				return "v" + string(rune('0'+gen))
			}
			return "v0"
		}
	}
	mergeWrite(t, f, ds, idRange(0, 1000), v(0)) // the first write: a plain replace
	s0 := headSnapshot(t, f, ds)
	// ids 10 and 20 change, 30 goes, 1000 comes.
	ids := append(slices.DeleteFunc(idRange(0, 1000), func(id int64) bool { return id == 30 }), 1000)
	mergeWrite(t, f, ds, ids, v(1, 10, 20, 1000))
	tbl, err := f.LoadTable(ctx, ds)
	require.NoError(t, err)
	require.Equal(t, `["id"]`, tbl.CurrentSnapshot().Summary.Properties[vocab.SummaryMergeKey])

	changed := []any{int64(10), int64(20), int64(30), int64(1000)}
	in := []In{{Column: "id", Values: changed}}
	wantIDs, wantNames, allFiles := scanIDs(t, f, ds, ScanOptions{In: in})
	require.Equal(t, []int64{10, 20, 1000}, wantIDs)
	require.Equal(t, 2, allFiles, "the first write's file and the merge's")
	check := func(name string, opts ScanOptions, files int) {
		t.Helper()
		gotIDs, gotNames, got := scanIDs(t, f, ds, opts)
		require.Equal(t, wantIDs, gotIDs, name)
		require.Equal(t, wantNames, gotNames, name)
		require.Equal(t, files, got, name)
	}
	check("merges since", ScanOptions{In: in, ChangedSince: s0}, 1)
	check("with a filter", ScanOptions{In: in, ChangedSince: s0, Filter: []Range{{Column: "id", Min: int64(0)}}}, 1)
	byName := []In{{Column: "name", Values: []any{"v0", "v1"}}}
	_, _, files := scanIDs(t, f, ds, ScanOptions{In: byName})
	_, _, got := scanIDs(t, f, ds, ScanOptions{In: byName, ChangedSince: s0})
	require.Equal(t, 2, files)
	require.Equal(t, files, got, "the merge key not among In's columns")
	s1 := headSnapshot(t, f, ds)
	check("nothing since: no merge", ScanOptions{In: in, ChangedSince: s1}, 2)
	check("not an ancestor", ScanOptions{In: in, ChangedSince: 12345}, 2)

	// A compaction since keeps it (its file is new: read).
	_, _, err = f.compact(ctx, tbl, compactOptions{MinFiles: 2})
	require.NoError(t, err)
	check("a compaction since", ScanOptions{In: in, ChangedSince: s0}, 1)
	s2 := headSnapshot(t, f, ds)
	mergeWrite(t, f, ds, ids, v(2, 10))
	_, gotNames, got := scanIDs(t, f, ds, ScanOptions{In: []In{{Column: "id", Values: []any{int64(10)}}}, ChangedSince: s2})
	require.Equal(t, map[int64]string{10: "v2"}, gotNames)
	require.Equal(t, 1, got, "only the merge's file")

	// An append since: every file is read.
	s3 := headSnapshot(t, f, ds)
	_, err = f.Write(ctx, Target{DatasetID: ds}, WriteRequest{Mode: Append, Schema: mergeSchema, Rows: mergeRowsOf([]int64{2000}, v(0), nil)})
	require.NoError(t, err)
	_, _, files = scanIDs(t, f, ds, ScanOptions{In: []In{{Column: "id", Values: []any{int64(10), int64(2000)}}}})
	_, _, got = scanIDs(t, f, ds, ScanOptions{In: []In{{Column: "id", Values: []any{int64(10), int64(2000)}}}, ChangedSince: s3})
	require.Equal(t, files, got, "an append since")

	// A merge over a table holding a key twice is written as a full
	// replace: no merge key recorded, every file read.
	_, err = f.Write(ctx, Target{DatasetID: ds}, WriteRequest{Mode: Append, Schema: mergeSchema, Rows: mergeRowsOf([]int64{10}, v(0), nil)})
	require.NoError(t, err)
	s4 := headSnapshot(t, f, ds)
	mergeWrite(t, f, ds, ids, v(3, 20))
	tbl, err = f.LoadTable(ctx, ds)
	require.NoError(t, err)
	require.NotContains(t, tbl.CurrentSnapshot().Summary.Properties, vocab.SummaryMergeKey)
	_, gotNames, _ = scanIDs(t, f, ds, ScanOptions{In: []In{{Column: "id", Values: []any{int64(20)}}}, ChangedSince: s4})
	require.Equal(t, map[int64]string{20: "v3"}, gotNames)
}
