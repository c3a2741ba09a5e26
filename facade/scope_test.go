package facade

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"iter"
	"math"
	"os"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/scanfiles"
	"github.com/lakewrite/lakewrite/internal/vocab"
)

// srow is a row of the scoped tests' table: grp (NULL when null), tag,
// val, score.
type srow struct {
	grp   int64
	null  bool
	tag   string
	val   string
	score float64
}

func (r srow) String() string {
	g := strconv.FormatInt(r.grp, 10)
	if r.null {
		g = "(null)"
	}
	return fmt.Sprintf("grp=%s,tag=%s,val=%s,score=%s", g, r.tag, r.val, strconv.FormatFloat(r.score, 'g', -1, 64))
}

var scopeSchema = arrow.NewSchema([]arrow.Field{
	{Name: "grp", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "tag", Type: arrow.BinaryTypes.String},
	{Name: "val", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
}, nil)

func scopeBatches(rows []srow) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for from := 0; from < len(rows); from += 50 {
			b := array.NewRecordBuilder(memory.DefaultAllocator, scopeSchema)
			for _, r := range rows[from:min(from+50, len(rows))] {
				if r.null {
					b.Field(0).AppendNull()
				} else {
					b.Field(0).(*array.Int64Builder).Append(r.grp)
				}
				b.Field(1).(*array.StringBuilder).Append(r.tag)
				b.Field(2).(*array.StringBuilder).Append(r.val)
				b.Field(3).(*array.Float64Builder).Append(r.score)
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

// scopeKey is one key of a scope over grp, or over grp and tag.
type scopeKey struct {
	grp  int64
	null bool
	tag  string
}

func (k scopeKey) has(r srow, multi bool) bool {
	return k.null == r.null && (k.null || k.grp == r.grp) && (!multi || k.tag == r.tag)
}

// scopeOf builds the Scope of keys (over grp, and tag when multi).
func scopeOf(keys []scopeKey, multi bool) *Scope {
	gb := array.NewInt64Builder(memory.DefaultAllocator)
	tb := array.NewStringBuilder(memory.DefaultAllocator)
	fields := []arrow.Field{scopeSchema.Field(0)}
	for _, k := range keys {
		if k.null {
			gb.AppendNull()
		} else {
			gb.Append(k.grp)
		}
		tb.Append(k.tag)
	}
	cols := []arrow.Array{gb.NewArray(), tb.NewArray()}
	gb.Release()
	tb.Release()
	names := []string{"grp"}
	if multi {
		fields, names = append(fields, scopeSchema.Field(1)), append(names, "tag")
	} else {
		cols[1].Release()
		cols = cols[:1]
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(len(keys)))
	for _, c := range cols {
		c.Release()
	}
	return &Scope{Columns: names, Keys: rec}
}

// scopeModel is what the table should hold.
type scopeModel struct{ rows []srow }

// apply is a scoped replace on the model; it returns the rows the write
// should preserve (the multiset intersection of the scope's old rows and
// the new ones).
func (m *scopeModel) apply(keys []scopeKey, multi bool, rows []srow) int64 {
	in := func(r srow) bool {
		return slices.ContainsFunc(keys, func(k scopeKey) bool { return k.has(r, multi) })
	}
	old := map[string]int{}
	var out []srow
	for _, r := range m.rows {
		if in(r) {
			old[r.String()]++
		} else {
			out = append(out, r)
		}
	}
	var kept int64
	for _, r := range rows {
		if old[r.String()] > 0 {
			old[r.String()]--
			kept++
		}
	}
	m.rows = append(out, rows...)
	return kept
}

func (m *scopeModel) strings() []string {
	var out []string
	for _, r := range m.rows {
		out = append(out, r.String())
	}
	sort.Strings(out)
	return out
}

// scopeRead is the table: its rows rendered, and each rendered with its
// identity columns (and, on v3, its _row_id).
func scopeRead(t *testing.T, f *Facade, ds string) (rows, ids []string) {
	t.Helper()
	for rec, err := range f.Scan(context.Background(), ds, ScanOptions{}) {
		require.NoError(t, err)
		sc := rec.Schema()
		for i := range int(rec.NumRows()) {
			var parts []string
			for _, c := range []string{"grp", "tag", "val", "score"} {
				parts = append(parts, c+"="+rec.Column(sc.FieldIndices(c)[0]).ValueStr(i))
			}
			var id []string
			for _, c := range []string{ColRowIndex, ColRowID, ColCreatedAt} {
				id = append(id, rec.Column(sc.FieldIndices(c)[0]).ValueStr(i))
			}
			row := strings.Join(parts, ",")
			rows = append(rows, row)
			ids = append(ids, strings.Join(id, "|")+"|"+row)
		}
	}
	sort.Strings(rows)
	sort.Strings(ids)
	return rows, ids
}

// scopeLineage maps __row_id to the row's v3 _row_id.
func scopeLineage(t *testing.T, f *Facade, ds string) map[int64]int64 {
	t.Helper()
	tbl, err := f.LoadTable(context.Background(), ds)
	require.NoError(t, err)
	if tbl.Metadata().Version() < 3 {
		return nil
	}
	_, recs, err := tbl.Scan(table.WithRowLineage()).ToArrowRecords(context.Background())
	require.NoError(t, err)
	out := map[int64]int64{}
	for rec, err := range recs {
		require.NoError(t, err)
		sc := rec.Schema()
		rid := rec.Column(sc.FieldIndices(ColRowID)[0]).(*array.Int64)
		lin := rec.Column(sc.FieldIndices(iceberg.RowIDColumnName)[0]).(*array.Int64)
		for i := range rid.Len() {
			out[rid.Value(i)] = lin.Value(i)
		}
		rec.Release()
	}
	return out
}

type scopeEnv struct {
	t  *testing.T
	f  *Facade
	ds string
	m  scopeModel
	// ids and lin are the table as the last write left it (nil: read it)
	ids []string
	lin map[int64]int64
}

// write runs a scoped replace and checks the table against the model:
// rows, checksum (summary, commit result and a read), row count,
// preserved rows, and the identity of every row outside the scope and of
// every preserved row.
func (e *scopeEnv) write(f *Facade, keys []scopeKey, multi bool, rows []srow) StageInfo {
	t := e.t
	t.Helper()
	idsBefore, linBefore := e.ids, e.lin
	if idsBefore == nil {
		_, idsBefore = scopeRead(t, e.f, e.ds)
		linBefore = scopeLineage(t, e.f, e.ds)
	}
	tbl, err := e.f.LoadTable(context.Background(), e.ds)
	require.NoError(t, err)
	nextBefore, err := nextRowIndex(context.Background(), tbl)
	require.NoError(t, err)
	sc := scopeOf(keys, multi)
	defer sc.Keys.Release()
	var preserved int64 = -1
	st, err := f.Stage(context.Background(), Target{DatasetID: e.ds}, WriteRequest{Mode: Replace, Schema: scopeSchema,
		Rows: withMergeDone(scopeBatches(rows), &preserved), Scope: sc, TxnID: "txn-" + strconv.Itoa(len(idsBefore))})
	require.NoError(t, err)
	info := st.Info()
	res, err := st.Commit(context.Background())
	require.NoError(t, err)
	want := e.m.apply(keys, multi, rows)
	if len(rows) > 0 {
		require.Equal(t, want, preserved, "preserved")
	}
	got, ids := scopeRead(t, e.f, e.ds)
	require.Equal(t, e.m.strings(), got)
	sum, err := e.f.Checksum(context.Background(), e.ds, 0)
	require.NoError(t, err)
	require.Equal(t, sum, res.Checksum)
	require.Equal(t, sum.String(), res.Summary[vocab.SummaryChecksum])
	require.Equal(t, int64(len(e.m.rows)), res.Rows)
	require.Equal(t, strconv.Itoa(len(e.m.rows)), res.Summary[vocab.SummaryRows])
	// identity: every row outside the scope, and the preserved ones, keep
	// theirs; the new rows continue __row_index.
	in := func(row string) bool {
		for _, k := range keys {
			g := "grp=" + strconv.FormatInt(k.grp, 10) + ","
			if k.null {
				g = "grp=(null),"
			}
			if strings.HasPrefix(row, g) && (!multi || strings.HasPrefix(row, g+"tag="+k.tag+",")) {
				return true
			}
		}
		return false
	}
	after := map[string]bool{}
	for _, id := range ids {
		after[id] = true
	}
	var kept int64
	for _, id := range idsBefore {
		row := id[strings.LastIndex(id, "|")+1:]
		if !in(row) {
			require.True(t, after[id], "a row outside the scope keeps its identity: %s", id)
		} else if after[id] {
			kept++
		}
		delete(after, id)
	}
	require.Equal(t, want, kept, "the preserved rows keep their identity")
	for id := range after {
		idx, err := strconv.ParseInt(id[:strings.Index(id, "|")], 10, 64)
		require.NoError(t, err)
		require.GreaterOrEqual(t, idx, nextBefore, "a new row continues __row_index: %s", id)
	}
	e.ids, e.lin = ids, nil
	if linBefore != nil {
		lin := scopeLineage(t, e.f, e.ds)
		e.lin = lin
		for _, id := range ids {
			parts := strings.Split(id, "|")
			rid, _ := strconv.ParseInt(parts[1], 10, 64)
			if old, ok := linBefore[rid]; ok && info.Merge != MergeCopyOnWrite {
				require.Equal(t, old, lin[rid], "a row left in place keeps its _row_id")
			}
		}
		liveDVs(t, e.f, e.ds) // at most one live deletion vector per file
	}
	return info
}

// withMergeDone wraps rows so that MergeDone reports to preserved.
func withMergeDone(rows iter.Seq2[arrow.RecordBatch, error], preserved *int64) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for rec, err := range rows {
			if !yield(keyedBatch{RecordBatch: rec, preserved: preserved}, err) {
				return
			}
		}
	}
}

func grpRows(g int64, vals ...string) []srow {
	var out []srow
	for i, v := range vals {
		out = append(out, srow{grp: g, tag: string(rune('a' + i%3)), val: v, score: float64(g)})
	}
	return out
}

func nullRows(vals ...string) []srow {
	var out []srow
	for _, v := range vals {
		out = append(out, srow{null: true, tag: "n", val: v})
	}
	return out
}

var scopeAll = flag.Bool("scope.all", false, "TestScopedReplace: also v2 partitioned and v3 not partitioned (v2 and v3 partitioned by default)")

// A scoped replace replaces exactly the rows of its keys, on format v2
// and v3, partitioned and not (the two other pairings with -scope.all): unchanged rows stay in place, changed,
// gone and new rows are deleted and written, duplicates are matched as a
// multiset, NULL keys equal NULL, a scope may span two columns; repeated
// writes on the same files never bring a deleted row back (v3: one live
// deletion vector per file), a write past the copy-on-write crossover
// rewrites the touched files, and compaction then a further scoped write
// keep every row, identity and checksum.
func TestScopedReplace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		v3    bool
		part  bool
		cache bool // Config.ScopeIndexBytes set: files are found by their cached scope index
	}{{"v2", false, false, false}, {"v3_part", true, true, false}, {"v2_part", false, true, false}, {"v3", true, false, false},
		{"v2_cached", false, false, true}, {"v3_part_cached", true, true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.v3 != tc.part && !*scopeAll {
				t.Skip("run with -scope.all")
			}
			t.Parallel()
			tune := func(c *Config) {
				if tc.v3 {
					v3(c)
				}
				if tc.cache {
					c.ScopeIndexBytes = 1 << 20
				}
				if tc.part {
					c.PartitionFor = func(string) (Partitioning, bool) {
						return Partitioning{Fields: []PartitionField{{Column: "grp", Transform: "truncate[10]"}}}, true
					}
				}
			}
			env := newCompactEnv(t, tune)
			e := &scopeEnv{t: t, f: env.f, ds: "scoped"}
			ctx := context.Background()

			// 40 groups of 4 rows (a duplicate in each), NULL-group rows; half
			// replaced, half appended (the first scoped write then reads the
			// table for its checksum: an append records only its rows).
			var first, second []srow
			for g := range int64(40) {
				rows := append(grpRows(g, "v0", "v1", "v2"), grpRows(g, "v0")...)
				if g < 20 {
					first = append(first, rows...)
				} else {
					second = append(second, rows...)
				}
			}
			first = append(first, nullRows("n0", "n0", "n1")...)
			_, err := e.f.Write(ctx, Target{DatasetID: e.ds}, WriteRequest{Mode: Replace, Schema: scopeSchema, Rows: scopeBatches(first)})
			require.NoError(t, err)
			_, err = e.f.Write(ctx, Target{DatasetID: e.ds}, WriteRequest{Mode: Append, Schema: scopeSchema, Rows: scopeBatches(second)})
			require.NoError(t, err)
			e.m.rows = append(slices.Clone(first), second...)

			// Keys 1 (unchanged), 2 (a duplicate gone, a row changed, a row
			// new, 0 turned -0), 3 (gone), NULL (a third copy), 50 (new);
			// 21 is a key with no change in the appended file.
			g2 := append(grpRows(2, "v0", "v1", "changed", "new"), srow{grp: 2, tag: "z", val: "v", score: math.Copysign(0, -1)})
			e.m.rows = append(e.m.rows, srow{grp: 2, tag: "z", val: "v"}) // its +0 twin, written before
			_, err = e.f.Write(ctx, Target{DatasetID: e.ds}, WriteRequest{Mode: Append, Schema: scopeSchema, Rows: scopeBatches([]srow{{grp: 2, tag: "z", val: "v"}})})
			require.NoError(t, err)
			keys := []scopeKey{{grp: 1}, {grp: 2}, {grp: 3}, {null: true}, {grp: 50}, {grp: 21}, {grp: 1}}
			rows := slices.Concat(grpRows(1, "v0", "v1", "v2", "v0"), g2, nullRows("n0", "n0", "n0"),
				grpRows(50, "x", "x"), grpRows(21, "v0", "v1", "v2", "v0"))
			e.write(e.f, keys, false, rows)

			// A row outside the scope: refused, nothing visible.
			head := currentSnapshot(t, e.f, e.ds)
			sc := scopeOf([]scopeKey{{grp: 1}}, false)
			_, err = e.f.Write(ctx, Target{DatasetID: e.ds}, WriteRequest{Mode: Replace, Schema: scopeSchema,
				Rows: scopeBatches(append(grpRows(1, "v0"), grpRows(7, "v0")...)), Scope: sc})
			sc.Keys.Release()
			require.ErrorIs(t, err, ErrInvalidRequest)
			require.Equal(t, head, currentSnapshot(t, e.f, e.ds))

			// Two columns: (2, b) changes, (4, a) stays, (NULL, n) keeps one.
			e.write(e.f, []scopeKey{{grp: 2, tag: "b"}, {grp: 4, tag: "a"}, {null: true, tag: "n"}}, true,
				slices.Concat([]srow{{grp: 2, tag: "b", val: "b2", score: 2}, {grp: 2, tag: "b", val: "b3", score: 2}},
					grpRows(4, "v0"), nullRows("n0")))
			// A third write on the same files: 2 again (rows of both earlier
			// writes go), 4 and 5 change.
			e.write(e.f, []scopeKey{{grp: 2}, {grp: 4}, {grp: 5}}, false,
				slices.Concat(grpRows(2, "third"), grpRows(4, "v0", "v1", "v2"), grpRows(5, "v0", "w1", "v2", "v0")))

			// Past the copy-on-write crossover.
			cowCfg := &Config{Allocator: env.mem, CommitRetries: -1, mergeCoWShare: 0.01}
			tune(cowCfg)
			cow, err := New(env.cat, cowCfg)
			require.NoError(t, err)
			info := e.write(cow, []scopeKey{{grp: 6}, {grp: 7}, {grp: 25}}, false, slices.Concat(grpRows(6, "c"), grpRows(25, "v0", "v1", "v2", "v0")))
			require.Equal(t, MergeCopyOnWrite, info.Merge)

			// Compaction keeps rows, identity and checksum; a scoped write on
			// the compacted table finds its checksum through the compaction.
			idsBefore := e.ids
			rep, err := e.f.MaintainWith(ctx, e.ds, Lifecycle{CompactMinFiles: 2, KeepLast: 1, FileGrace: -1, OrphanEvery: -1})
			require.NoError(t, err)
			require.NotZero(t, rep.CompactedFiles, "%+v", rep)
			_, ids := scopeRead(t, e.f, e.ds)
			require.Equal(t, idsBefore, ids)
			e.ids, e.lin = nil, nil // compaction moved the rows: read them again
			e.write(e.f, []scopeKey{{grp: 8}, {grp: 30}}, false, grpRows(8, "after"))

			// Empty keys: an empty snapshot, nothing changes.
			info = e.write(e.f, nil, false, nil)
			require.Empty(t, info.DataFiles)
			if hits, misses := e.f.keys.Stats(); tc.cache {
				require.NotZero(t, hits, "later writes find the files' scope indexes")
				require.NotZero(t, misses)
			} else {
				require.Zero(t, hits+misses)
			}
		})
	}
}

