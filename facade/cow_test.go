package facade

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/internal/scanfiles"
)

// mergeOnRead keeps every merge merge-on-read (the tests of deletes).
func mergeOnRead(c *Config) { c.mergeCoWShare = 2 }

// copyOnWriteAll makes every merge that removes rows copy-on-write.
func copyOnWriteAll(c *Config) { c.mergeCoWShare = 1e-9 }

// headState is the current snapshot's operation, its data file paths and
// how many delete files and deletion vectors it applies.
func headState(t *testing.T, f *Facade, ds string) (op table.Operation, data []string, deletes int) {
	t.Helper()
	tbl := mustLoad(t, f, ds)
	tasks, err := scanfiles.Plan(context.Background(), tbl.Scan())
	require.NoError(t, err)
	for _, tk := range tasks {
		data = append(data, tk.File.FilePath())
	}
	dvs, pos := liveDVs(t, f, ds)
	slices.Sort(data)
	return tbl.CurrentSnapshot().Summary.Operation, data, len(dvs) + pos
}

// checkRows asserts the table holds exactly the rows ids with names name.
func checkRows(t *testing.T, f *Facade, ds string, ids []int64, name func(int64) string) {
	t.Helper()
	want, err := ChecksumBatches(mergeRowsOf(ids, name, nil))
	require.NoError(t, err)
	got, err := f.Checksum(context.Background(), ds, 0)
	require.NoError(t, err)
	require.Equal(t, want, got)
	live := liveIdentity(t, f, ds)
	require.Len(t, live, len(ids))
	for _, id := range ids {
		require.Contains(t, live, id)
	}
}

// without returns ids less those drop reports.
func without(ids []int64, drop func(int64) bool) []int64 {
	return slices.DeleteFunc(slices.Clone(ids), drop)
}

// A merge is merge-on-read below the share of the touched files' live
// rows it removes and copy-on-write at or above it: each side of the
// crossover (moved to a quarter here) by one row.
func TestMergeCoWCrossover(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t, func(c *Config) { c.mergeCoWShare = 0.25 })
	f := env.f
	const ds = "crossover"
	mergeWrite(t, f, ds, idRange(0, 1000), plainName) // one file
	_, first, _ := headState(t, f, ds)

	// 237 of 1000 live rows: below a quarter, position deletes.
	res, preserved := mergeWrite(t, f, ds, idRange(237, 1000), plainName)
	require.Equal(t, int64(763), preserved)
	require.Equal(t, "237", res.Summary["added-position-deletes"])
	_, data, dels := headState(t, f, ds)
	require.Equal(t, first, data)
	require.Equal(t, 1, dels)

	// 191 of the 763 live rows: at or above a quarter, the file is
	// rewritten with both merges' deletes applied.
	ids := idRange(428, 1000)
	res, preserved = mergeWrite(t, f, ds, ids, plainName)
	require.Equal(t, int64(572), preserved)
	require.Equal(t, int64(572), res.Rows)
	op, data, dels := headState(t, f, ds)
	require.Equal(t, table.OpOverwrite, op)
	require.Zero(t, dels, "the rewrite leaves no deletes")
	require.Len(t, data, 1)
	require.NotEqual(t, first, data)
	require.Empty(t, res.Summary["added-position-deletes"])
	require.Equal(t, "1000", res.Summary["deleted-records"])
	require.Equal(t, "572", res.Summary["added-records"])
	require.Equal(t, "1000", res.Summary[summaryNextRowIndex], "no row was written anew")
	checkRows(t, f, ds, ids, plainName)
}

