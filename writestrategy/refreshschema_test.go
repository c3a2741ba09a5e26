package writestrategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// A tracked table's schema changed under declared outputs (on both arms):
// columns added and dropped, a column's values rewritten by ALTER COLUMN
// TYPE (no trigger fires), a tracked column renamed and renamed back, the
// relation registered again where its columns changed. After each, the
// outputs equal a full recompute; the changes no trigger saw make the next
// run full.
func TestRefreshSourceSchemaChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	w.exec(`CREATE TABLE fact (id bigint PRIMARY KEY, cust bigint, amount numeric(12,2), extra text)`)
	w.exec(`CREATE INDEX ON fact (cust)`)
	w.exec(`INSERT INTO fact SELECT g, g % 40, g, 'x' FROM generate_series(1, 1000) g`)
	_, err := writestrategy.RegisterRelation(ctx, w.pool, nil, "fact", "fact")
	require.NoError(t, err)
	require.NoError(t, w.d.Track(ctx, "fact", "cust"))
	ensureOutputs(t, w.pool, "sums", "sums_ref", "isums", "isums_ref")
	w.iceberg("isums", "isums_ref")
	dep := &incremental.Dependency{Key: []string{"cust"}, Sources: map[string][]string{"fact": {"cust"}}}
	steps := []writestrategy.Step{{Name: "g", SQL: `SELECT cust, count(*) AS n, sum(amount) AS total FROM source GROUP BY cust`}}
	var cases []refreshCase
	for _, out := range []string{"sums", "isums"} {
		cases = append(cases, refreshCase{w: w, out: out, ref: out + "_ref",
			declared: writestrategy.Transform{Output: out, Source: "fact", Steps: steps, Depends: dep},
			plain:    writestrategy.Transform{Output: out + "_ref", Source: "fact", Steps: steps}})
	}
	register := func() {
		t.Helper()
		_, err := writestrategy.RegisterRelation(ctx, w.pool, nil, "fact", "fact")
		require.NoError(t, err)
	}
	runs := func(what string, want incremental.RefreshMode) {
		t.Helper()
		for _, c := range cases {
			r := c.run()
			if want != "" {
				require.Equal(t, want, r.Mode, "%s: %s: %s", what, c.out, r.Reason)
			}
		}
	}
	runs("first", incremental.RefreshFull)
	w.exec(`UPDATE fact SET amount = amount + 1 WHERE id < 5`)
	runs("small change", incremental.RefreshIncremental)

	w.exec(`ALTER TABLE fact ADD COLUMN more integer DEFAULT 7`)
	w.exec(`INSERT INTO fact VALUES (2001, 3, 5, 'y', 1)`)
	register()
	runs("column added", "")
	w.exec(`UPDATE fact SET amount = amount + 1 WHERE id = 7`)
	runs("after the column added", incremental.RefreshIncremental)

	w.exec(`ALTER TABLE fact DROP COLUMN extra`)
	w.exec(`DELETE FROM fact WHERE id = 9`)
	register()
	runs("untracked column dropped", "")

	// Every value of amount rewritten, the type kept: no trigger fires.
	w.exec(`ALTER TABLE fact ALTER COLUMN amount TYPE numeric(12,2) USING amount * 2`)
	runs("values rewritten by ALTER COLUMN TYPE", incremental.RefreshFull)
	w.exec(`ALTER TABLE fact ALTER COLUMN amount TYPE bigint USING (amount * 3)::bigint`)
	register()
	runs("retyped", incremental.RefreshFull)
	w.exec(`UPDATE fact SET amount = amount + 1 WHERE id = 11`)
	runs("after the rewrite", incremental.RefreshIncremental)

	// The tracked column renamed: writes go on; renamed back, the next run
	// is full (the trigger could not record the rows' keys meanwhile).
	w.exec(`ALTER TABLE fact RENAME COLUMN cust TO customer`)
	w.exec(`UPDATE fact SET customer = 5 WHERE id = 13`)
	w.exec(`INSERT INTO fact VALUES (2002, 6, 1, 1)`)
	w.exec(`ALTER TABLE fact RENAME COLUMN customer TO cust`)
	runs("tracked column renamed and back", incremental.RefreshFull)
	w.exec(`DELETE FROM fact WHERE id = 15`)
	runs("after the rename", incremental.RefreshIncremental)
}

