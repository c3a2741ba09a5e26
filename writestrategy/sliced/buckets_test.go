package sliced_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// grouped is an output computed per value of name (an aggregate GROUP BY
// name and a window PARTITION BY name, NULL names included), declared to
// depend on its source by name: it is sliced by buckets of name's hash.
func grouped(out, src string) writestrategy.Transform {
	return writestrategy.Transform{Output: out, Source: src, Steps: []writestrategy.Step{
		{Name: "g", SQL: `SELECT name, count(*) AS n, sum(amount) AS total, max(id) AS last_id FROM source GROUP BY name`},
		{Name: "w", SQL: `SELECT name, n, total, last_id, rank() OVER (PARTITION BY name ORDER BY last_id) AS r FROM g`},
	}, Depends: &incremental.Dependency{Key: []string{"name"}, Sources: map[string][]string{src: {"name"}}}}
}

// TestSlicesByKeyBuckets: an output declared per key (Transform.Depends)
// written in N = 2, 4, 8 slices holds the rows and checksum one stream
// writes, with unique __row_index and __row_id, from a row-store source
// and from a registered table; a full run of such an output is sliced,
// an incremental run is one stream, and a source filter applies in every
// slice.
func TestSlicesByKeyBuckets(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.seedRowStore("src", 5000)
	w.seedTable("rel", "src_table", 5000)
	for _, src := range []string{"src", "rel"} {
		one := src + "_one"
		res, err := w.write(ctx, nil, grouped(one, src), 0)
		require.NoError(t, err)
		require.Equal(t, 1, res.Slices)
		require.Len(t, w.table(one), 1001, "1000 names and NULL")
		for _, n := range []int{2, 4, 8} {
			out := fmt.Sprintf("%s_b%d", src, n)
			res, err := w.write(ctx, nil, grouped(out, src), n)
			require.NoError(t, err)
			require.Empty(t, res.SliceNote)
			require.Equal(t, n, res.Slices)
			require.Equal(t, incremental.RefreshFull, res.Refresh.Mode)
			w.requireSameRowsAnyOrder(one, out)
		}
	}

	// A run that recomputes only the affected keys is one stream.
	res, err := w.write(ctx, nil, grouped("src_b4", "src"), 4)
	require.NoError(t, err)
	require.Equal(t, incremental.RefreshIncremental, res.Refresh.Mode, res.Refresh.Reason)
	require.Equal(t, 1, res.Slices)
	require.Contains(t, res.SliceNote, "incremental")

	// A source filter holds in every slice, by ranges and by buckets.
	filter := map[string][]facade.Range{"rel": {{Column: "id", Min: int64(100), Max: int64(2099)}}}
	for _, c := range []struct {
		name string
		s    writestrategy.WriteStrategy
	}{{"rows", transform("f_rows", "rel")}, {"buckets", grouped("f_buckets", "rel")}} {
		var sums []facade.Checksum
		for _, n := range []int{0, 4} {
			for _, o := range c.s.Outputs() {
				_, err := w.l.EnsureDataset(ctx, o, o, nil)
				require.NoError(t, err)
			}
			res, err := w.dispatcher(nil).Write(ctx, writestrategy.Request{WriterID: writer, Strategy: c.s, Slices: n, SourceFilter: filter})
			require.NoError(t, err, c.name)
			require.Equal(t, max(n, 1), res[0].Slices, c.name)
			sums = append(sums, w.checksum(c.s.Outputs()[0]))
			if c.name == "rows" {
				require.Equal(t, 2000-154, len(w.table("f_rows")), "the rows of ids 100..2099 the step keeps")
			}
		}
		require.Equal(t, sums[0], sums[1], c.name)
	}
}

// requireSameRowsAnyOrder checks that table got holds the rows and the
// checksum of table want, in any __row_index order, with unique
// __row_index and __row_id.
func (w *world) requireSameRowsAnyOrder(want, got string) {
	w.t.Helper()
	require.Equal(w.t, w.checksum(want), w.checksum(got), "checksum of %s against %s", got, want)
	vals := func(rows []tableRow) []string {
		out := make([]string, len(rows))
		for i, r := range rows {
			out[i] = r.Vals
		}
		slices.Sort(out)
		return out
	}
	rows := w.table(got)
	require.Equal(w.t, vals(w.table(want)), vals(rows), got)
	ids := map[int64]bool{}
	for i, r := range rows {
		if i > 0 {
			require.Less(w.t, rows[i-1].Idx, r.Idx, "__row_index unique")
		}
		require.False(w.t, ids[r.ID], "__row_id unique")
		ids[r.ID] = true
	}
}
