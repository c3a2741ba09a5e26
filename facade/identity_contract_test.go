package facade

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
)

// kvRow is a row (k, v) of the identity contract tests.
type kvRow struct {
	k int64
	v string
}

var kvSchema = arrow.NewSchema([]arrow.Field{
	{Name: "k", Type: arrow.PrimitiveTypes.Int64},
	{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// kvRows yields rows as plain batches of up to 100 rows.
func kvRows(rows []kvRow) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for from := 0; from < len(rows); from += 100 {
			b := array.NewRecordBuilder(memory.DefaultAllocator, kvSchema)
			for _, r := range rows[from:min(from+100, len(rows))] {
				b.Field(0).(*array.Int64Builder).Append(r.k)
				b.Field(1).(*array.StringBuilder).Append(r.v)
			}
			rec := b.NewRecordBatch()
			b.Release()
			more := yield(rec, nil)
			rec.Release()
			if !more {
				return
			}
		}
	}
}

// kvIdentity is the rows of the current snapshot with their __row_index
// and __row_id.
type kvIdentity struct {
	row   kvRow
	index int64
	id    int64
}

func readKV(t *testing.T, f *Facade, ds string) []kvIdentity {
	t.Helper()
	var out []kvIdentity
	for rec, err := range f.Scan(context.Background(), ds, ScanOptions{}) {
		require.NoError(t, err)
		sc := rec.Schema()
		k := rec.Column(sc.FieldIndices("k")[0]).(*array.Int64)
		v := rec.Column(sc.FieldIndices("v")[0]).(*array.String)
		ri := rec.Column(sc.FieldIndices(ColRowIndex)[0]).(*array.Int64)
		rid := rec.Column(sc.FieldIndices(ColRowID)[0]).(*array.Int64)
		for i := range int(rec.NumRows()) {
			out = append(out, kvIdentity{kvRow{k.Value(i), v.Value(i)}, ri.Value(i), rid.Value(i)})
		}
		rec.Release()
	}
	return out
}

// The __row_id contract across full replaces: a row whose values occur
// once in a replace's output gets the same __row_id in every replace that
// outputs it, whatever the other rows and their order; the k rows of a
// group of k equal rows get the same k ids; ids are unique. And __row_index
// is 0..n-1 in the order the rows were written. 30 replaces of a dataset
// that changes between them (rows removed, changed, added, reordered), with
// the ordinal table shrunk to 1,024 entries so that the rows share its
// slots (about 150 rows of a write did, with a numbering by slot), while
// the output stays within its exact range (768 distinct rows).
func TestRowIDStableAcrossReplaces(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t, func(c *Config) { c.ordinalSlots = 1 << 10 })
	f := env.f
	const ds = "stable_ids"
	rng := rand.New(rand.NewPCG(43, 3))

	// 500 unique rows and 15 groups of 3 equal rows.
	var rows []kvRow
	next := int64(0)
	for ; next < 500; next++ {
		rows = append(rows, kvRow{next, "v" + strconv.FormatInt(next, 10)})
	}
	for g := range 15 {
		for range 3 {
			rows = append(rows, kvRow{-1 - int64(g), "group"})
		}
	}
	idsOf := func(got []kvIdentity) map[kvRow][]int64 {
		m := map[kvRow][]int64{}
		for _, r := range got {
			m[r.row] = append(m[r.row], r.id)
		}
		for _, ids := range m {
			slices.Sort(ids)
		}
		return m
	}
	var prev map[kvRow][]int64
	var kept, moved int
	for round := range 30 {
		if round > 0 {
			// remove 5%, change 5%, add 5% new rows; shuffle
			rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
			var nextRows []kvRow
			for _, r := range rows {
				switch p := rng.IntN(100); {
				case r.v == "group":
					nextRows = append(nextRows, r)
				case p < 5:
				case p < 10:
					nextRows = append(nextRows, kvRow{r.k, fmt.Sprintf("v%d.%d", r.k, round)})
				default:
					nextRows = append(nextRows, r)
				}
			}
			for range 25 {
				nextRows = append(nextRows, kvRow{next, "v" + strconv.FormatInt(next, 10)})
				next++
			}
			rng.Shuffle(len(nextRows), func(i, j int) { nextRows[i], nextRows[j] = nextRows[j], nextRows[i] })
			rows = nextRows
		}
		res, err := f.Write(context.Background(), Target{DatasetID: ds}, WriteRequest{Mode: Replace, Schema: kvSchema, Rows: kvRows(rows)})
		require.NoError(t, err)
		require.EqualValues(t, len(rows), res.Rows)
		got := readKV(t, f, ds)
		require.Len(t, got, len(rows))

		// __row_index: 0..n-1 in the order written (equal rows: their set)
		wantIdx := map[kvRow][]int64{}
		for i, r := range rows {
			wantIdx[r] = append(wantIdx[r], int64(i))
		}
		gotIdx := map[kvRow][]int64{}
		seenID := map[int64]bool{}
		for _, r := range got {
			gotIdx[r.row] = append(gotIdx[r.row], r.index)
			require.False(t, seenID[r.id], "round %d: __row_id %d twice", round, r.id)
			seenID[r.id] = true
		}
		for _, idx := range gotIdx {
			slices.Sort(idx)
		}
		require.Equal(t, wantIdx, gotIdx, "round %d: __row_index is the position written", round)
		require.Equal(t, strconv.Itoa(len(rows)), res.Summary[summaryNextRowIndex])

		ids := idsOf(got)
		for r, before := range prev {
			now, ok := ids[r]
			if !ok || len(now) != len(before) {
				continue // gone, or a group of another size
			}
			if slices.Equal(before, now) {
				kept++
				continue
			}
			if moved++; moved <= 5 {
				t.Errorf("round %d: the %d unchanged row(s) %v had __row_id %v, now %v", round, len(now), r, before, now)
			}
		}
		prev = ids
	}
	t.Logf("unchanged rows (or groups) over 29 replaces: %d kept their ids, %d moved", kept, moved)
	require.Zero(t, moved, "unchanged rows whose __row_id moved")
	require.Greater(t, kept, 29*400)
}

