package writestrategy_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// A declaration that cannot hold is refused with ErrInvalid before
// anything is written, on both sinks.
func TestRefreshDeclarationInvalid(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	seedWorld(t, w, 20)
	ensureOutputs(t, w.pool, "by_cat_pg", "by_cat_ice", "joined_pg")
	w.iceberg("by_cat_ice")
	group := func(out string, d *incremental.Dependency) writestrategy.Transform {
		return writestrategy.Transform{Output: out, Source: "orders", Depends: d, Steps: []writestrategy.Step{
			{Name: "g", SQL: `SELECT category, sum(amount) AS total FROM source GROUP BY category`}}}
	}
	bad := []*incremental.Dependency{
		{},
		{Key: []string{"nope"}, Sources: map[string][]string{"orders": {"category"}}},
		{Key: []string{"category"}, Sources: map[string][]string{"orders": {"nope"}}},
		{Key: []string{"category"}, Sources: map[string][]string{"elsewhere": {"category"}}},
		{Key: []string{"category"}, Sources: map[string][]string{"orders": {"category", "name"}}},
	}
	for _, out := range []string{"by_cat_pg", "by_cat_ice"} {
		for i, d := range bad {
			_, err := w.write(group(out, d))
			require.True(t, errors.Is(err, writestrategy.ErrInvalid), "%s case %d: %v", out, i, err)
			require.True(t, errors.Is(err, incremental.ErrInvalidDependency), "%s case %d: %v", out, i, err)
		}
		require.Zero(t, w.checksum(out).Rows, out)
	}
	_, err := w.write(writestrategy.Join{Output: "joined_pg", Left: "orders", Right: "cats",
		On:      []writestrategy.JoinOn{{Left: "category", Right: "code"}},
		Depends: &incremental.Dependency{Key: []string{"category"}, Sources: map[string][]string{"cats": {"label2"}}}})
	require.ErrorIs(t, err, writestrategy.ErrInvalid)
	// A valid declaration writes.
	res := w.mustWrite(group("by_cat_pg", &incremental.Dependency{Key: []string{"category"}, Sources: map[string][]string{"orders": {"category"}}}))
	require.Equal(t, int64(3), res[0].Rows)
}