func currentSnapshot(t *testing.T, f *Facade, ds string) int64 {
	t.Helper()
	tbl, err := f.LoadTable(context.Background(), ds)
	require.NoError(t, err)
	return tbl.CurrentSnapshot().SnapshotID
}

// The key set prunes data files by their bounds: on a table partitioned
// by grp/10, a scope of one key reads the scope column of the files of
// its partition only.
func TestScopedReplacePrunes(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t, func(c *Config) {
		c.PartitionFor = func(string) (Partitioning, bool) {
			return Partitioning{Fields: []PartitionField{{Column: "grp", Transform: "truncate[10]"}}}, true
		}
	})
	ctx := context.Background()
	var rows []srow
	for g := range int64(40) {
		rows = append(rows, grpRows(g, "v0", "v1")...)
	}
	rows = append(rows, nullRows("n")...)
	_, err := env.f.Write(ctx, Target{DatasetID: "p"}, WriteRequest{Mode: Replace, Schema: scopeSchema, Rows: scopeBatches(rows)})
	require.NoError(t, err)
	tbl, err := env.f.LoadTable(ctx, "p")
	require.NoError(t, err)
	tasks, err := scanfiles.Plan(ctx, tbl.Scan())
	require.NoError(t, err)
	require.Len(t, tasks, 5)
	fld, _ := tbl.Schema().FindFieldByName("grp")
	for _, tc := range []struct {
		keys  []scopeKey
		files int
	}{{[]scopeKey{{grp: 13}}, 1}, {[]scopeKey{{grp: 13}, {grp: 17}}, 1}, {[]scopeKey{{grp: 3}, {grp: 33}}, 2},
		{[]scopeKey{{null: true}}, 1}, {[]scopeKey{{grp: 99}}, 0}, {nil, 0}} {
		sc := scopeOf(tc.keys, false)
		b, ok := scanfiles.SetOf(fld, sc.Keys.Column(0))
		require.True(t, ok)
		n := 0
		for _, task := range tasks {
			if b.MayContain(task.File) {
				n++
			}
		}
		require.Equal(t, tc.files, n, "%v", tc.keys)
		sc.Keys.Release()
	}
}

