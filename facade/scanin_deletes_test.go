package facade

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestScanFilteredAfterDeletes: a key-set scan on a text column (empty and
// non-ASCII values among the keys) of a table whose files carry position
// deletes returns exactly the live rows that match.
func TestScanFilteredAfterDeletes(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t, mergeOnRead)
	f := env.f
	const ds = "merged-filter"
	name := func(id int64) string {
		switch id % 3 {
		case 0:
			return ""
		case 1:
			return "a"
		}
		return "ü"
	}
	mergeWrite(t, f, ds, idRange(0, 1000), name)
	mergeWrite(t, f, ds, idRange(500, 1005), func(id int64) string {
		if id >= 990 {
			return "changed"
		}
		return name(id)
	})
	count := func(opts ScanOptions) map[string]int {
		out := map[string]int{}
		for rec, err := range f.Scan(context.Background(), ds, opts) {
			require.NoError(t, err)
			c := rec.Column(int(rec.Schema().FieldIndices("name")[0]))
			for i := range c.Len() {
				out[c.ValueStr(i)]++
			}
		}
		return out
	}
	all := count(ScanOptions{Columns: []string{"id", "name"}})
	got := count(ScanOptions{Columns: []string{"id", "name"}, In: []In{{Column: "name", Values: []any{"", "a", "ü"}}}})
	delete(all, "changed")
	require.Equal(t, all, got)
}
