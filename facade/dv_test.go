package facade

import (
	"context"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
)

// v3 declares format version 3 for every dataset.
func v3(c *Config) {
	c.FormatVersionFor = func(string) (int, bool) { return 3, true }
}

// liveDVs checks that the current snapshot holds at most one live
// deletion vector per data file and returns them by data file path; pos
// counts the live Parquet position delete files.
func liveDVs(t *testing.T, f *Facade, ds string) (byFile map[string]iceberg.DataFile, pos int) {
	t.Helper()
	byFile = map[string]iceberg.DataFile{}
	for _, d := range liveDeleteFiles(t, f, ds) {
		if !isDV(d) {
			pos++
			continue
		}
		ref := d.ReferencedDataFile()
		require.NotNil(t, ref)
		_, dup := byFile[*ref]
		require.False(t, dup, "two live deletion vectors for %s", *ref)
		byFile[*ref] = d
	}
	return byFile, pos
}

// liveDeleteFiles are the delete files (position delete files and
// deletion vectors) of the current snapshot of ds.
func liveDeleteFiles(t *testing.T, f *Facade, ds string) []iceberg.DataFile {
	t.Helper()
	tbl, err := f.LoadTable(context.Background(), ds)
	require.NoError(t, err)
	fs, err := tbl.FS(context.Background())
	require.NoError(t, err)
	mfs, err := tbl.CurrentSnapshot().Manifests(fs)
	require.NoError(t, err)
	var out []iceberg.DataFile
	for _, m := range mfs {
		if m.ManifestContent() != iceberg.ManifestContentDeletes {
			continue
		}
		for e, err := range m.Entries(fs, true) {
			require.NoError(t, err)
			out = append(out, e.DataFile())
		}
	}
	return out
}

// On a v3 table a merge writes deletion vectors, never position delete
// files; repeated merges touching the same data file keep one live vector
// for it, holding every position deleted so far.
func TestMergeV3DeletionVectors(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t, v3, mergeOnRead)
	f := env.f
	const ds = "dv"
	mergeWrite(t, f, ds, idRange(0, 1000), plainName)
	tbl, err := f.LoadTable(context.Background(), ds)
	require.NoError(t, err)
	require.Equal(t, 3, tbl.Metadata().Version())
	orig := liveIdentity(t, f, ds)

	total := int64(0)
	for round := range 4 {
		// each round deletes 10 more keys and changes 5 rows of the same file
		ids := idRange(int64(round+1)*10, 1000)
		name := func(id int64) string {
			if id >= 995 {
				return "r" + string(rune('a'+round))
			}
			return "n"
		}
		res, preserved := mergeWrite(t, f, ds, ids, name)
		require.Equal(t, int64(len(ids)-5), preserved)
		total += 10 + 5
		// a new vector replaces the file's vector: it holds its positions too
		if round > 0 {
			require.NotEmpty(t, res.Summary["removed-position-delete-files"], "round %d: %v", round, res.Summary)
		}
		require.Equal(t, strconv.FormatInt(total, 10), res.Summary["total-position-deletes"], "round %d", round)
		dvs, pos := liveDVs(t, f, ds)
		require.Zero(t, pos, "no position delete files on a v3 table")
		var card int64
		for _, d := range dvs {
			card += d.Count()
		}
		require.Equal(t, total, card, "round %d: the live vectors hold every deleted position once", round)
		want, err := ChecksumBatches(mergeRowsOf(ids, name, nil))
		require.NoError(t, err)
		got, err := f.Checksum(context.Background(), ds, 0)
		require.NoError(t, err)
		require.Equal(t, want, got, "round %d", round)
		live := liveIdentity(t, f, ds)
		require.Len(t, live, len(ids))
		for _, id := range ids[:len(ids)-5] {
			require.Equal(t, orig[id], live[id], "id %d keeps its identity", id)
		}
	}
	tbl, err = f.LoadTable(context.Background(), ds)
	require.NoError(t, err)
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	require.NoError(t, err)
	for _, tk := range tasks {
		require.LessOrEqual(t, len(tk.DeletionVectorFiles), 1)
		require.Empty(t, tk.DeleteFiles)
	}
}

var mergeSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// lineageOf reads the Iceberg row lineage (_row_id,
// _last_updated_sequence_number) of the current rows by id; every row has
// both, and no _row_id is read twice.
func lineageOf(t *testing.T, f *Facade, ds string) map[int64][2]int64 {
	t.Helper()
	tbl, err := f.LoadTable(context.Background(), ds)
	require.NoError(t, err)
	_, recs, err := tbl.Scan(table.WithRowLineage()).ToArrowRecords(context.Background())
	require.NoError(t, err)
	out := map[int64][2]int64{}
	seen := map[int64]bool{}
	for rec, err := range recs {
		require.NoError(t, err)
		sc := rec.Schema()
		ids := rec.Column(sc.FieldIndices("id")[0]).(*array.Int64)
		rid := rec.Column(sc.FieldIndices(iceberg.RowIDColumnName)[0]).(*array.Int64)
		seq := rec.Column(sc.FieldIndices(iceberg.LastUpdatedSequenceNumberColumnName)[0]).(*array.Int64)
		for i := range int(rec.NumRows()) {
			require.False(t, rid.IsNull(i) || seq.IsNull(i), "id %d has no lineage", ids.Value(i))
			require.False(t, seen[rid.Value(i)], "_row_id %d read twice", rid.Value(i))
			seen[rid.Value(i)] = true
			out[ids.Value(i)] = [2]int64{rid.Value(i), seq.Value(i)}
		}
		rec.Release()
	}
	return out
}

// On a v3 table the rows a merge leaves in place keep their Iceberg row
// lineage, and so do the rows compaction moves to new files (with
// lakewrite's identity columns); a changed row is a new row.
func TestMergeV3RowLineage(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t, v3, mergeOnRead)
	f := env.f
	const ds = "lineage"
	for i := range 3 { // three files
		var preserved int64
		ids := idRange(int64(i)*100, int64(i+1)*100)
		_, err := f.Write(context.Background(), Target{DatasetID: ds}, WriteRequest{Mode: Append, Schema: mergeSchema, Rows: mergeRowsOf(ids, plainName, &preserved)})
		require.NoError(t, err)
	}
	lin0, ident0 := lineageOf(t, f, ds), liveIdentity(t, f, ds)
	require.Len(t, lin0, 300)

	// 0..49 go, 250..299 change
	ids := idRange(50, 300)
	changed := func(id int64) string {
		if id >= 250 {
			return "changed"
		}
		return "n"
	}
	_, preserved := mergeWrite(t, f, ds, ids, changed)
	require.Equal(t, int64(200), preserved)
	lin1 := lineageOf(t, f, ds)
	require.Len(t, lin1, 250)
	seq := lin1[250][1]
	for id := int64(50); id < 300; id++ {
		if id < 250 {
			require.Equal(t, lin0[id], lin1[id], "id %d: unchanged, same lineage", id)
			continue
		}
		require.NotEqual(t, lin0[id][0], lin1[id][0], "id %d: changed, a new row", id)
		require.Equal(t, seq, lin1[id][1])
		require.Greater(t, seq, lin0[id][1])
	}

	// Compaction rewrites every file (two have deletion vectors): the rows
	// move, their lineage and identity do not.
	rep, err := f.MaintainWith(context.Background(), ds, Lifecycle{CompactMinFiles: 2, KeepLast: 1, FileGrace: -1, OrphanEvery: -1})
	require.NoError(t, err)
	require.Equal(t, 4, rep.CompactedFiles, "%+v", rep)
	dvs, pos := liveDVs(t, f, ds)
	require.Empty(t, dvs, "the rewrite applied the deletion vectors")
	require.Zero(t, pos)
	require.Equal(t, lin1, lineageOf(t, f, ds), "compaction keeps the row lineage")
	ident := liveIdentity(t, f, ds)
	for id := int64(50); id < 250; id++ {
		require.Equal(t, ident0[id], ident[id], "id %d keeps its identity", id)
	}
	want, err := ChecksumBatches(mergeRowsOf(ids, changed, nil))
	require.NoError(t, err)
	got, err := f.Checksum(context.Background(), ds, 0)
	require.NoError(t, err)
	require.Equal(t, want, got)

	// A merge after the compaction: the rows it leaves keep the lineage
	// compaction carried.
	_, preserved = mergeWrite(t, f, ds, idRange(60, 300), changed)
	require.Equal(t, int64(240), preserved)
	lin2 := lineageOf(t, f, ds)
	for id := int64(60); id < 300; id++ {
		require.Equal(t, lin1[id], lin2[id], "id %d", id)
	}
}