// A scoped replace commits on the snapshot its probe read: a write that
// lands in between is a conflict, nothing of the scoped write visible. On
// a new table it writes its rows.
func TestScopedReplaceConflict(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t)
	ctx := context.Background()
	_, err := env.f.Write(ctx, Target{DatasetID: "c"}, WriteRequest{Mode: Replace, Schema: scopeSchema, Rows: scopeBatches(grpRows(1, "a", "b"))})
	require.NoError(t, err)
	sc := scopeOf([]scopeKey{{grp: 1}}, false)
	defer sc.Keys.Release()
	st, err := env.f.Stage(ctx, Target{DatasetID: "c"}, WriteRequest{Mode: Replace, Schema: scopeSchema, Rows: scopeBatches(grpRows(1, "a")), Scope: sc})
	require.NoError(t, err)
	_, err = env.f.Write(ctx, Target{DatasetID: "c"}, WriteRequest{Mode: Append, Schema: scopeSchema, Rows: scopeBatches(grpRows(2, "x"))})
	require.NoError(t, err)
	_, err = st.Commit(ctx)
	require.ErrorIs(t, err, ErrCommitConflict)
	rows, _ := scopeRead(t, env.f, "c")
	require.Len(t, rows, 3)

	// A scoped replace into a new table writes its rows.
	res, err := env.f.Write(ctx, Target{DatasetID: "new"}, WriteRequest{Mode: Replace, Schema: scopeSchema, Rows: scopeBatches(grpRows(1, "a", "a")), Scope: sc})
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Rows)
	sum, err := env.f.Checksum(ctx, "new", 0)
	require.NoError(t, err)
	require.Equal(t, sum, res.Checksum)
}

