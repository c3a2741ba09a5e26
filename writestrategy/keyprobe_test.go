package writestrategy_test

import (
	"context"
	"iter"
	"sort"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// keyReads is the Iceberg facade recording the whole-table scans of each
// dataset: the rows read and the filters.
type keyReads struct {
	*facade.Facade
	mu      sync.Mutex
	rows    map[string]int64
	filters map[string][]facade.Range
	columns map[string][]string
}

func (r *keyReads) Scan(ctx context.Context, id string, opts facade.ScanOptions) iter.Seq2[arrow.RecordBatch, error] {
	r.mu.Lock()
	r.filters[id], r.columns[id] = opts.Filter, opts.Columns
	r.mu.Unlock()
	return func(yield func(arrow.RecordBatch, error) bool) {
		for rec, err := range r.Facade.Scan(ctx, id, opts) {
			if rec != nil {
				r.mu.Lock()
				r.rows[id] += rec.NumRows()
				r.mu.Unlock()
			}
			if !yield(rec, err) {
				return
			}
		}
	}
}

// take returns and resets the rows read of id, the last scan's filter and
// columns.
func (r *keyReads) take(id string) (int64, []facade.Range, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, f, c := r.rows[id], r.filters[id], r.columns[id]
	delete(r.rows, id)
	delete(r.filters, id)
	delete(r.columns, id)
	return n, f, c
}

// icebergOrder is column v of an Iceberg dataset's rows in __row_index
// order.
func icebergOrder(t *testing.T, lake facade.Lakehouse, id string) []string {
	t.Helper()
	type row struct {
		ri int64
		v  string
	}
	var rows []row
	for rec, err := range lake.Scan(context.Background(), id, facade.ScanOptions{Columns: []string{"v", facade.ColRowIndex}}) {
		require.NoError(t, err)
		v := rec.Column(rec.Schema().FieldIndices("v")[0]).(*array.String)
		ri := rec.Column(rec.Schema().FieldIndices(facade.ColRowIndex)[0]).(*array.Int64)
		for i := 0; i < int(rec.NumRows()); i++ {
			rows = append(rows, row{ri.Value(i), v.Value(i)})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].ri < rows[j].ri })
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.v
	}
	return out
}