// A v2 table with position deletes is upgraded to v3 by the first write
// after the dataset declares version 3: that merge writes deletion
// vectors holding the old position deletes too, reads apply them, and
// compaction then removes both kinds with the file it rewrites.
func TestFormatUpgradeV2ToV3(t *testing.T) {
	t.Parallel()
	version := 2
	env := newCompactEnv(t, mergeOnRead, func(c *Config) {
		c.FormatVersionFor = func(string) (int, bool) { return version, true }
	})
	f := env.f
	const ds = "upgrade"
	mergeWrite(t, f, ds, idRange(0, 1000), plainName)
	mergeWrite(t, f, ds, idRange(100, 1000), plainName) // a v2 position delete file
	tbl, err := f.LoadTable(context.Background(), ds)
	require.NoError(t, err)
	require.Equal(t, 2, tbl.Metadata().Version())
	dvs, pos := liveDVs(t, f, ds)
	require.Empty(t, dvs)
	require.Equal(t, 1, pos)
	ident := liveIdentity(t, f, ds)

	version = 3
	_, preserved := mergeWrite(t, f, ds, idRange(200, 1000), plainName)
	require.Equal(t, int64(800), preserved)
	tbl, err = f.LoadTable(context.Background(), ds)
	require.NoError(t, err)
	require.Equal(t, 3, tbl.Metadata().Version(), "upgraded in the merge's commit")
	dvs, pos = liveDVs(t, f, ds)
	require.Len(t, dvs, 1)
	require.Equal(t, 1, pos, "the old position delete file stays until compaction")
	for _, d := range dvs {
		require.Equal(t, int64(200), d.Count(), "the vector holds the old deletes and the new ones")
	}
	live := liveIdentity(t, f, ds)
	require.Len(t, live, 800)
	for id := int64(200); id < 1000; id++ {
		require.Equal(t, ident[id], live[id])
	}
	lin := lineageOf(t, f, ds) // the first v3 snapshot gave the old rows row ids

	// declaring 2 again does not downgrade
	version = 2
	mergeWrite(t, f, ds, idRange(300, 1000), plainName)
	tbl, err = f.LoadTable(context.Background(), ds)
	require.NoError(t, err)
	require.Equal(t, 3, tbl.Metadata().Version())
	dvs, _ = liveDVs(t, f, ds)
	require.Len(t, dvs, 1)

	_, err = f.MaintainWith(context.Background(), ds, Lifecycle{CompactMinFiles: 2, KeepLast: 1, FileGrace: -1, OrphanEvery: -1})
	require.NoError(t, err)
	dvs, pos = liveDVs(t, f, ds)
	require.Empty(t, dvs)
	require.Zero(t, pos)
	after := lineageOf(t, f, ds)
	require.Len(t, after, 700)
	for id := int64(300); id < 1000; id++ {
		require.Equal(t, lin[id], after[id], "id %d keeps its lineage", id)
	}
	got, err := f.Checksum(context.Background(), ds, 0)
	require.NoError(t, err)
	want, err := ChecksumBatches(mergeRowsOf(idRange(300, 1000), plainName, nil))
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// A declared version other than 2 or 3 fails the write with
// ErrInvalidRequest before anything is written.
func TestFormatVersionInvalid(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t, func(c *Config) {
		c.FormatVersionFor = func(string) (int, bool) { return 4, true }
	})
	_, err := env.f.Write(context.Background(), Target{DatasetID: "bad"}, WriteRequest{Mode: Replace, Schema: mergeSchema, Rows: mergeRowsOf(idRange(0, 10), plainName, nil)})
	require.ErrorIs(t, err, ErrInvalidRequest)
	_, err = env.f.LoadTable(context.Background(), "bad")
	require.ErrorIs(t, err, ErrTableNotFound)
}