// A copy-on-write merge over a file that already has position deletes:
// keys gone, rows changed and new keys; the rows a merge-on-read merge
// deleted before stay deleted, the untouched file stays, unchanged rows
// keep their identity; later merges (copy-on-write and merge-on-read) and
// a compaction keep the rows and their identity right.
func TestMergeCoWRows(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t)
	f := env.f
	const ds = "cowrows"
	plainWrite(t, f, ds, Append, idRange(0, 500))
	_, fileA, _ := headState(t, f, ds)
	plainWrite(t, f, ds, Append, idRange(500, 1000))
	_, files0, _ := headState(t, f, ds)
	require.Len(t, files0, 2)
	fileB := slices.DeleteFunc(files0, func(p string) bool { return p == fileA[0] })

	f.s.mergeCoWShare = 2
	mergeWrite(t, f, ds, idRange(50, 1000), plainName) // 0..49 gone by position delete
	_, _, dels := headState(t, f, ds)
	require.Equal(t, 1, dels)
	orig := liveIdentity(t, f, ds)

	f.s.mergeCoWShare = 1e-9
	// 100..149 gone, 200..209 changed, 1000..1009 new; file B untouched.
	ids := without(idRange(50, 1010), func(id int64) bool { return id >= 100 && id < 150 })
	changed := func(id int64) string {
		if id >= 200 && id < 210 {
			return "changed"
		}
		return "n"
	}
	res, preserved := mergeWrite(t, f, ds, ids, changed)
	require.Equal(t, int64(len(ids)), res.Rows)
	require.Equal(t, int64(len(ids)-20), preserved)
	want, err := ChecksumBatches(mergeRowsOf(ids, changed, nil))
	require.NoError(t, err)
	require.Equal(t, want, res.Checksum)
	op, files1, dels := headState(t, f, ds)
	require.Equal(t, table.OpOverwrite, op)
	require.Zero(t, dels)
	require.Contains(t, files1, fileB[0], "the untouched file stays")
	require.NotContains(t, files1, fileA[0])
	require.Equal(t, "500", res.Summary["deleted-records"])
	require.Equal(t, strconv.Itoa(390+20), res.Summary["added-records"])
	require.Equal(t, "1020", res.Summary[summaryNextRowIndex])
	checkRows(t, f, ds, ids, changed)
	live := liveIdentity(t, f, ds)
	for _, id := range ids {
		if id < 1000 && changed(id) == "n" {
			require.Equal(t, orig[id], live[id], "id %d keeps its identity", id)
		}
	}
	for id := range int64(50) {
		require.NotContains(t, live, id, "a row an earlier delete removed stays removed")
	}

	// A second copy-on-write merge, of the rewritten file and file B.
	again := func(id int64) string {
		if id%100 == 1 {
			return "again"
		}
		return changed(id)
	}
	_, preserved = mergeWrite(t, f, ds, ids, again) // 201, 301, ..., 1001 change
	require.Equal(t, int64(len(ids)-9), preserved)
	checkRows(t, f, ds, ids, again)

	// A third, merge-on-read: position deletes on the rewritten files.
	f.s.mergeCoWShare = 2
	ids = without(ids, func(id int64) bool { return id >= 600 && id < 610 })
	mergeWrite(t, f, ds, ids, again)
	_, _, dels = headState(t, f, ds)
	require.Positive(t, dels)
	checkRows(t, f, ds, ids, again)
	before := liveIdentity(t, f, ds)

	rep, err := f.MaintainWith(context.Background(), ds, Lifecycle{CompactMinFiles: 2, KeepLast: 1, FileGrace: -1, OrphanEvery: -1})
	require.NoError(t, err)
	require.Positive(t, rep.CompactedFiles)
	_, _, dels = headState(t, f, ds)
	require.Zero(t, dels)
	checkRows(t, f, ds, ids, again)
	require.Equal(t, before, liveIdentity(t, f, ds), "compaction after copy-on-write keeps every identity column")
}