// A tracked table whose tracking does not record a column the declaration
// maps to the key cannot say which keys changed: its runs are full and say
// why, until the column is tracked (then one more full run, the tracking
// being new, and incremental again). A model whose key is not tracked
// scores every row the same way.
func TestRefreshUntrackedKeyIsFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	w.exec(`CREATE TABLE fact (id bigint PRIMARY KEY, cust bigint, amount numeric(12,2))`)
	w.exec(`INSERT INTO fact SELECT g, g % 40, g FROM generate_series(1, 1000) g`)
	_, err := writestrategy.RegisterRelation(ctx, w.pool, nil, "fact", "fact")
	require.NoError(t, err)
	require.NoError(t, w.d.Track(ctx, "fact", "id"))
	ensureOutputs(t, w.pool, "sums", "sums_ref")
	dep := &incremental.Dependency{Key: []string{"cust"}, Sources: map[string][]string{"fact": {"cust"}}}
	steps := []writestrategy.Step{{Name: "g", SQL: `SELECT cust, sum(amount) AS total FROM source GROUP BY cust`}}
	c := refreshCase{w: w, out: "sums", ref: "sums_ref",
		declared: writestrategy.Transform{Output: "sums", Source: "fact", Steps: steps, Depends: dep},
		plain:    writestrategy.Transform{Output: "sums_ref", Source: "fact", Steps: steps}}
	c.run()
	w.exec(`UPDATE fact SET amount = amount + 1 WHERE id < 5`)
	r := c.run()
	require.Equal(t, incremental.RefreshFull, r.Mode)
	require.Contains(t, r.Reason, "does not record cust")
	require.NoError(t, w.d.Track(ctx, "fact", "id", "cust"))
	w.exec(`UPDATE fact SET amount = amount + 1 WHERE id < 9`)
	require.Equal(t, incremental.RefreshFull, c.run().Mode)
	w.exec(`UPDATE fact SET cust = 7 WHERE id = 3`)
	r = c.run()
	require.Equal(t, incremental.RefreshIncremental, r.Mode, r.Reason)
	require.Equal(t, int64(2), r.Keys)

	// A model keyed by id over a table tracking v and n only.
	w.exec(`CREATE TABLE items (id bigint PRIMARY KEY, v text NOT NULL, n integer)`)
	w.exec(`INSERT INTO items SELECT g, 'v' || g, (g % 97)::int FROM generate_series(1, 500) g`)
	_, err = writestrategy.RegisterRelation(ctx, w.pool, nil, "items", "items")
	require.NoError(t, err)
	require.NoError(t, w.d.Track(ctx, "items", "v", "n"))
	ensureOutputs(t, w.pool, "scored")
	s := &scorer{}
	w.mustWrite(s.model("scored", "items"))
	w.exec(`UPDATE items SET v = v || '!' WHERE id <= 10`)
	s.calls.Store(0)
	w.mustWrite(s.model("scored", "items"))
	require.Equal(t, int64(500), s.calls.Load(), "every row scored: the window cannot tell which ids changed")
}