// Bad scopes are refused before anything is written.
func TestScopedReplaceInvalid(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t)
	ctx := context.Background()
	_, err := env.f.Write(ctx, Target{DatasetID: "i"}, WriteRequest{Mode: Replace, Schema: scopeSchema, Rows: scopeBatches(grpRows(1, "a"))})
	require.NoError(t, err)
	head := currentSnapshot(t, env.f, "i")
	sc := scopeOf([]scopeKey{{grp: 1}}, false)
	defer sc.Keys.Release()
	other := arrow.NewSchema(append(scopeSchema.Fields(), arrow.Field{Name: "extra", Type: arrow.BinaryTypes.String, Nullable: true}), nil)
	for name, req := range map[string]WriteRequest{
		"append":       {Mode: Append, Schema: scopeSchema, Scope: sc},
		"no columns":   {Mode: Replace, Schema: scopeSchema, Scope: &Scope{Keys: sc.Keys}},
		"no keys":      {Mode: Replace, Schema: scopeSchema, Scope: &Scope{Columns: []string{"grp"}}},
		"unknown":      {Mode: Replace, Schema: scopeSchema, Scope: &Scope{Columns: []string{"nope"}, Keys: sc.Keys}},
		"identity":     {Mode: Replace, Schema: scopeSchema, Scope: &Scope{Columns: []string{ColRowID}, Keys: sc.Keys}},
		"type":         {Mode: Replace, Schema: scopeSchema, Scope: &Scope{Columns: []string{"tag"}, Keys: sc.Keys}},
		"width":        {Mode: Replace, Schema: scopeSchema, Scope: &Scope{Columns: []string{"grp", "tag"}, Keys: sc.Keys}},
		"adds column":  {Mode: Replace, Schema: other, Scope: sc},
		"drops column": {Mode: Replace, Schema: arrow.NewSchema(scopeSchema.Fields()[:3], nil), Scope: sc},
	} {
		req.Rows = func(func(arrow.RecordBatch, error) bool) {}
		_, err := env.f.Write(ctx, Target{DatasetID: "i"}, req)
		require.ErrorIs(t, err, ErrInvalidRequest, name)
	}
	require.Equal(t, head, currentSnapshot(t, env.f, "i"))
}