// On format v3 a copy-on-write merge over a file with a deletion vector
// removes the vector with the file; the rows it carries keep their
// _row_id and _last_updated_sequence_number, a changed row is a new row;
// a merge-on-read merge after it writes one vector per file.
func TestMergeCoWV3Lineage(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t, v3, mergeOnRead)
	f := env.f
	const ds = "cowv3"
	for i := range 3 {
		plainWrite(t, f, ds, Append, idRange(int64(i)*100, int64(i+1)*100))
	}
	mergeWrite(t, f, ds, idRange(20, 300), plainName) // a vector on the first file
	dvs, _ := liveDVs(t, f, ds)
	require.Len(t, dvs, 1)
	lin0, ident0 := lineageOf(t, f, ds), liveIdentity(t, f, ds)

	f.s.mergeCoWShare = 1e-9
	// 20..39 gone, 150..159 changed: the first two files are rewritten.
	ids := idRange(40, 300)
	changed := func(id int64) string {
		if id >= 150 && id < 160 {
			return "changed"
		}
		return "n"
	}
	res, preserved := mergeWrite(t, f, ds, ids, changed)
	require.Equal(t, int64(len(ids)-10), preserved)
	require.Equal(t, table.OpOverwrite, mustLoad(t, f, ds).CurrentSnapshot().Summary.Operation)
	dvs, pos := liveDVs(t, f, ds)
	require.Empty(t, dvs)
	require.Zero(t, pos)
	checkRows(t, f, ds, ids, changed)
	lin1, ident1 := lineageOf(t, f, ds), liveIdentity(t, f, ds)
	seq := lin1[150][1]
	for _, id := range ids {
		if changed(id) == "n" {
			require.Equal(t, lin0[id], lin1[id], "id %d: carried, same lineage", id)
			require.Equal(t, ident0[id], ident1[id], "id %d: carried, same identity", id)
			continue
		}
		require.NotEqual(t, lin0[id][0], lin1[id][0], "id %d: changed, a new row", id)
		require.Greater(t, seq, lin0[id][1])
		require.Equal(t, seq, lin1[id][1])
	}
	require.NotEmpty(t, res.Summary[summaryNextRowIndex])

	// merge-on-read again: one vector per touched file, lineage kept
	f.s.mergeCoWShare = 2
	ids = without(ids, func(id int64) bool { return id%50 == 0 })
	mergeWrite(t, f, ds, ids, changed)
	dvs, _ = liveDVs(t, f, ds)
	require.NotEmpty(t, dvs)
	lin2 := lineageOf(t, f, ds)
	for _, id := range ids {
		require.Equal(t, lin1[id], lin2[id], "id %d", id)
	}
	// copy-on-write of files with vectors written after a rewrite
	f.s.mergeCoWShare = 1e-9
	ids = without(ids, func(id int64) bool { return id%50 == 1 })
	mergeWrite(t, f, ds, ids, changed)
	dvs, _ = liveDVs(t, f, ds)
	require.Empty(t, dvs)
	lin3 := lineageOf(t, f, ds)
	for _, id := range ids {
		require.Equal(t, lin1[id], lin3[id], "id %d", id)
	}
	checkRows(t, f, ds, ids, changed)
}

// On a partitioned table a copy-on-write merge rewrites the touched
// partitions' files within their partitions, removes a file it empties
// and leaves the other partitions' files alone.
func TestMergeCoWPartitioned(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t, copyOnWriteAll, func(c *Config) {
		c.PartitionFor = func(string) (Partitioning, bool) {
			return Partitioning{Fields: []PartitionField{{Column: "id", Transform: "truncate[100]"}}}, true
		}
	})
	f := env.f
	const ds = "cowpart"
	mergeWrite(t, f, ds, idRange(0, 400), plainName) // four partitions
	_, files0, _ := headState(t, f, ds)
	require.Len(t, files0, 4)

	// partition 0 loses a third, partition 3 everything, 100..199 and
	// 200..299 stay; 450..459 are new (partition 4)
	ids := without(idRange(0, 300), func(id int64) bool { return id < 100 && id%3 == 0 })
	ids = append(ids, idRange(450, 460)...)
	_, preserved := mergeWrite(t, f, ds, ids, plainName)
	require.Equal(t, int64(len(ids)-10), preserved)
	op, files1, dels := headState(t, f, ds)
	require.Equal(t, table.OpOverwrite, op)
	require.Zero(t, dels)
	require.Len(t, files1, 4, "partition 0 rewritten, 3 removed, 4 new")
	require.Subset(t, files1, files0[1:3])
	tbl := mustLoad(t, f, ds)
	spec := tbl.Spec()
	tasks, err := scanfiles.Plan(context.Background(), tbl.Scan())
	require.NoError(t, err)
	for _, tk := range tasks {
		require.NotEmpty(t, tk.File.Partition())
		require.Equal(t, spec.ID(), int(tk.File.SpecID()))
	}
	checkRows(t, f, ds, ids, plainName)

	changed := func(id int64) string {
		if id%10 == 5 {
			return "changed"
		}
		return "n"
	}
	mergeWrite(t, f, ds, ids, changed)
	checkRows(t, f, ds, ids, changed)
}

