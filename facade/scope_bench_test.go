package facade

import (
	"context"
	"flag"
	"fmt"
	"iter"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
)

var (
	scopeBenchRows   = flag.Int("scope-rows", 1_000_000, "BenchmarkScopedReplace: rows of the table")
	scopeBenchGroups = flag.Int("scope-groups", 100_000, "BenchmarkScopedReplace: groups (values of the scope column)")
	scopeBenchKeys   = flag.Int("scope-keys", 1_000, "BenchmarkScopedReplace: groups recomputed per write")
)

var scopeBenchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "grp", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "amount", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
}, nil)

// scopeBenchRowsOf yields the rows ids (id, grp(id), name, amount) in
// batches of 64Ki; a row in changed carries version v in its name.
func scopeBenchRowsOf(ids iter.Seq[int64], grp func(int64) int64, changed map[int64]bool, v int, preserved *int64) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		b := array.NewRecordBuilder(memory.DefaultAllocator, scopeBenchSchema)
		defer b.Release()
		flush := func() bool {
			rec := b.NewRecordBatch()
			defer rec.Release()
			return yield(keyedBatch{RecordBatch: rec, preserved: preserved}, nil)
		}
		n := 0
		for i := range ids {
			b.Field(0).(*array.Int64Builder).Append(i)
			b.Field(1).(*array.Int64Builder).Append(grp(i))
			if changed[i] {
				b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("name %d v%d", i, v))
			} else {
				b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("name %d", i))
			}
			b.Field(3).(*array.Float64Builder).Append(float64(i%10000) / 100)
			if n++; n == 64<<10 {
				if n = 0; !flush() {
					return
				}
			}
		}
		if n > 0 {
			flush()
		}
	}
}

// BenchmarkScopedReplace times a scoped replace of -scope-keys random
// groups (of -scope-groups, the rows spread evenly) in a table of
// -scope-rows rows, one row of each group changed, against the full
// replace-as-merge (by the unique id) that writes the same change, on two
// copies of the same table, in one run: the groups' rows contiguous
// (clustered, as in a table written in group order) and spread over the
// whole table (unclustered). It logs both times and their ratio.
//
//	go test ./facade/ -run '^$' -bench BenchmarkScopedReplace -benchtime 1x
func BenchmarkScopedReplace(b *testing.B) {
	rows, groups, nkeys := int64(*scopeBenchRows), int64(*scopeBenchGroups), *scopeBenchKeys
	cat, err := OpenSQLCatalog(context.Background(), CatalogConfig{DatabaseURL: pgtest.URL(b), Warehouse: b.TempDir()})
	require.NoError(b, err)
	b.Cleanup(func() { cat.Close() })
	f, err := New(cat, nil)
	require.NoError(b, err)
	all := func(yield func(int64) bool) {
		for i := range rows {
			if !yield(i) {
				return
			}
		}
	}
	per := rows / groups
	layouts := []struct {
		name string
		grp  func(int64) int64
	}{
		{"clustered", func(i int64) int64 { return i / per }},
		{"unclustered", func(i int64) int64 { return i % groups }},
	}
	for n := 0; n < b.N; n++ {
		for _, lay := range layouts {
			for _, ds := range []string{"scoped_" + lay.name, "merged_" + lay.name} {
				_, err := f.Write(context.Background(), Target{DatasetID: ds}, WriteRequest{Mode: Replace, Schema: scopeBenchSchema,
					Rows: scopeBenchRowsOf(all, lay.grp, nil, 0, nil)})
				require.NoError(b, err)
			}
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			keys := map[int64]bool{}
			for len(keys) < nkeys {
				keys[rng.Int64N(groups)] = true
			}
			// the groups' rows, and the first row of each changed
			var inScope []int64
			changed := map[int64]bool{}
			for i := range rows {
				if g := lay.grp(i); keys[g] {
					inScope = append(inScope, i)
					if !changed[-g-1] {
						changed[-g-1], changed[i] = true, true
					}
				}
			}
			kb := array.NewInt64Builder(memory.DefaultAllocator)
			for _, g := range slices.Sorted(func(yield func(int64) bool) {
				for g := range keys {
					if !yield(g) {
						return
					}
				}
			}) {
				kb.Append(g)
			}
			ka := kb.NewArray()
			kb.Release()
			keyRec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{scopeBenchSchema.Field(1)}, nil), []arrow.Array{ka}, int64(ka.Len()))
			ka.Release()

			runtime.GC()
			var preserved int64
			t0 := time.Now()
			res, err := f.Write(context.Background(), Target{DatasetID: "scoped_" + lay.name}, WriteRequest{Mode: Replace, Schema: scopeBenchSchema,
				Rows: scopeBenchRowsOf(slices.Values(inScope), lay.grp, changed, 1, &preserved), Scope: &Scope{Columns: []string{"grp"}, Keys: keyRec}})
			scoped := time.Since(t0)
			keyRec.Release()
			require.NoError(b, err)
			require.Equal(b, int64(len(inScope)-nkeys), preserved)
			require.Equal(b, rows, res.Rows)

			runtime.GC()
			t1 := time.Now()
			full, err := f.Write(context.Background(), Target{DatasetID: "merged_" + lay.name}, WriteRequest{Mode: Replace, Schema: scopeBenchSchema,
				Rows: scopeBenchRowsOf(all, lay.grp, changed, 1, &preserved)})
			merged := time.Since(t1)
			require.NoError(b, err)
			require.Equal(b, rows-int64(nkeys), preserved)
			require.Equal(b, full.Checksum, res.Checksum, "the same table either way")
			b.Logf("%s: %d rows, %d groups, %d keys (%d rows in scope): scoped %.3fs, full merge %.3fs, ratio %.3f (%s, %s)",
				lay.name, rows, groups, nkeys, len(inScope), scoped.Seconds(), merged.Seconds(), scoped.Seconds()/merged.Seconds(),
				res.Summary["added-records"]+" added", res.Summary["added-position-deletes"]+" deleted")
		}
	}
}