// rowStoreOrder is column v of a row-store dataset's rows in row order.
func rowStoreOrder(t *testing.T, w *world, id string) []string {
	t.Helper()
	rows, err := w.pool.Query(context.Background(), `SELECT data->>'v' FROM lakewrite.dataset_rows WHERE dataset_id = $1 ORDER BY row_index`, id)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// An append_new over an Iceberg target drops the source rows whose key
// the target holds in the client (keys read from Iceberg into a set): for
// a single integer key over a registered table, a multi-column key with
// NULL parts and repeated keys, a text key (the empty text is not NULL), a key the
// probe leaves to SQL (numeric), an empty target and an empty source, over
// three runs, it writes the rows, counts, order and checksum of the
// Postgres arm, and its Verify computes what the Postgres arm's does. A
// single integer key reads only the target's keys within the source's key
// range.
func TestAppendNewKeyProbe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	cat, err := facade.OpenSQLCatalog(ctx, facade.CatalogConfig{DatabaseURL: url, Warehouse: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cat.Close() })
	f, err := facade.New(cat, &facade.Config{TargetFileSize: 4 << 10}) // many small data files
	require.NoError(t, err)
	rec := &keyReads{Facade: f, rows: map[string]int64{}, filters: map[string][]facade.Range{}, columns: map[string][]string{}}
	w := newWorldOn(t, url, rec, nil, nil, nil)

	type testCase struct {
		name string
		key  []string
		// source sets the rows of dataset "src_"+name for run r (0, 1, 2).
		source func(r int)
		// keysRead, when set, is the target rows whose keys run r > 0
		// reads (the source's key range).
		keysRead func(r int) int64
	}
	mixed := writestrategy.Schema{Columns: []writestrategy.Column{
		{Name: "k1", Type: "bigint"}, {Name: "k2", Type: "text"}, {Name: "k3", Type: "boolean"}, {Name: "v", Type: "text"}}}
	textKey := writestrategy.Schema{Columns: []writestrategy.Column{{Name: "code", Type: "text"}, {Name: "v", Type: "text"}}}
	numKey := writestrategy.Schema{Columns: []writestrategy.Column{{Name: "k", Type: "numeric"}, {Name: "v", Type: "text"}}}
	intKey := writestrategy.Schema{Columns: []writestrategy.Column{{Name: "id", Type: "integer"}, {Name: "v", Type: "text"}}}
	cases := []testCase{{
		// The shape of a registered table with a primary key, read whole:
		// run 1 adds keys above the target's, run 2 keys inside and
		// around its range (and drops some old ones).
		name: "int", key: []string{"id"},
		source: func(r int) {
			switch r {
			case 0:
				w.exec(`CREATE TABLE an_int (id bigint PRIMARY KEY, v text, n integer)`)
				w.exec(`INSERT INTO an_int SELECT g, 'v' || g, g % 7 FROM generate_series(1, 2000) g`)
				_, err := writestrategy.RegisterRelation(ctx, w.pool, nil, "src_int", "an_int")
				require.NoError(t, err)
			case 1:
				w.exec(`DELETE FROM an_int WHERE id <= 1500`)
				w.exec(`INSERT INTO an_int SELECT g, 'r1 ' || g, 0 FROM generate_series(2001, 2100) g`)
				w.exec(`UPDATE an_int SET v = 'changed ' || id WHERE id % 10 = 0`)
			case 2:
				w.exec(`INSERT INTO an_int SELECT g, 'r2 ' || g, 0 FROM generate_series(-5, 0) g`)
				w.exec(`INSERT INTO an_int VALUES (2200, 'r2 2200', 1), (1000, 'r2 1000', 1)`)
			}
		},
		keysRead: func(r int) int64 { return map[int]int64{1: 500, 2: 2100}[r] },
	}, {
		name: "mixed", key: []string{"k1", "k2", "k3"},
		source: func(r int) {
			rows := map[int]string{
				0: `VALUES (1::bigint, 'a', true, 'r0 1'), (1, 'a', false, 'r0 2'), (NULL, 'a', true, 'r0 3'), (2, NULL, NULL, 'r0 4'),
					(NULL, NULL, NULL, 'r0 5'), (1, 'a', true, 'r0 repeated'), (3, '', true, 'r0 6')`,
				1: `VALUES (NULL::bigint, NULL::text, NULL::boolean, 'r1 old nulls'), (3, NULL, true, 'r1 NULL is not empty'),
					(NULL, 'a', true, 'r1 old'), (NULL, 'a', false, 'r1 new'), (4, 'b', true, 'r1 new 4'), (4, 'b', true, 'r1 repeated'),
					(2, NULL, false, 'r1 new 2')`,
				2: `VALUES (4::bigint, 'b', true, 'r2 old'), (5, 'c', NULL::boolean, 'r2 new'), (5, 'c', NULL, 'r2 repeated')`,
			}
			seedRowStore(t, w.pool, "src_mixed", mixed, `SELECT * FROM (`+rows[r]+`) v(k1, k2, k3, v)`)
		},
	}, {
		name: "text", key: []string{"code"},
		source: func(r int) {
			rows := map[int]string{
				0: `VALUES ('a', 'r0 a'), ('', 'r0 empty'), ('b', 'r0 b'), ('a', 'r0 a again'), ('é', 'r0 é')`,
				1: `VALUES (NULL::text, 'r1 null'), ('', 'r1 empty'), ('A', 'r1 A'), ('a ', 'r1 a space'), ('e', 'r1 e')`,
				2: `VALUES (NULL::text, 'r2 null'), ('c', 'r2 c'), ('é', 'r2 é')`,
			}
			seedRowStore(t, w.pool, "src_text", textKey, `SELECT * FROM (`+rows[r]+`) v(code, v)`)
		},
	}, {
		// A numeric key is compared in SQL (1.50 is 1.5).
		name: "numeric", key: []string{"k"},
		source: func(r int) {
			rows := map[int]string{
				0: `VALUES (1.5::numeric, 'r0 1.5'), (2, 'r0 2')`,
				1: `VALUES (1.50::numeric, 'r1 1.50'), (2.0, 'r1 2.0'), (2.25, 'r1 2.25')`,
				2: `VALUES (2.250::numeric, 'r2 2.250'), (NULL, 'r2 null')`,
			}
			seedRowStore(t, w.pool, "src_numeric", numKey, `SELECT * FROM (`+rows[r]+`) v(k, v)`)
		},
	}, {
		// An empty source, then rows, then an empty source again.
		name: "empty", key: []string{"id"},
		source: func(r int) {
			rows := map[int]string{
				0: `SELECT 1::int AS id, 'x' AS v WHERE false`,
				1: `SELECT g AS id, 'r1 ' || g AS v FROM generate_series(1, 5) g`,
				2: `SELECT 1::int AS id, 'x' AS v WHERE false`,
			}
			seedRowStore(t, w.pool, "src_empty", intKey, rows[r])
		},
	}}
	for _, c := range cases {
		ensureOutputs(t, w.pool, "pg_"+c.name, "ice_"+c.name)
		w.iceberg("ice_" + c.name)
	}
	deploy := func(c testCase, out string) writestrategy.Deploy {
		return writestrategy.Deploy{Mode: writestrategy.KindAppendNew, Source: "src_" + c.name, Target: out + "_" + c.name, Key: c.key}
	}
	for r := 0; r < 3; r++ {
		for _, c := range cases {
			c.source(r)
			// Verify computes the rows a write would append; for the
			// row-store output, computed on the Iceberg path, its whole
			// contents then (an output moving sink).
			var computed, stored []facade.Checksum
			for _, out := range []string{"pg", "ice"} {
				ps, err := w.d.Verify(ctx, writestrategy.Request{WriterID: writer, Strategy: deploy(c, out)})
				require.NoError(t, err, "run %d %s", r, c.name)
				computed, stored = append(computed, ps[0].Computed), append(stored, ps[0].Stored)
			}
			added := computed[1]
			if r > 0 {
				require.Equal(t, minus(computed[0], stored[0]), added, "run %d %s: Verify computes the same rows", r, c.name)
			}
			rec.take("ice_" + c.name)
			want := w.mustWrite(deploy(c, "pg"))[0]
			got := w.mustWrite(deploy(c, "ice"))[0]
			read, filter, cols := rec.take("ice_" + c.name)
			if r > 0 {
				// The probe reads the key columns only; a key compared in
				// SQL is hydrated with the identity columns.
				wantCols := c.key
				if c.name == "numeric" {
					wantCols = append(c.key, facade.ColRowIndex, facade.ColRowID, facade.ColCreatedAt)
				}
				require.Equal(t, wantCols, cols, "run %d %s", r, c.name)
			}
			require.Equal(t, want.Rows, got.Rows, "run %d %s", r, c.name)
			require.Equal(t, want.Skipped, got.Skipped, "run %d %s", r, c.name)
			require.Equal(t, w.checksum("pg_"+c.name), w.checksum("ice_"+c.name), "run %d %s", r, c.name)
			require.Equal(t, added, minus(w.checksum("ice_"+c.name), stored[1]), "run %d %s: the rows Verify computed were written", r, c.name)
			require.Equal(t, rowStoreOrder(t, w, "pg_"+c.name), icebergOrder(t, w.lake, "ice_"+c.name), "run %d %s", r, c.name)
			if r > 0 && c.keysRead != nil {
				require.Equal(t, c.keysRead(r), read, "run %d %s: the target's keys within the source's range", r, c.name)
				if read > 0 {
					require.Len(t, filter, 1, "run %d %s", r, c.name)
				}
			}
		}
	}
	// The counts of the runs, as the Postgres arm gives them.
	for name, want := range map[string]int64{"int": 2000 + 100 + 7, "mixed": 6 + 4 + 1, "text": 4 + 4 + 1, "numeric": 2 + 1 + 1, "empty": 5} {
		require.Equal(t, want, w.checksum("ice_"+name).Rows, name)
	}
}

// minus is the checksum of the rows of a not in b, when b's rows are a's
// (checksums add up).
func minus(a, b facade.Checksum) facade.Checksum {
	return facade.Checksum{Rows: a.Rows - b.Rows, Sum: a.Sum - b.Sum, Sum2: a.Sum2 - b.Sum2}
}