// plainWrite writes ids with mode, not as a merge.
func plainWrite(t *testing.T, f *Facade, ds string, mode WriteMode, ids []int64) {
	t.Helper()
	_, err := f.Write(context.Background(), Target{DatasetID: ds}, WriteRequest{Mode: mode, Schema: mergeSchema, Rows: mergeRowsOf(ids, plainName, nil)})
	require.NoError(t, err)
}

// Copy-on-write writes of a v3 table never bring back rows a deletion
// vector removed: an append and a full replace after merges, and the
// compaction that rewrites the files; every row keeps a distinct _row_id.
// Expiry then deletes the Puffin files no retained snapshot needs and
// keeps the live ones.
func TestMergeV3NoResurrection(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t, v3, mergeOnRead)
	f := env.f
	const ds = "cow"
	mergeWrite(t, f, ds, idRange(0, 500), plainName)
	mergeWrite(t, f, ds, idRange(100, 500), plainName) // a vector: 0..99 gone
	plainWrite(t, f, ds, Append, idRange(1000, 1010))
	require.Len(t, liveIdentity(t, f, ds), 410, "the append leaves the deletes")
	require.Len(t, lineageOf(t, f, ds), 410)

	// a compaction planned now rewrites the file through its vector
	_, rep, err := f.compact(context.Background(), mustLoad(t, f, ds), compactOptions{MinFiles: 2})
	require.NoError(t, err)
	require.Positive(t, rep.CompactedFiles)
	live := liveIdentity(t, f, ds)
	require.Len(t, live, 410)
	for id := range int64(100) {
		require.NotContains(t, live, id)
	}
	require.Len(t, lineageOf(t, f, ds), 410)

	// merges again, then a full replace: exactly its rows
	mergeWrite(t, f, ds, idRange(200, 1010), plainName)
	old := puffinPaths(t, f, ds)
	require.NotEmpty(t, old)
	plainWrite(t, f, ds, Replace, idRange(300, 400))
	live = liveIdentity(t, f, ds)
	require.Len(t, live, 100)
	require.Len(t, lineageOf(t, f, ds), 100)
	mergeWrite(t, f, ds, idRange(350, 400), plainName)
	require.Len(t, liveIdentity(t, f, ds), 50)
	require.Len(t, lineageOf(t, f, ds), 50)
	plainWrite(t, f, ds, Append, idRange(2000, 2005))
	require.Len(t, lineageOf(t, f, ds), 55)

	// expiry: the old vectors are needed by no retained snapshot
	pol := Lifecycle{KeepLast: 1, EveryCommits: 1, FileGrace: -1, OrphanEvery: -1, CompactTargetBytes: 100}
	_, err = f.MaintainWith(context.Background(), ds, pol)
	require.NoError(t, err)
	_, err = f.MaintainWith(context.Background(), ds, pol) // the expired files' grace has passed
	require.NoError(t, err)
	for _, p := range old {
		_, err := os.Stat(p)
		require.ErrorIs(t, err, fs.ErrNotExist, "%s: no snapshot needs it", p)
	}
	for _, p := range puffinPaths(t, f, ds) {
		_, err := os.Stat(p)
		require.NoError(t, err, "a live vector's file stays")
	}
	require.Len(t, liveIdentity(t, f, ds), 55)
}

func mustLoad(t *testing.T, f *Facade, ds string) *table.Table {
	t.Helper()
	tbl, err := f.LoadTable(context.Background(), ds)
	require.NoError(t, err)
	return tbl
}

