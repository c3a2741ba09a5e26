package facade

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
)

// rowStrings renders the rows of batches as "name=value" lists.
func rowStrings(rec arrow.RecordBatch) []string {
	var out []string
	for r := range int(rec.NumRows()) {
		var parts []string
		for c, f := range rec.Schema().Fields() {
			parts = append(parts, f.Name+"="+rec.Column(c).ValueStr(r))
		}
		slices.Sort(parts) // column order aside
		out = append(out, strings.Join(parts, ","))
	}
	return out
}

// snapshotRows is the multiset of the rows of snapshot snap (none for 0),
// projected to cols, sorted.
func snapshotRows(t *testing.T, f *Facade, ds string, snap int64, cols []string) []string {
	t.Helper()
	out := []string{}
	if snap == 0 {
		return out
	}
	for rec, err := range f.Scan(context.Background(), ds, ScanOptions{SnapshotID: snap, Columns: cols}) {
		require.NoError(t, err)
		out = append(out, rowStrings(rec)...)
	}
	slices.Sort(out)
	return out
}

// multisetMinus is a - b, both sorted.
func multisetMinus(a, b []string) []string {
	out := []string{}
	i := 0
	for _, x := range a {
		for i < len(b) && b[i] < x {
			i++
		}
		if i < len(b) && b[i] == x {
			i++
			continue
		}
		out = append(out, x)
	}
	return out
}

// changeTruth is the truth of a window: the rows of from that to lacks
// and the rows of to that from lacks (multisets).
func changeTruth(t *testing.T, f *Facade, ds string, from, to int64, cols []string) (removed, added []string) {
	t.Helper()
	a, b := snapshotRows(t, f, ds, from, cols), snapshotRows(t, f, ds, to, cols)
	return multisetMinus(a, b), multisetMinus(b, a)
}

// readChanges collects Changes, sorted, releasing every batch.
func readChanges(t *testing.T, f *Facade, ds string, from, to int64, cols []string) (removed, added []string, err error) {
	t.Helper()
	removed, added = []string{}, []string{}
	for c, e := range f.Changes(context.Background(), ds, from, to, cols) {
		if e != nil {
			return nil, nil, e
		}
		require.Equal(t, len(cols), int(c.Rows.NumCols()))
		if c.Removed {
			removed = append(removed, rowStrings(c.Rows)...)
		} else {
			added = append(added, rowStrings(c.Rows)...)
		}
		c.Rows.Release()
	}
	slices.Sort(removed)
	slices.Sort(added)
	return removed, added, nil
}

var changeCols = []string{ColRowID, "id", "name"}

// checkWindow asserts that the changes of (from, to] are exactly the
// truth; net cancels a row removed and added within the window first
// (a window of several snapshots).
func checkWindow(t *testing.T, f *Facade, ds string, from, to int64, net bool, what string) (removed, added []string) {
	t.Helper()
	wr, wa := changeTruth(t, f, ds, from, to, changeCols)
	gr, ga, err := readChanges(t, f, ds, from, to, changeCols)
	require.NoError(t, err, what)
	if net {
		gr, ga = multisetMinus(gr, ga), multisetMinus(ga, gr)
	}
	require.Equal(t, wr, gr, "%s: old images: missing %v, extra %v", what, multisetMinus(wr, gr), multisetMinus(gr, wr))
	require.Equal(t, wa, ga, "%s: new images: missing %v, extra %v", what, multisetMinus(wa, ga), multisetMinus(ga, wa))
	// integer columns only, twice: with Config.ScopeIndexBytes the second
	// read takes the old images from the columns the first one kept
	wr, wa = changeTruth(t, f, ds, from, to, intChangeCols)
	for range 2 {
		ir, ia, err := readChanges(t, f, ds, from, to, intChangeCols)
		require.NoError(t, err, what)
		if net {
			ir, ia = multisetMinus(ir, ia), multisetMinus(ia, ir)
		}
		require.Equal(t, wr, ir, "%s: old images of integer columns", what)
		require.Equal(t, wa, ia, "%s: new images of integer columns", what)
	}
	return gr, ga
}

var intChangeCols = []string{"id", ColRowID}

func headID(t *testing.T, f *Facade, ds string) int64 {
	t.Helper()
	return mustLoad(t, f, ds).CurrentSnapshot().SnapshotID
}