// A scoped replace reads the scope's rows in the table while its source
// computes its first rows; a source that fails before its first batch
// fails the write, leaves the table as it was, and leaves no read of the
// table running. Not parallel: it looks for the probe's goroutine.
func TestScopedReplaceSourceFailsFirst(t *testing.T) {
	env := newCompactEnv(t)
	ctx := context.Background()
	var rows []srow
	for g := range int64(200) {
		rows = append(rows, grpRows(g, "a")...)
	}
	_, err := env.f.Write(ctx, Target{DatasetID: "f"}, WriteRequest{Mode: Replace, Schema: scopeSchema, Rows: scopeBatches(rows)})
	require.NoError(t, err)
	head := currentSnapshot(t, env.f, "f")
	sc := scopeOf([]scopeKey{{grp: 3}, {grp: 150}}, false)
	defer sc.Keys.Release()
	boom := errors.New("source failed")
	for range 3 {
		_, err = env.f.Write(ctx, Target{DatasetID: "f"}, WriteRequest{Mode: Replace, Schema: scopeSchema, Scope: sc,
			Rows: func(yield func(arrow.RecordBatch, error) bool) { yield(nil, boom) }})
		require.ErrorIs(t, err, boom)
		var buf bytes.Buffer
		require.NoError(t, pprof.Lookup("goroutine").WriteTo(&buf, 1))
		require.NotContains(t, buf.String(), "probeScope", "the scope's probe outlived the write")
	}
	require.Equal(t, head, currentSnapshot(t, env.f, "f"))
	// The table still takes a scoped replace.
	_, err = env.f.Write(ctx, Target{DatasetID: "f"}, WriteRequest{Mode: Replace, Schema: scopeSchema, Scope: sc,
		Rows: scopeBatches(append(grpRows(3, "b"), grpRows(150, "b")...))})
	require.NoError(t, err)
	require.NotEqual(t, head, currentSnapshot(t, env.f, "f"))
}