// puffinPaths lists the local paths of the current snapshot's live
// deletion vector files.
func puffinPaths(t *testing.T, f *Facade, ds string) []string {
	t.Helper()
	dvs, _ := liveDVs(t, f, ds)
	var out []string
	for _, d := range dvs {
		p := strings.TrimPrefix(d.FilePath(), "file://")
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// Deletion vectors on a partitioned v3 table carry their data file's
// partition; a merge, a full replace (whose new files get first row ids)
// and a compaction keep the rows and their lineage right.
func TestMergeV3Partitioned(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t, v3, mergeOnRead, func(c *Config) {
		c.PartitionFor = func(string) (Partitioning, bool) {
			return Partitioning{Fields: []PartitionField{{Column: "id", Transform: "truncate[100]"}}}, true
		}
	})
	f := env.f
	const ds = "v3part"
	mergeWrite(t, f, ds, idRange(0, 400), plainName) // four partitions
	changed := func(id int64) string {
		if id%100 == 7 {
			return "changed"
		}
		return "n"
	}
	ids := slices.DeleteFunc(idRange(0, 450), func(id int64) bool { return id%100 == 3 })
	_, preserved := mergeWrite(t, f, ds, ids, changed)
	require.Equal(t, int64(400-4-4), preserved)
	dvs, pos := liveDVs(t, f, ds)
	require.Len(t, dvs, 4, "one vector per partition's file")
	require.Zero(t, pos)
	spec := mustLoad(t, f, ds).Spec()
	for _, d := range dvs {
		require.NotEmpty(t, d.Partition())
		require.Equal(t, spec.ID(), int(d.SpecID()))
	}
	check := func(ids []int64, name func(int64) string) {
		t.Helper()
		want, err := ChecksumBatches(mergeRowsOf(ids, name, nil))
		require.NoError(t, err)
		got, err := f.Checksum(context.Background(), ds, 0)
		require.NoError(t, err)
		require.Equal(t, want, got)
		require.Len(t, lineageOf(t, f, ds), len(ids))
	}
	check(ids, changed)
	lin := lineageOf(t, f, ds)

	_, err := f.MaintainWith(context.Background(), ds, Lifecycle{CompactMinFiles: 2, KeepLast: 1, FileGrace: -1, OrphanEvery: -1})
	require.NoError(t, err)
	dvs, _ = liveDVs(t, f, ds)
	require.Empty(t, dvs)
	require.Equal(t, lin, lineageOf(t, f, ds))
	check(ids, changed)

	plainWrite(t, f, ds, Replace, idRange(100, 300))
	check(idRange(100, 300), plainName)
	mergeWrite(t, f, ds, idRange(150, 300), plainName)
	check(idRange(150, 300), plainName)
}

// A replace of a v3 table that conflicts is retried on the refreshed
// table: its files get first row ids after the rows that landed meanwhile.
func TestMergeV3ReplaceRetried(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t, v3, mergeOnRead, func(c *Config) { c.CommitRetries = 2 })
	f := env.f
	const ds = "v3retry"
	plainWrite(t, f, ds, Replace, idRange(0, 100))
	st, err := f.Stage(context.Background(), Target{DatasetID: ds}, WriteRequest{Mode: Replace, Schema: mergeSchema, Rows: mergeRowsOf(idRange(500, 600), plainName, nil)})
	require.NoError(t, err)
	plainWrite(t, f, ds, Append, idRange(100, 200)) // lands first, takes row ids
	before := mustLoad(t, f, ds).Metadata().NextRowID()
	_, err = st.Commit(context.Background())
	require.NoError(t, err)
	lin := lineageOf(t, f, ds)
	require.Len(t, lin, 100)
	for id, l := range lin {
		require.GreaterOrEqual(t, l[0], before, "id %d", id)
	}
	require.GreaterOrEqual(t, mustLoad(t, f, ds).Metadata().NextRowID(), before+100)
}