// The change log of a declared output's and a model's sources is trimmed
// by the runs themselves down to what their slowest consumer has not read
// (here, at every run): entries both consumers have read go, and those one
// has not stay until it runs; each output still equals its full recompute.
func TestRunsTrimConsumedChangeLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	writestrategy.SetTrimEvery(w.d, 0)
	w.exec(`CREATE TABLE fact (id bigint PRIMARY KEY, cust bigint, amount numeric(12,2))`)
	w.exec(`INSERT INTO fact SELECT g, g % 40, g FROM generate_series(1, 1000) g`)
	_, err := writestrategy.RegisterRelation(ctx, w.pool, nil, "fact", "fact")
	require.NoError(t, err)
	require.NoError(t, w.d.Track(ctx, "fact", "id", "cust"))
	ensureOutputs(t, w.pool, "sums", "sums_ref", "sums2", "sums2_ref")
	dep := &incremental.Dependency{Key: []string{"cust"}, Sources: map[string][]string{"fact": {"cust"}}}
	steps := []writestrategy.Step{{Name: "g", SQL: `SELECT cust, sum(amount) AS total FROM source GROUP BY cust`}}
	var cases []refreshCase
	for _, out := range []string{"sums", "sums2"} {
		cases = append(cases, refreshCase{w: w, out: out, ref: out + "_ref",
			declared: writestrategy.Transform{Output: out, Source: "fact", Steps: steps, Depends: dep},
			plain:    writestrategy.Transform{Output: out + "_ref", Source: "fact", Steps: steps}})
	}
	entries := func() int {
		var n int
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.change_log WHERE source = 'fact'`).Scan(&n))
		return n
	}
	for _, c := range cases {
		c.run()
	}
	for i := range 3 {
		w.exec(`UPDATE fact SET amount = amount + 1 WHERE id = $1`, i+1)
	}
	n := entries()
	require.Equal(t, 6, n, "an old and a new image entry per statement")
	r := cases[0].run()
	require.Equal(t, incremental.RefreshIncremental, r.Mode, r.Reason)
	require.Equal(t, n, entries(), "sums2 has not read them")
	r = cases[1].run()
	require.Equal(t, incremental.RefreshIncremental, r.Mode, r.Reason)
	// What both have read goes (the cluster's oldest transaction, which
	// parallel tests hold back, may keep some a while).
	require.Eventually(t, func() bool {
		w.exec(`UPDATE fact SET amount = amount + 1 WHERE id = 10`)
		for _, c := range cases {
			if r := c.run(); r.Mode != incremental.RefreshIncremental {
				t.Fatalf("%s: %s", c.out, r.Reason)
			}
		}
		return entries() == 0
	}, time.Minute, 100*time.Millisecond)

	// A model reading the same kind of source is a consumer like any
	// other: a declared output's run keeps what the model has not read.
	modelTable(t, w, "items", 500)
	ensureOutputs(t, w.pool, "byn", "byn_ref", "scored")
	nsteps := []writestrategy.Step{{Name: "g", SQL: `SELECT n, count(*) AS c FROM source GROUP BY n`}}
	byn := refreshCase{w: w, out: "byn", ref: "byn_ref",
		declared: writestrategy.Transform{Output: "byn", Source: "items", Steps: nsteps,
			Depends: &incremental.Dependency{Key: []string{"n"}, Sources: map[string][]string{"items": {"n"}}}},
		plain: writestrategy.Transform{Output: "byn_ref", Source: "items", Steps: nsteps}}
	s := &scorer{}
	w.mustWrite(s.model("scored", "items"))
	byn.run()
	w.exec(`UPDATE items SET v = v || '!' WHERE id <= 10`)
	require.Equal(t, incremental.RefreshIncremental, byn.run().Mode)
	s.calls.Store(0)
	res := w.mustWrite(s.model("scored", "items"))
	require.Equal(t, incremental.RefreshIncremental, res[0].Refresh.Mode, res[0].Refresh.Reason)
	require.Equal(t, int64(10), s.calls.Load(), "the model reads the changes the declared output's run kept")
}

// Through PgBouncer in transaction mode a declared output over a tracked
// table (Track, the change log windows, the affected-key table, the keyed
// recompute) refreshes incrementally on both arms and equals its full
// recompute.
func TestRefreshThroughTransactionPooling(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	pool, err := pgxpool.New(ctx, pgtest.PgBouncer(t, url, "transaction"))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	cat, err := facade.OpenSQLCatalog(ctx, facade.CatalogConfig{DatabaseURL: url, Warehouse: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cat.Close() })
	f, err := facade.New(cat, nil)
	require.NoError(t, err)
	w := wireWorld(t, pool, f, nil, &ledger.Config{Lease: 2 * time.Second})
	w.exec(`CREATE TABLE fact (id bigint PRIMARY KEY, cust bigint, amount numeric(12,2))`)
	w.exec(`CREATE INDEX ON fact (cust)`)
	w.exec(`INSERT INTO fact SELECT g, g % 40, g FROM generate_series(1, 1000) g`)
	_, err = writestrategy.RegisterRelation(ctx, pool, nil, "fact", "fact")
	require.NoError(t, err)
	require.NoError(t, w.d.Track(ctx, "fact", "cust"))
	ensureOutputs(t, pool, "sums", "sums_ref", "isums", "isums_ref")
	w.iceberg("isums", "isums_ref")
	dep := &incremental.Dependency{Key: []string{"cust"}, Sources: map[string][]string{"fact": {"cust"}}}
	steps := []writestrategy.Step{{Name: "g", SQL: `SELECT cust, count(*) AS n, sum(amount) AS total FROM source GROUP BY cust`}}
	for _, out := range []string{"sums", "isums"} {
		c := refreshCase{w: w, out: out, ref: out + "_ref",
			declared: writestrategy.Transform{Output: out, Source: "fact", Steps: steps, Depends: dep},
			plain:    writestrategy.Transform{Output: out + "_ref", Source: "fact", Steps: steps}}
		require.Equal(t, incremental.RefreshFull, c.run().Mode)
		for i := range 3 {
			w.exec(`UPDATE fact SET cust = cust + 1, amount = amount + 1 WHERE id = $1`, 10+i)
			w.exec(`DELETE FROM fact WHERE id = $1`, 100+i)
			r := c.run()
			require.Equal(t, incremental.RefreshIncremental, r.Mode, "%s: %s", out, r.Reason)
			require.Positive(t, r.Keys)
		}
	}
}

// A key of two columns (text and bigint, NULLs in either) over a tracked
// table, on both arms: runs are incremental, count the affected key pairs,
// and equal the full recompute after updates moving rows between pairs,
// deletes and inserts.
func TestRefreshCompositeKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	w.exec(`CREATE TABLE fact (id bigint PRIMARY KEY, region text, cust bigint, amount numeric(12,2))`)
	w.exec(`CREATE INDEX ON fact (region, cust)`)
	w.exec(`INSERT INTO fact SELECT g, 'r' || (g % 3), g % 40, g FROM generate_series(1, 1000) g`)
	_, err := writestrategy.RegisterRelation(ctx, w.pool, nil, "fact", "fact")
	require.NoError(t, err)
	require.NoError(t, w.d.Track(ctx, "fact", "region", "cust"))
	ensureOutputs(t, w.pool, "pairs", "pairs_ref", "ipairs", "ipairs_ref")
	w.iceberg("ipairs", "ipairs_ref")
	dep := &incremental.Dependency{Key: []string{"region", "cust"}, Sources: map[string][]string{"fact": {"region", "cust"}}}
	steps := []writestrategy.Step{{Name: "g", SQL: `SELECT region, cust, count(*) AS n, sum(amount) AS total FROM source GROUP BY region, cust`}}
	for i, out := range []string{"pairs", "ipairs"} {
		c := refreshCase{w: w, out: out, ref: out + "_ref",
			declared: writestrategy.Transform{Output: out, Source: "fact", Steps: steps, Depends: dep},
			plain:    writestrategy.Transform{Output: out + "_ref", Source: "fact", Steps: steps}}
		c.run()
		id := int64(100 * (i + 1))                                  // rows of each output's own
		w.exec(`UPDATE fact SET region = 'r9' WHERE id = $1`, id+1) // (r2, 21) -> (r9, 21)
		r := c.run()
		require.Equal(t, incremental.RefreshIncremental, r.Mode, "%s: %s", out, r.Reason)
		require.Equal(t, int64(2), r.Keys, out)
		w.exec(`UPDATE fact SET region = NULL WHERE id = $1`, id+2) // (r0, 22) -> (NULL, 22)
		w.exec(`UPDATE fact SET cust = NULL WHERE id = $1`, id+3)   // (r1, 23) -> (r1, NULL)
		r = c.run()
		require.Equal(t, incremental.RefreshIncremental, r.Mode, "%s: %s", out, r.Reason)
		require.Equal(t, int64(4), r.Keys, out)
		w.exec(`DELETE FROM fact WHERE id IN ($1, $2)`, id+2, id+3)
		w.exec(`INSERT INTO fact VALUES ($1, NULL, NULL, 3), ($2, 'r1', 7, 4)`, 5001+id, 5002+id)
		r = c.run()
		require.Equal(t, incremental.RefreshIncremental, r.Mode, "%s: %s", out, r.Reason)
		require.Equal(t, int64(4), r.Keys, out) // (NULL, 22), (r1, NULL), (NULL, NULL), (r1, 7)
	}
}