// The __row_index contract across writes of every kind: a full replace
// numbers 0..n-1 in the order written; an append continues at the head's
// lakewrite.next-row-index; a merge leaves kept rows' __row_index (and
// __row_id) as they were and numbers the rows it writes (new keys and
// changed rows) from lakewrite.next-row-index on, in the order written,
// whether merge-on-read or copy-on-write. Indexes are unique, never
// reused until a full replace (the index of a removed row is a gap, also
// the highest), and the next-row-index is one past the last one given.
func TestRowIndexContract(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t, mergeOnRead)
	f := env.f
	const ds = "row_index"
	name := func(changed map[int64]string) func(int64) string {
		return func(id int64) string {
			if v, ok := changed[id]; ok {
				return v
			}
			return "n" + strconv.FormatInt(id, 10)
		}
	}
	state := func() map[int64][2]int64 { return liveIdentity(t, f, ds) }
	nextIndex := func(res CommitResult) int64 {
		n, err := strconv.ParseInt(res.Summary[summaryNextRowIndex], 10, 64)
		require.NoError(t, err)
		return n
	}
	checkUnique := func(live map[int64][2]int64) {
		seen := map[int64]bool{}
		for id, ident := range live {
			require.False(t, seen[ident[0]], "key %d: __row_index %d twice", id, ident[0])
			seen[ident[0]] = true
		}
	}

	// A first write (a full replace): 0..23 in the order written.
	order := []int64{5, 3, 7, 0, 1, 2, 4, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}
	res, _ := mergeWrite(t, f, ds, order, name(nil))
	v1 := state()
	for i, id := range order {
		require.Equal(t, int64(i), v1[id][0], "key %d", id)
	}
	require.Equal(t, int64(24), nextIndex(res))

	// A merge: key 9 changes, key 23 (index 23, the highest) is gone, keys
	// 31 and 30 are new, written in that order after 9.
	changed := map[int64]string{9: "changed"}
	order = append(slices.DeleteFunc(slices.Clone(order), func(id int64) bool { return id == 23 }), 31, 30)
	res, preserved := mergeWrite(t, f, ds, order, name(changed))
	require.Equal(t, int64(22), preserved)
	v2 := state()
	require.Len(t, v2, 25)
	for id, ident := range v2 {
		switch id {
		case 9:
			require.Equal(t, int64(24), ident[0], "the changed row continues after the next row index")
			require.NotEqual(t, v1[9][1], ident[1], "a changed row gets a new __row_id")
		case 31:
			require.Equal(t, int64(25), ident[0])
		case 30:
			require.Equal(t, int64(26), ident[0])
		default:
			require.Equal(t, v1[id], ident, "key %d: a kept row keeps __row_index and __row_id", id)
		}
	}
	require.Equal(t, int64(27), nextIndex(res))
	checkUnique(v2)

	// A merge that removes the row of the highest index (30, index 26)
	// and writes nothing: the next row index stays; the one after that
	// writes key 40 at 27, never reusing 26 or 23.
	order = slices.DeleteFunc(order, func(id int64) bool { return id == 30 })
	res, _ = mergeWrite(t, f, ds, order, name(changed))
	require.Equal(t, int64(27), nextIndex(res))
	order = append(order, 40)
	res, _ = mergeWrite(t, f, ds, order, name(changed))
	require.Equal(t, int64(27), state()[40][0])
	require.Equal(t, int64(28), nextIndex(res))

	// An append continues at the next row index.
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	res, err := f.Write(context.Background(), Target{DatasetID: ds}, WriteRequest{Mode: Append, Schema: sc,
		Rows: mergeRowsOf([]int64{51, 50}, name(changed), nil)})
	require.NoError(t, err)
	v3 := state()
	require.Equal(t, int64(28), v3[51][0])
	require.Equal(t, int64(29), v3[50][0])
	require.Equal(t, int64(30), nextIndex(res))
	checkUnique(v3)

	// A copy-on-write merge (key 0 changes, key 1 is gone): the rows its
	// rewrite moves keep their identity; the changed row continues at 30.
	f.s.mergeCoWShare = 1e-9
	changed[0] = "cow"
	order = append(slices.DeleteFunc(order, func(id int64) bool { return id == 1 }), 51, 50)
	res, _ = mergeWrite(t, f, ds, order, name(changed))
	op, _, _ := headState(t, f, ds)
	require.Equal(t, "overwrite", string(op), "a copy-on-write merge")
	v4 := state()
	require.Len(t, v4, len(order))
	for id, ident := range v4 {
		if id == 0 {
			require.Equal(t, int64(30), ident[0])
			continue
		}
		require.Equal(t, v3[id], ident, "key %d keeps its identity through the rewrite", id)
	}
	require.Equal(t, int64(31), nextIndex(res))
	checkUnique(v4)

	// A full replace (no merge) numbers 0..n-1 again.
	res, err = f.Write(context.Background(), Target{DatasetID: ds}, WriteRequest{Mode: Replace, Schema: sc,
		Rows: mergeRowsOf(order, name(changed), nil)})
	require.NoError(t, err)
	v5 := state()
	for i, id := range order {
		require.Equal(t, int64(i), v5[id][0], "key %d", id)
	}
	require.Equal(t, strconv.Itoa(len(order)), res.Summary[summaryNextRowIndex])
}
