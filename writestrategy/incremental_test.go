package writestrategy_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/vocab"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// incrementalRuns sizes TestIncrementalManyRuns.
var incrementalRuns = flag.Int("incremental.runs", 20, "mixed incremental runs of TestIncrementalManyRuns")

var mergeSchema = writestrategy.Schema{Columns: []writestrategy.Column{
	{Name: "id", Type: "bigint"},
	{Name: "v", Type: "text"},
	{Name: "n", Type: "integer"},
	{Name: "category", Type: "text"},
}}

// mergeSource keeps the rows of the source dataset "src" in a plain table
// that the test changes between runs.
type mergeSource struct {
	t      *testing.T
	pool   *pgxpool.Pool
	nextID int64
	rnd    *rand.Rand
}

func newMergeSource(t *testing.T, pool *pgxpool.Pool, rows int) *mergeSource {
	t.Helper()
	_, err := pool.Exec(context.Background(), `CREATE TABLE merge_src AS SELECT g::bigint AS id, 'v' || g AS v, (g % 100)::int AS n,
		(ARRAY['a','b','c','d'])[1 + g % 4] AS category FROM generate_series(1, $1::int) g`, rows)
	require.NoError(t, err)
	s := &mergeSource{t: t, pool: pool, nextID: int64(rows) + 1, rnd: rand.New(rand.NewPCG(1, 2))}
	s.publish()
	return s
}

// publish writes the table's rows as the row-store dataset "src".
func (s *mergeSource) publish() {
	seedRowStore(s.t, s.pool, "src", mergeSchema, `SELECT id, v, n, category FROM merge_src`)
}

// change updates, inserts and deletes rows of the source, then publishes
// it.
func (s *mergeSource) change(updates, inserts, deletes int) {
	s.t.Helper()
	ctx := context.Background()
	_, err := s.pool.Exec(ctx, `DELETE FROM merge_src WHERE id IN (SELECT id FROM merge_src ORDER BY random() LIMIT $1)`, deletes)
	require.NoError(s.t, err)
	_, err = s.pool.Exec(ctx, `UPDATE merge_src SET v = v || 'x', n = n + 1 WHERE id IN (SELECT id FROM merge_src ORDER BY random() LIMIT $1)`, updates)
	require.NoError(s.t, err)
	_, err = s.pool.Exec(ctx, `INSERT INTO merge_src SELECT g, 'new' || g, 7, (ARRAY['a','b','c','d'])[1 + g % 4]
		FROM generate_series($1::bigint, $2::bigint) g`, s.nextID, s.nextID+int64(inserts)-1)
	require.NoError(s.t, err)
	s.nextID += int64(inserts)
	s.publish()
}

// currentSummary is the summary of a dataset's current snapshot.
func currentSummary(t *testing.T, lake facade.Lakehouse, id string) map[string]string {
	t.Helper()
	f, ok := lake.(*facade.Facade)
	require.True(t, ok)
	tbl, err := f.LoadTable(context.Background(), id)
	require.NoError(t, err)
	return tbl.CurrentSnapshot().Summary.Properties
}

func summaryInt(t *testing.T, sum map[string]string, key string) int64 {
	t.Helper()
	if sum[key] == "" {
		return 0
	}
	n, err := strconv.ParseInt(sum[key], 10, 64)
	require.NoError(t, err)
	return n
}

// rowIdentities maps each id of an Iceberg dataset to its identity columns.
func rowIdentities(t *testing.T, lake facade.Lakehouse, id string) map[int64][3]int64 {
	t.Helper()
	out := map[int64][3]int64{}
	for rec, err := range lake.Scan(context.Background(), id, facade.ScanOptions{}) {
		require.NoError(t, err)
		sc := rec.Schema()
		col := func(name string) int { return sc.FieldIndices(name)[0] }
		ids := rec.Column(col("id")).(*array.Int64)
		ri := rec.Column(col(facade.ColRowIndex)).(*array.Int64)
		rid := rec.Column(col(facade.ColRowID)).(*array.Int64)
		ca := rec.Column(col(facade.ColCreatedAt)).(*array.Timestamp)
		for i := 0; i < int(rec.NumRows()); i++ {
			_, dup := out[ids.Value(i)]
			require.False(t, dup, "id %d twice", ids.Value(i))
			out[ids.Value(i)] = [3]int64{ri.Value(i), rid.Value(i), int64(ca.Value(i))}
		}
	}
	return out
}

