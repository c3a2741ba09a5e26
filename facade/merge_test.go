package facade

import (
	"context"
	"io/fs"
	"iter"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/scanfiles"
)

// keyedBatch asks for a merge by "id" (see mergeRows).
type keyedBatch struct {
	arrow.RecordBatch
	preserved *int64
}

func (b keyedBatch) MergeKey() []string        { return []string{"id"} }
func (b keyedBatch) MergeDone(preserved int64) { *b.preserved = preserved }

// mergeRowsOf yields rows (id, name) as keyed batches of up to 256 rows.
func mergeRowsOf(ids []int64, name func(int64) string, preserved *int64) iter.Seq2[arrow.RecordBatch, error] {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	return func(yield func(arrow.RecordBatch, error) bool) {
		for from := 0; from < len(ids); from += 256 {
			b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
			for _, id := range ids[from:min(from+256, len(ids))] {
				b.Field(0).(*array.Int64Builder).Append(id)
				b.Field(1).(*array.StringBuilder).Append(name(id))
			}
			rec := b.NewRecordBatch()
			b.Release()
			var out arrow.RecordBatch = rec
			if preserved != nil {
				out = keyedBatch{RecordBatch: rec, preserved: preserved}
			}
			more := yield(out, nil)
			rec.Release()
			if !more {
				return
			}
		}
	}
}

func idRange(lo, hi int64) []int64 {
	var out []int64
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

// mergeWrite writes ids as a merge and returns the result and the rows it
// left in place.
func mergeWrite(t testing.TB, f *Facade, ds string, ids []int64, name func(int64) string) (CommitResult, int64) {
	t.Helper()
	var preserved int64
	rows := mergeRowsOf(ids, name, &preserved)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	res, err := f.Write(context.Background(), Target{DatasetID: ds}, WriteRequest{Mode: Replace, Schema: sc, Rows: rows})
	require.NoError(t, err)
	return res, preserved
}

// liveIdentity maps id to (__row_index, __row_id, name) of the current rows.
func liveIdentity(t *testing.T, f *Facade, ds string) map[int64][2]int64 {
	t.Helper()
	out := map[int64][2]int64{}
	for rec, err := range f.Scan(context.Background(), ds, ScanOptions{}) {
		require.NoError(t, err)
		sc := rec.Schema()
		ids := rec.Column(sc.FieldIndices("id")[0]).(*array.Int64)
		ri := rec.Column(sc.FieldIndices(ColRowIndex)[0]).(*array.Int64)
		rid := rec.Column(sc.FieldIndices(ColRowID)[0]).(*array.Int64)
		for i := range int(rec.NumRows()) {
			_, dup := out[ids.Value(i)]
			require.False(t, dup, "id %d read twice", ids.Value(i))
			out[ids.Value(i)] = [2]int64{ri.Value(i), rid.Value(i)}
		}
	}
	return out
}

func plainName(id int64) string { return "n" }

// deleteFilesOf counts the position delete files the current snapshot
// applies, and the data files they apply to more than once.
func deleteFilesOf(t *testing.T, f *Facade, ds string) (files int, positions int64) {
	t.Helper()
	tbl, err := f.LoadTable(context.Background(), ds)
	require.NoError(t, err)
	tasks, err := scanfiles.Plan(context.Background(), tbl.Scan())
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, tk := range tasks {
		require.Empty(t, tk.DeletionVectorFiles)
		require.Empty(t, tk.EqualityDeleteFiles)
		for _, d := range tk.DeleteFiles {
			require.Equal(t, iceberg.EntryContentPosDeletes, d.ContentType())
			if !seen[d.FilePath()] {
				seen[d.FilePath()] = true
				files++
				positions += d.Count()
			}
		}
	}
	return files, positions
}

// A merge writes only what changed, as data files plus position deletes in
// one snapshot; rows it deletes twice over successive merges are deleted
// once (the probe applies the deletes already there); the checksum is the
// output's; compaction applies the deletes, drops the delete files and
// keeps every identity column; a merge after it works on the new files.
func TestMergeByKey(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t, mergeOnRead)
	f := env.f
	const ds = "merged"
	_, pre := mergeWrite(t, f, ds, idRange(0, 1000), plainName) // the first write: a plain replace
	require.Zero(t, pre)
	orig := liveIdentity(t, f, ds)

	// Keys 0..499 disappear, 990..999 change, 1000..1004 are new.
	ids := idRange(500, 1005)
	changed := func(id int64) string {
		if id >= 990 {
			return "changed"
		}
		return "n"
	}
	res, preserved := mergeWrite(t, f, ds, ids, changed)
	require.Equal(t, int64(505), res.Rows)
	require.Equal(t, int64(490), preserved)
	want, err := ChecksumBatches(mergeRowsOf(ids, changed, nil))
	require.NoError(t, err)
	require.Equal(t, want, res.Checksum)
	got, err := f.Checksum(context.Background(), ds, 0)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, "15", res.Summary["added-records"])
	require.Equal(t, "510", res.Summary["added-position-deletes"])
	live := liveIdentity(t, f, ds)
	require.Len(t, live, 505)
	for id := int64(500); id < 990; id++ {
		require.Equal(t, orig[id], live[id], "id %d keeps its identity", id)
	}

	// The same rows changed again: the new versions are deleted, never the
	// old positions a second time.
	again := func(id int64) string {
		if id >= 990 {
			return "again"
		}
		return "n"
	}
	res, preserved = mergeWrite(t, f, ds, ids, again)
	require.Equal(t, int64(490), preserved)
	require.Equal(t, "15", res.Summary["added-position-deletes"])
	_, positions := deleteFilesOf(t, f, ds)
	require.Equal(t, int64(510+15), positions, "no position is deleted twice")
	got, err = f.Checksum(context.Background(), ds, 0)
	require.NoError(t, err)
	want, err = ChecksumBatches(mergeRowsOf(ids, again, nil))
	require.NoError(t, err)
	require.Equal(t, want, got)
	before := liveIdentity(t, f, ds)

	// Compaction rewrites the delete-heavy file with its deletes applied.
	rep, err := f.MaintainWith(context.Background(), ds, Lifecycle{CompactMinFiles: 2, KeepLast: 1, FileGrace: -1, OrphanEvery: -1})
	require.NoError(t, err)
	require.NotZero(t, rep.CompactedFiles, "%+v", rep)
	files, _ := deleteFilesOf(t, f, ds)
	require.Zero(t, files, "the rewrite applied the deletes")
	require.Equal(t, before, liveIdentity(t, f, ds), "compaction keeps every identity column")
	got, err = f.Checksum(context.Background(), ds, 0)
	require.NoError(t, err)
	require.Equal(t, want, got)

	// A merge on the compacted table.
	res, preserved = mergeWrite(t, f, ds, idRange(600, 1005), again)
	require.Equal(t, int64(405), res.Rows)
	require.Equal(t, int64(405), preserved)
	got, err = f.Checksum(context.Background(), ds, 0)
	require.NoError(t, err)
	want, err = ChecksumBatches(mergeRowsOf(idRange(600, 1005), again, nil))
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// A compaction planned before a merge commits must not land over it: it
// would bring back the rows the merge deleted (its rewrite read them). The
// compaction pins the head, so it conflicts and the merge's deletes stay.
func TestMergeCompactionDoesNotResurrect(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t)
	f := env.f
	const ds = "race"
	for i := range 4 { // four small files: compaction has work
		var preserved int64
		ids := idRange(int64(i)*100, int64(i+1)*100)
		sc := arrow.NewSchema([]arrow.Field{
			{Name: "id", Type: arrow.PrimitiveTypes.Int64},
			{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		}, nil)
		_, err := f.Write(context.Background(), Target{DatasetID: ds}, WriteRequest{Mode: Append, Schema: sc, Rows: mergeRowsOf(ids, plainName, &preserved)})
		require.NoError(t, err)
	}
	stale, err := f.LoadTable(context.Background(), ds)
	require.NoError(t, err)
	_, _ = mergeWrite(t, f, ds, idRange(0, 300), plainName) // deletes 300..399
	_, _, err = f.compact(context.Background(), stale, compactOptions{MinFiles: 2})
	require.ErrorIs(t, err, ErrCommitConflict)
	require.Len(t, liveIdentity(t, f, ds), 300, "the merge's deletes hold")
}