// A scoped replace on a format v2 table writes a position delete file for
// each data file it removes rows from; the facade keeps their positions
// (Config.ScopeIndexBytes) and the next merge's probe takes them from
// memory: it still merges right with those files gone from storage. A
// facade that did not write them reads them from their files, and keeps
// them too.
func TestScopedReplaceKeepsDeletePositions(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t, func(c *Config) { c.ScopeIndexBytes = 1 << 20 })
	e := &scopeEnv{t: t, f: env.f, ds: "dels"}
	ctx := context.Background()
	var rows []srow
	for g := range int64(20) {
		rows = append(rows, grpRows(g, "v0", "v1", "v2")...)
	}
	_, err := e.f.Write(ctx, Target{DatasetID: e.ds}, WriteRequest{Mode: Replace, Schema: scopeSchema, Rows: scopeBatches(rows)})
	require.NoError(t, err)
	e.m.rows = slices.Clone(rows)
	info := e.write(e.f, []scopeKey{{grp: 1}, {grp: 2}}, false, slices.Concat(grpRows(1, "v0"), grpRows(2, "w")))
	require.Equal(t, MergePositionDeletes, info.Merge)

	// deleteFiles are the live position delete files by the data file
	// they apply to.
	deleteFiles := func() map[string][]string {
		tbl, err := e.f.LoadTable(ctx, e.ds)
		require.NoError(t, err)
		tasks, err := scanfiles.Plan(ctx, tbl.Scan())
		require.NoError(t, err)
		out := map[string][]string{}
		for _, task := range tasks {
			for _, d := range task.DeleteFiles {
				out[task.File.FilePath()] = append(out[task.File.FilePath()], d.FilePath())
			}
		}
		return out
	}
	dels := deleteFiles()
	require.NotEmpty(t, dels)
	tbl, err := e.f.LoadTable(ctx, e.ds)
	require.NoError(t, err)
	fsys, err := tbl.FS(ctx)
	require.NoError(t, err)
	for data, files := range dels {
		for _, d := range files {
			kept, ok := e.f.keys.Get(deletesID(d, data)).(deletePositions)
			require.True(t, ok, "the positions of %s are kept", d)
			read, err := readPositionDeletes(ctx, fsys, d, data)
			require.NoError(t, err)
			require.Equal(t, read, kept)
		}
	}

	// Another facade reads the files, and keeps what it read.
	other, err := New(env.cat, &Config{Allocator: env.mem, CommitRetries: -1, ScopeIndexBytes: 1 << 20})
	require.NoError(t, err)
	e.write(other, []scopeKey{{grp: 3}}, false, grpRows(3, "x"))
	for data, files := range deleteFiles() {
		for _, d := range files {
			_, ok := other.keys.Get(deletesID(d, data)).(deletePositions)
			require.True(t, ok, "the positions of %s are kept", d)
		}
	}

	// With every delete file gone from storage, the next merge by the
	// second facade (which wrote or read each of them) still finds the
	// deleted rows.
	for _, files := range deleteFiles() {
		for _, d := range files {
			require.NoError(t, os.Remove(strings.TrimPrefix(d, "file://")))
		}
	}
	sc := scopeOf([]scopeKey{{grp: 1}, {grp: 4}}, false)
	defer sc.Keys.Release()
	last := slices.Concat(grpRows(1, "v0", "z"), grpRows(4, "y"))
	var preserved int64 = -1
	st, err := other.Stage(ctx, Target{DatasetID: e.ds}, WriteRequest{Mode: Replace, Schema: scopeSchema,
		Rows: withMergeDone(scopeBatches(last), &preserved), Scope: sc})
	require.NoError(t, err)
	res, err := st.Commit(ctx)
	require.NoError(t, err)
	require.Equal(t, e.m.apply([]scopeKey{{grp: 1}, {grp: 4}}, false, last), preserved)
	require.Equal(t, int64(len(e.m.rows)), res.Rows)
}