// A snapshot_replace over an Iceberg target writes only the new and
// changed rows and position deletes of the old versions and of the keys
// that disappeared, in one snapshot; unchanged rows keep their identity;
// the counts and the checksum are those of the Postgres arm.
func TestIncrementalMergeWritesOnlyChanges(t *testing.T) {
	t.Parallel()
	for _, catalog := range []string{"sql", "postgres"} {
		t.Run(catalog, func(t *testing.T) {
			t.Parallel()
			var w *world
			if catalog == "postgres" {
				w = newPGWorld(t, nil, nil).world
			} else {
				w = newWorld(t, nil)
			}
			src := newMergeSource(t, w.pool, 2000)
			ensureOutputs(t, w.pool, "dst", "pg", "an", "pg_an")
			w.iceberg("dst", "an")
			replace := func(out string) writestrategy.Deploy {
				return writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "src", Target: out, Key: []string{"id"}}
			}
			appendNew := func(out string) writestrategy.Deploy {
				return writestrategy.Deploy{Mode: writestrategy.KindAppendNew, Source: "src", Target: out, Key: []string{"id"}}
			}
			for _, out := range []string{"dst", "pg"} {
				require.Equal(t, int64(2000), w.mustWrite(replace(out))[0].Rows)
			}
			for _, out := range []string{"an", "pg_an"} {
				require.Equal(t, int64(2000), w.mustWrite(appendNew(out))[0].Rows)
			}
			before := rowIdentities(t, w.lake, "dst")

			src.change(20, 10, 5)
			got := w.mustWrite(replace("dst"))[0]
			want := w.mustWrite(replace("pg"))[0]
			require.Equal(t, int64(2005), got.Rows)
			require.Equal(t, int64(2000-20-5), got.Preserved)
			require.Equal(t, want.Rows, got.Rows)
			require.Equal(t, want.Skipped, got.Skipped)
			require.Equal(t, want.Preserved, got.Preserved)
			require.Equal(t, w.checksum("pg"), w.checksum("dst"))
			sum := currentSummary(t, w.lake, "dst")
			require.Equal(t, int64(30), summaryInt(t, sum, "added-records"), "only the new and changed rows are written")
			require.Equal(t, int64(25), summaryInt(t, sum, "added-position-deletes"))
			require.Equal(t, "2005", sum[vocab.SummaryRows])

			after := rowIdentities(t, w.lake, "dst")
			require.Len(t, after, 2005)
			kept := 0
			for id, ident := range after {
				if old, ok := before[id]; ok && old == ident {
					kept++
				}
			}
			require.Equal(t, int(got.Preserved), kept, "unchanged rows keep __row_index, __row_id and __created_at")

			gotAN := w.mustWrite(appendNew("an"))[0]
			wantAN := w.mustWrite(appendNew("pg_an"))[0]
			require.Equal(t, int64(10), gotAN.Rows)
			require.Equal(t, wantAN.Rows, gotAN.Rows)
			require.Equal(t, wantAN.Skipped, gotAN.Skipped)
			require.Equal(t, w.checksum("pg_an"), w.checksum("an"))
		})
	}
}

// Many mixed incremental runs (changes, inserts, key deletes) on an
// unpartitioned and a partitioned Iceberg target: after each batch of runs
// the targets hold exactly the rows of a full rebuild from the same source
// and agree with the Postgres arm, run by run.
func TestIncrementalManyRuns(t *testing.T) {
	t.Parallel()
	part := &facade.Config{PartitionFor: func(id string) (facade.Partitioning, bool) {
		if id == "ice_part" {
			return facade.Partitioning{Fields: []facade.PartitionField{{Column: "category"}}}, true
		}
		return facade.Partitioning{}, false
	}}
	w := newPGWorld(t, part, nil).world
	src := newMergeSource(t, w.pool, 3000)
	outs := []string{"ice", "ice_part", "pg", "ice_an", "pg_an", "rebuild", "from_ice"}
	ensureOutputs(t, w.pool, outs...)
	w.iceberg("ice", "ice_part", "ice_an", "rebuild")
	deploy := func(mode writestrategy.Kind, out string) writestrategy.WriteResult {
		return w.mustWrite(writestrategy.Deploy{Mode: mode, Source: "src", Target: out, Key: []string{"id"}})[0]
	}
	runs := *incrementalRuns
	for r := 0; r <= runs; r++ {
		if r > 0 {
			src.change(src.rnd.IntN(40), src.rnd.IntN(20), src.rnd.IntN(15))
		}
		want := deploy(writestrategy.KindSnapshotReplace, "pg")
		for _, out := range []string{"ice", "ice_part"} {
			got := deploy(writestrategy.KindSnapshotReplace, out)
			require.Equal(t, want.Rows, got.Rows, "run %d %s", r, out)
			require.Equal(t, want.Skipped, got.Skipped, "run %d %s", r, out)
			require.Equal(t, want.Preserved, got.Preserved, "run %d %s", r, out)
		}
		wantAN := deploy(writestrategy.KindAppendNew, "pg_an")
		gotAN := deploy(writestrategy.KindAppendNew, "ice_an")
		require.Equal(t, wantAN.Rows, gotAN.Rows, "run %d append_new", r)
		require.Equal(t, wantAN.Skipped, gotAN.Skipped, "run %d append_new", r)
		if r%10 != 0 && r != runs {
			continue
		}
		rebuild := w.mustWrite(writestrategy.Transform{Source: "src", Output: "rebuild"})[0]
		full := w.checksum("rebuild")
		require.Equal(t, rebuild.Rows, full.Rows)
		for _, out := range []string{"ice", "ice_part", "pg"} {
			require.Equal(t, full, w.checksum(out), "run %d: %s holds a full rebuild's rows", r, out)
		}
		require.Equal(t, w.checksum("pg_an"), w.checksum("ice_an"), "run %d append_new", r)
		// A merged table read as a native source (hydrated, deletes
		// applied) by a later strategy.
		w.mustWrite(writestrategy.Transform{Source: "ice", Output: "from_ice"})
		require.Equal(t, full, w.checksum("from_ice"), "run %d: read back as a source", r)
		for _, out := range []string{"ice", "ice_part"} {
			ids := rowIdentities(t, w.lake, out)
			require.Len(t, ids, int(full.Rows), fmt.Sprintf("run %d %s: one row per key", r, out))
			seen := map[int64]bool{}
			for _, ident := range ids {
				require.False(t, seen[ident[0]], "run %d %s: __row_index %d twice", r, out, ident[0])
				seen[ident[0]] = true
			}
			ps, err := w.d.Verify(context.Background(), writestrategy.Request{WriterID: writer,
				Strategy: writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "src", Target: out, Key: []string{"id"}}})
			require.NoError(t, err)
			require.True(t, ps[0].OK(), "run %d: %s", r, ps[0])
		}
	}
}