// On format v3 the default keeps a merge merge-on-read (a deletion
// vector) even when it removes 99% of a file's rows, and drops the file,
// its vector with it, once a merge removes every row it still has.
func TestMergeCoWV3Default(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t, v3)
	f := env.f
	const ds = "cowv3default"
	plainWrite(t, f, ds, Append, idRange(0, 100))
	_, fileA, _ := headState(t, f, ds)
	plainWrite(t, f, ds, Append, idRange(100, 200))
	lin0 := lineageOf(t, f, ds)

	mergeWrite(t, f, ds, idRange(99, 200), plainName)
	dvs, _ := liveDVs(t, f, ds)
	require.Len(t, dvs, 1, "99% of the file: a deletion vector")
	require.Contains(t, dvs, fileA[0])

	ids := idRange(100, 210)
	mergeWrite(t, f, ds, ids, plainName)
	op, data, dels := headState(t, f, ds)
	require.Equal(t, table.OpOverwrite, op)
	require.Zero(t, dels, "the emptied file went with its vector")
	require.NotContains(t, data, fileA[0])
	checkRows(t, f, ds, ids, plainName)
	lin := lineageOf(t, f, ds)
	for id := int64(100); id < 200; id++ {
		require.Equal(t, lin0[id], lin[id], "id %d", id)
	}
}

// A copy-on-write merge whose table moved before its commit conflicts:
// nothing lands, and the rewrites and new rows it wrote are deleted.
func TestMergeCoWConflict(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t, copyOnWriteAll)
	f := env.f
	const ds = "cowconflict"
	mergeWrite(t, f, ds, idRange(0, 500), plainName)
	var preserved int64
	changed := func(id int64) string {
		if id%10 == 0 {
			return "changed"
		}
		return "n"
	}
	st, err := f.Stage(context.Background(), Target{DatasetID: ds}, WriteRequest{Mode: Replace, Schema: mergeSchema,
		Rows: mergeRowsOf(idRange(100, 520), changed, &preserved)})
	require.NoError(t, err)
	require.Len(t, parquetFiles(t, env.warehouse), 3, "the target, its rewrite and the new rows")
	plainWrite(t, f, ds, Append, idRange(1000, 1010))
	_, err = st.Commit(context.Background())
	require.ErrorIs(t, err, ErrCommitConflict)
	require.Len(t, parquetFiles(t, env.warehouse), 2, "the merge's files are deleted")
	checkRows(t, f, ds, slices.Concat(idRange(0, 500), idRange(1000, 1010)), plainName)
}

// Through the Postgres catalog (the commit in one Postgres transaction) a
// copy-on-write merge lands as one overwrite snapshot, on v2 and v3.
func TestMergeCoWPostgresCatalog(t *testing.T) {
	t.Parallel()
	pc, err := NewPostgresCatalog(context.Background(), pgtest.Pool(t), CatalogConfig{Warehouse: t.TempDir()})
	require.NoError(t, err)
	for _, v := range []int{2, 3} {
		ds := "cowpg_v" + strconv.Itoa(v)
		f, err := New(pc, &Config{CommitRetries: -1, mergeCoWShare: 1e-9,
			FormatVersionFor: func(string) (int, bool) { return v, true }})
		require.NoError(t, err)
		mergeWrite(t, f, ds, idRange(0, 300), plainName)
		ids := idRange(100, 320)
		changed := func(id int64) string {
			if id%7 == 0 {
				return "changed"
			}
			return "n"
		}
		mergeWrite(t, f, ds, ids, changed)
		op, _, dels := headState(t, f, ds)
		require.Equal(t, table.OpOverwrite, op)
		require.Zero(t, dels)
		checkRows(t, f, ds, ids, changed)
		if v == 3 {
			require.Len(t, lineageOf(t, f, ds), len(ids))
		}
	}
}
