package facade

import (
	"context"
	"strconv"
	"testing"

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
	tbl, err := f.LoadTable(context.Background(), ds)
	require.NoError(t, err)
	fs, err := tbl.FS(context.Background())
	require.NoError(t, err)
	mfs, err := tbl.CurrentSnapshot().Manifests(fs)
	require.NoError(t, err)
	byFile = map[string]iceberg.DataFile{}
	for _, m := range mfs {
		if m.ManifestContent() != iceberg.ManifestContentDeletes {
			continue
		}
		for e, err := range m.Entries(fs, true) {
			require.NoError(t, err)
			d := e.DataFile()
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
	}
	return byFile, pos
}

// On a v3 table a merge writes deletion vectors, never position delete
// files; repeated merges touching the same data file keep one live vector
// for it, holding every position deleted so far.
func TestMergeV3DeletionVectors(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t, v3)
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
	_ = table.MainBranch
}