// Changes between two snapshots, for each kind of write on v2 and v3
// tables, partitioned and not, equal the difference of full scans of the
// two snapshots: appends, merges on read (position deletes, deletion
// vectors, a second merge on the same files superseding their vectors),
// a copy-on-write merge (only the rows it changes, the rows its rewrite
// carries net out), a full replace; a compaction yields nothing; an
// expired or unrelated from is ErrChangesUnknown.
func TestChangesWriteKinds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		version int
		part    bool
		cached  bool
	}{{2, false, false}, {2, true, false}, {3, false, false}, {3, true, false}, {2, true, true}, {3, false, true}}
	for _, tc := range cases {
		version, part := tc.version, tc.part
		t.Run(fmt.Sprintf("v%d/partitioned=%v/cached=%v", version, part, tc.cached), func(t *testing.T) {
			t.Parallel()
			tune := []func(*Config){func(c *Config) {
				c.mergeCoWShare = 0.3
				c.FormatVersionFor = func(string) (int, bool) { return version, true }
				if tc.cached {
					c.ScopeIndexBytes = 64 << 20
				}
			}}
			if part {
				tune = append(tune, func(c *Config) {
					c.PartitionFor = func(string) (Partitioning, bool) {
						return Partitioning{Fields: []PartitionField{{Column: "id", Transform: "truncate[100]"}}}, true
					}
				})
			}
			f := newCompactEnv(t, tune...).f
			testChangesWriteKinds(t, f, version)
			if hits, _ := f.keys.Stats(); tc.cached {
				require.NotZero(t, hits, "old images taken from kept columns")
			}
		})
	}
}

func testChangesWriteKinds(t *testing.T, f *Facade, version int) {
	ctx := context.Background()
	const ds = "changes"
	var snaps []int64
	mark := func() int64 {
		id := headID(t, f, ds)
		snaps = append(snaps, id)
		return id
	}
	prev := func() int64 { return snaps[len(snaps)-2] }

	plainWrite(t, f, ds, Append, idRange(0, 400))
	mark()
	checkWindow(t, f, ds, 0, snaps[0], false, "first append")
	plainWrite(t, f, ds, Append, idRange(400, 600))
	mark()
	_, added := checkWindow(t, f, ds, prev(), snaps[1], false, "append")
	require.Len(t, added, 200)

	// merge on read: 12 keys gone, 12 rows changed, 19 new keys
	ids1 := slices.DeleteFunc(idRange(0, 620), func(id int64) bool { return id%50 == 3 })
	name1 := func(id int64) string {
		if id%50 == 7 {
			return "changed"
		}
		return "n"
	}
	res, _ := mergeWrite(t, f, ds, ids1, name1)
	mark()
	require.Equal(t, "0", summaryOr(res.Summary, "deleted-data-files", "0"), "merge on read")
	removed, added := checkWindow(t, f, ds, prev(), mark2(snaps), false, "merge on read")
	require.Len(t, removed, 24)
	require.Len(t, added, 31) // 12 changed, 600..619 but 603

	// a second merge on the same files (on v3 its vectors supersede the
	// first merge's)
	name2 := func(id int64) string {
		if id%50 == 9 {
			return "again"
		}
		return name1(id)
	}
	mergeWrite(t, f, ds, ids1, name2)
	mark()
	removed, added = checkWindow(t, f, ds, prev(), mark2(snaps), false, "second merge")
	require.Len(t, removed, 13) // 9, 59, ..., 609
	require.Len(t, added, 13)
	if version >= 3 {
		dvs, _ := liveDVs(t, f, ds)
		require.NotEmpty(t, dvs)
	}
	checkWindow(t, f, ds, snaps[1], mark2(snaps), true, "two merges")

	// compaction changes no row
	rep, err := f.MaintainWith(ctx, ds, Lifecycle{CompactMinFiles: 2, KeepLast: 100, FileGrace: -1, OrphanEvery: -1})
	require.NoError(t, err)
	require.NotZero(t, rep.CompactedFiles)
	mark()
	require.NotEqual(t, prev(), mark2(snaps))
	removed, added, err = readChanges(t, f, ds, prev(), mark2(snaps), changeCols)
	require.NoError(t, err)
	require.Empty(t, removed, "compaction")
	require.Empty(t, added, "compaction")

	// copy-on-write: every other row changes; the rows the rewrite carries
	// net out
	name3 := func(id int64) string {
		if id%2 == 0 {
			return "cow"
		}
		return name2(id)
	}
	res, _ = mergeWrite(t, f, ds, ids1, name3)
	mark()
	op, _, dels := headState(t, f, ds)
	require.Equal(t, table.OpOverwrite, op, "copy-on-write")
	require.Zero(t, dels)
	require.NotEqual(t, "0", summaryOr(res.Summary, "deleted-data-files", "0"))
	removed, added = checkWindow(t, f, ds, prev(), mark2(snaps), false, "copy-on-write")
	require.Len(t, removed, 310) // the even ids of 0..619
	require.Len(t, added, 310)

	// a full replace
	plainWrite(t, f, ds, Replace, idRange(100, 500))
	mark()
	checkWindow(t, f, ds, prev(), mark2(snaps), false, "replace")
	checkWindow(t, f, ds, 0, mark2(snaps), true, "whole history")

	// a column subset, and no change at all
	r, a, err := readChanges(t, f, ds, snaps[0], snaps[1], []string{"id"})
	require.NoError(t, err)
	require.Empty(t, r)
	require.Len(t, a, 200)
	r, a, err = readChanges(t, f, ds, mark2(snaps), mark2(snaps), changeCols)
	require.NoError(t, err)
	require.Empty(t, r)
	require.Empty(t, a)

	_, _, err = readChanges(t, f, ds, snaps[0], snaps[1], []string{"nope"})
	require.ErrorIs(t, err, ErrInvalidRequest)
	// not an ancestor
	_, _, err = readChanges(t, f, ds, snaps[3], snaps[1], changeCols)
	require.ErrorIs(t, err, ErrChangesUnknown)
	_, _, err = readChanges(t, f, ds, 0, 12345, changeCols)
	require.ErrorIs(t, err, ErrChangesUnknown)
	_, _, err = readChanges(t, f, "no-such", 0, 0, changeCols)
	require.ErrorIs(t, err, ErrChangesUnknown)

	// expired
	_, err = f.MaintainWith(ctx, ds, Lifecycle{KeepLast: 1, EveryCommits: 1, FileGrace: -1, OrphanEvery: -1, CompactMinFiles: 1000})
	require.NoError(t, err)
	_, _, err = readChanges(t, f, ds, snaps[0], 0, changeCols)
	require.ErrorIs(t, err, ErrChangesUnknown)
}