// deletePaths lists the position delete files the current snapshot
// applies, as local paths.
func deletePaths(t *testing.T, f *Facade, ds string) []string {
	t.Helper()
	tbl, err := f.LoadTable(context.Background(), ds)
	require.NoError(t, err)
	tasks, err := scanfiles.Plan(context.Background(), tbl.Scan())
	require.NoError(t, err)
	var out []string
	for _, tk := range tasks {
		for _, d := range tk.DeleteFiles {
			p := strings.TrimPrefix(d.FilePath(), "file://")
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// The orphan pass keeps the delete files a snapshot applies; once a
// compaction applied them and expiry dropped the snapshots that read them,
// maintenance deletes them from storage.
func TestMergeLifecycleDeleteFiles(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t, mergeOnRead)
	f := env.f
	const ds = "lifecycle"
	mergeWrite(t, f, ds, idRange(0, 1000), plainName)
	mergeWrite(t, f, ds, idRange(50, 1000), plainName) // 5% deleted: not delete-heavy
	live := deletePaths(t, f, ds)
	require.Len(t, live, 1)
	// No file is small under this target, none is delete-heavy: the run is
	// the orphan pass (every unreferenced file counts as old) and expiry.
	rep, err := f.MaintainWith(context.Background(), ds, Lifecycle{CompactTargetBytes: 100, KeepLast: 1, EveryCommits: 1,
		FileGrace: -1, OrphanAge: time.Nanosecond, OrphanEvery: -1})
	require.NoError(t, err)
	require.Zero(t, rep.CompactedFiles)
	for _, p := range live {
		_, err := os.Stat(p)
		require.NoError(t, err, "a live delete file survives the orphan pass and expiry")
	}
	require.Len(t, liveIdentity(t, f, ds), 950)

	// More deletes: the table becomes delete-heavy, compaction applies
	// them, and expiry then deletes the delete files no snapshot reads.
	mergeWrite(t, f, ds, idRange(400, 1000), plainName)
	old := deletePaths(t, f, ds)
	require.NotEmpty(t, old)
	pol := Lifecycle{CompactMinFiles: 2, KeepLast: 1, EveryCommits: 1, FileGrace: -1, OrphanEvery: -1}
	rep, err = f.MaintainWith(context.Background(), ds, pol)
	require.NoError(t, err)
	require.Positive(t, rep.CompactedFiles)
	require.Empty(t, deletePaths(t, f, ds))
	_, err = f.MaintainWith(context.Background(), ds, pol) // the expired files' grace has passed
	require.NoError(t, err)
	for _, p := range old {
		_, err := os.Stat(p)
		require.ErrorIs(t, err, fs.ErrNotExist, "%s: no snapshot needs it", p)
	}
	require.Len(t, liveIdentity(t, f, ds), 600)
}
