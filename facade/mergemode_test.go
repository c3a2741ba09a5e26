package facade

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// stageMerge stages a merge by key of ids into ds, checks its
// StageInfo.Merge and commits it.
func stageMerge(t *testing.T, f *Facade, ds string, ids []int64, want MergeMode) {
	t.Helper()
	var preserved int64
	st, err := f.Stage(context.Background(), Target{DatasetID: ds}, WriteRequest{Mode: Replace, Schema: mergeSchema, Rows: mergeRowsOf(ids, plainName, &preserved)})
	require.NoError(t, err)
	require.Equal(t, want, st.Info().Merge)
	_, err = st.Commit(context.Background())
	require.NoError(t, err)
}

// StageInfo.Merge says how a Replace by key lands: no merge into a new
// table or for an append, position deletes on v2, deletion vectors on v3,
// copy-on-write when the merge rewrites the files it touches.
func TestStageInfoMerge(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t, mergeOnRead)
	stageMerge(t, env.f, "mor", idRange(0, 100), MergeNone) // a new table: a plain replace
	stageMerge(t, env.f, "mor", idRange(1, 100), MergePositionDeletes)
	st, err := env.f.Stage(context.Background(), Target{DatasetID: "mor"}, WriteRequest{Mode: Append, Schema: mergeSchema, Rows: mergeRowsOf(idRange(100, 110), plainName, nil)})
	require.NoError(t, err)
	require.Equal(t, MergeNone, st.Info().Merge)
	require.NoError(t, st.Abort(context.Background()))

	cow := newCompactEnv(t, copyOnWriteAll)
	stageMerge(t, cow.f, "cow", idRange(0, 100), MergeNone)
	stageMerge(t, cow.f, "cow", idRange(1, 100), MergeCopyOnWrite)

	dv := newCompactEnv(t, v3, mergeOnRead)
	stageMerge(t, dv.f, "dv", idRange(0, 100), MergeNone)
	stageMerge(t, dv.f, "dv", idRange(1, 100), MergeDeletionVectors)
}