func mark2(snaps []int64) int64 { return snaps[len(snaps)-1] }

func summaryOr(m map[string]string, k, def string) string {
	if v, ok := m[k]; ok {
		return v
	}
	return def
}

// A data file of the window gone from storage: ErrChangesUnknown.
func TestChangesFileGone(t *testing.T) {
	t.Parallel()
	f := newCompactEnv(t).f
	const ds = "gone"
	plainWrite(t, f, ds, Append, idRange(0, 10))
	from := headID(t, f, ds)
	res, err := f.Write(context.Background(), Target{DatasetID: ds}, WriteRequest{Mode: Append, Schema: mergeSchema, Rows: mergeRowsOf(idRange(10, 20), plainName, nil)})
	require.NoError(t, err)
	require.Len(t, res.DataFiles, 1)
	_, added, err := readChanges(t, f, ds, from, res.SnapshotID, changeCols)
	require.NoError(t, err)
	require.Len(t, added, 10)
	require.NoError(t, os.Remove(strings.TrimPrefix(res.DataFiles[0].Path, "file://")))
	_, _, err = readChanges(t, f, ds, from, res.SnapshotID, changeCols)
	require.ErrorIs(t, err, ErrChangesUnknown)
}

// The snapshot changes are read from may be expired when the snapshot
// after it does not need the files live before it: a compaction committed
// right after a write (as maintenance does) leaves the write's snapshot to
// age out first, and the changes from it stay known. A window whose first
// snapshot needs them (a merge on files of the expired one) is unknown.
func TestChangesFromExpired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newCompactEnv(t).f
	const ds = "fromexpired"
	plainWrite(t, f, ds, Append, idRange(0, 300))
	first := headID(t, f, ds)
	plainWrite(t, f, ds, Append, idRange(300, 400))
	ids := slices.DeleteFunc(idRange(0, 420), func(id int64) bool { return id%40 == 3 })
	name := func(id int64) string {
		if id%40 == 7 {
			return "changed"
		}
		return "n"
	}
	mergeWrite(t, f, ds, ids, name)
	from := headID(t, f, ds)
	rep, err := f.MaintainWith(ctx, ds, Lifecycle{CompactMinFiles: 2, KeepLast: 100, FileGrace: -1, OrphanEvery: -1})
	require.NoError(t, err)
	require.NotZero(t, rep.CompactedFiles)
	name2 := func(id int64) string {
		if id%40 == 9 {
			return "again"
		}
		return name(id)
	}
	mergeWrite(t, f, ds, ids, name2)
	to := headID(t, f, ds)
	wantRemoved, wantAdded, err := readChanges(t, f, ds, from, to, changeCols)
	require.NoError(t, err)
	require.NotEmpty(t, wantRemoved)
	require.NotEmpty(t, wantAdded)

	// keep the compaction, the merge after it and what this maintenance
	// commits (a rewrite of delete files) only
	_, err = f.MaintainWith(ctx, ds, Lifecycle{KeepLast: 3, EveryCommits: 1, FileGrace: -1, OrphanEvery: -1, CompactMinFiles: 1000})
	require.NoError(t, err)
	tbl, err := f.LoadTable(ctx, ds)
	require.NoError(t, err)
	require.Nil(t, tbl.Metadata().SnapshotByID(from), "from is expired")
	removed, added, err := readChanges(t, f, ds, from, to, changeCols)
	require.NoError(t, err, "a compaction after from needs none of its files")
	require.Equal(t, wantRemoved, removed)
	require.Equal(t, wantAdded, added)
	// from the first append: the merge after it is expired too
	_, _, err = readChanges(t, f, ds, first, to, changeCols)
	require.ErrorIs(t, err, ErrChangesUnknown)
}
