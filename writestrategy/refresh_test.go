package writestrategy_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/internal/refresh"
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

// refreshCase is a declared output and the same output without a
// declaration, written after each change and compared.
type refreshCase struct {
	w        *world
	declared writestrategy.WriteStrategy
	plain    writestrategy.WriteStrategy
	out, ref string
}

// run writes both and checks the declared output equals the full
// recompute (rows and checksum) and Verify; it returns the report.
func (c refreshCase) run() incremental.RefreshReport {
	c.w.t.Helper()
	res := c.w.mustWrite(c.declared)
	c.w.mustWrite(c.plain)
	require.Equal(c.w.t, c.w.checksum(c.ref), c.w.checksum(c.out), "declared output = full recompute")
	ps, err := c.w.d.Verify(context.Background(), writestrategy.Request{Strategy: c.declared})
	require.NoError(c.w.t, err)
	require.True(c.w.t, ps[0].OK(), ps[0].String())
	require.Equal(c.w.t, c.w.checksum(c.ref).Rows, res[0].Rows)
	return res[0].Refresh
}

func rowIndexesByData(t *testing.T, pool *pgxpool.Pool, id string) map[string]int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT data::text, row_index FROM lakewrite.dataset_rows WHERE dataset_id = $1`, id)
	require.NoError(t, err)
	m := map[string]int64{}
	var d string
	var i int64
	_, err = pgx.ForEachRow(rows, []any{&d, &i}, func() error { m[d] = i; return nil })
	require.NoError(t, err)
	return m
}

// A GROUP BY over a row-store source (written by snapshot_replace deploys
// from a table) recomputes only the groups its changes touch on the
// Postgres arm, and equals a full recompute after inserts, updates
// (including of the key), deletes, NULL keys and a deleted group.
func TestRefreshRowStoreSource(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.exec(`CREATE TABLE stage (id bigint PRIMARY KEY, grp text, amount numeric(12,2))`)
	w.exec(`INSERT INTO stage SELECT g, 'g' || (g % 50), g * 1.5 FROM generate_series(1, 2000) g`)
	_, err := writestrategy.RegisterRelation(context.Background(), w.pool, nil, "stage", "stage")
	require.NoError(t, err)
	ensureOutputs(t, w.pool, "facts", "by_grp", "by_grp_ref")
	deploy := writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "stage", Target: "facts", Key: []string{"id"}}
	w.mustWrite(deploy)
	steps := []writestrategy.Step{{Name: "g", SQL: `SELECT grp, sum(amount) AS total, count(*) AS n FROM source GROUP BY grp`}}
	dep := &incremental.Dependency{Key: []string{"grp"}, Sources: map[string][]string{"facts": {"grp"}}}
	c := refreshCase{w: w, out: "by_grp", ref: "by_grp_ref",
		declared: writestrategy.Transform{Output: "by_grp", Source: "facts", Steps: steps, Depends: dep},
		plain:    writestrategy.Transform{Output: "by_grp_ref", Source: "facts", Steps: steps}}
	r := c.run()
	require.Equal(t, incremental.RefreshFull, r.Mode, r.Reason)
	var indexes int
	require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_indexes WHERE tablename = 'dataset_rows' AND indexname LIKE 'dataset_rows_key_%'`).Scan(&indexes))
	require.Equal(t, 2, indexes, "the full run built the source's and the output's key index")
	r = c.run()
	require.Equal(t, incremental.RefreshIncremental, r.Mode, r.Reason)
	require.Zero(t, r.Keys)
	require.Empty(t, r.Scanned, "the first incremental run reads through the key index")
	before := rowIndexesByData(t, w.pool, "by_grp")

	change := func(sql string, wantKeys int64) {
		t.Helper()
		w.exec(sql)
		w.mustWrite(deploy)
		r := c.run()
		require.Equal(t, incremental.RefreshIncremental, r.Mode, "%s: %s", sql, r.Reason)
		require.Equal(t, wantKeys, r.Keys, sql)
		require.Empty(t, r.Scanned, sql)
	}
	change(`INSERT INTO stage VALUES (5001, 'g1', 10), (5002, 'new', 1)`, 2)
	// Unchanged groups kept their rows (their row_index).
	after := rowIndexesByData(t, w.pool, "by_grp")
	kept := 0
	for d, i := range before {
		if after[d] == i {
			kept++
		}
	}
	require.Equal(t, 49, kept)
	change(`UPDATE stage SET amount = amount + 1 WHERE id = 7`, 1)
	change(`UPDATE stage SET grp = 'g3' WHERE id = 8`, 2) // the old and the new key
	change(`DELETE FROM stage WHERE grp = 'new'`, 1)      // a group disappears
	change(`UPDATE stage SET grp = NULL WHERE id IN (9, 10)`, 3)
	change(`UPDATE stage SET amount = 0 WHERE grp IS NULL`, 1)
	change(`DELETE FROM stage WHERE id = 9`, 1)
	// Above the share: full.
	w.exec(`UPDATE stage SET amount = amount * 2`)
	w.mustWrite(deploy)
	r = c.run()
	require.Equal(t, incremental.RefreshFull, r.Mode)
	require.NotEmpty(t, r.Reason)
}

// A join of a tracked relation (the fact side, declared) with a
// dimension (undeclared) recomputes the affected keys after changes of
// the facts; a change of the dimension, a TRUNCATE of the facts and a
// flip of the output make the run full; a relation without an index on
// its key is reported scanned. A false declaration is found by Verify.
func TestRefreshRelationSource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	w.exec(`CREATE TABLE fact (id bigint PRIMARY KEY, cust bigint, amount numeric(12,2))`)
	w.exec(`INSERT INTO fact SELECT g, g % 40, g FROM generate_series(1, 1000) g`)
	w.exec(`CREATE TABLE dim (cust bigint PRIMARY KEY, name text)`)
	w.exec(`INSERT INTO dim SELECT g, 'c' || g FROM generate_series(0, 45) g`)
	for _, r := range []string{"fact", "dim"} {
		_, err := writestrategy.RegisterRelation(ctx, w.pool, nil, r, r)
		require.NoError(t, err)
	}
	require.NoError(t, w.d.Track(ctx, "fact", "cust"))
	require.NoError(t, w.d.Track(ctx, "dim", "cust"))
	ensureOutputs(t, w.pool, "joined", "joined_ref", "sums", "sums_ref")
	on := []writestrategy.JoinOn{{Left: "cust", Right: "cust"}}
	cols := []writestrategy.JoinColumn{{Side: "left", Name: "id"}, {Side: "left", Name: "cust"}, {Side: "left", Name: "amount"}, {Side: "right", Name: "name"}}
	dep := &incremental.Dependency{Key: []string{"cust"}, Sources: map[string][]string{"fact": {"cust"}}}
	join := refreshCase{w: w, out: "joined", ref: "joined_ref",
		declared: writestrategy.Join{Output: "joined", Left: "fact", Right: "dim", Type: writestrategy.LeftJoin, On: on, Columns: cols, Depends: dep},
		plain:    writestrategy.Join{Output: "joined_ref", Left: "fact", Right: "dim", Type: writestrategy.LeftJoin, On: on, Columns: cols}}
	steps := []writestrategy.Step{{Name: "g", SQL: `SELECT cust, sum(amount) AS total FROM source GROUP BY cust`}}
	sums := refreshCase{w: w, out: "sums", ref: "sums_ref",
		declared: writestrategy.Transform{Output: "sums", Source: "fact", Steps: steps, Depends: dep},
		plain:    writestrategy.Transform{Output: "sums_ref", Source: "fact", Steps: steps}}
	both := func(want incremental.RefreshMode, keys int64) []incremental.RefreshReport {
		t.Helper()
		var rs []incremental.RefreshReport
		for _, c := range []refreshCase{join, sums} {
			r := c.run()
			require.Equal(t, want, r.Mode, "%s: %s", c.out, r.Reason)
			if want == incremental.RefreshIncremental {
				require.Equal(t, keys, r.Keys, c.out)
			} else {
				require.NotEmpty(t, r.Reason)
			}
			rs = append(rs, r)
		}
		return rs
	}
	both(incremental.RefreshFull, 0)
	rs := both(incremental.RefreshIncremental, 0)
	require.Equal(t, []string{"fact"}, rs[0].Scanned, "no index on fact.cust")
	w.exec(`CREATE INDEX ON fact (cust)`)
	w.exec(`INSERT INTO fact VALUES (2001, 3, 5), (2002, 99, 1), (2003, NULL, 2)`)
	rs = both(incremental.RefreshIncremental, 3)
	require.Empty(t, rs[0].Scanned)
	w.exec(`UPDATE fact SET cust = 4 WHERE id = 2001`)
	both(incremental.RefreshIncremental, 2)
	w.exec(`DELETE FROM fact WHERE cust = 99 OR cust IS NULL`)
	both(incremental.RefreshIncremental, 2)
	// A change of the undeclared dimension: full for the join (the
	// transform does not read it).
	w.exec(`UPDATE dim SET name = 'renamed' WHERE cust = 5`)
	r := join.run()
	require.Equal(t, incremental.RefreshFull, r.Mode)
	require.Contains(t, r.Reason, `"dim"`)
	// TRUNCATE: full.
	w.exec(`TRUNCATE fact`)
	w.exec(`INSERT INTO fact SELECT g, g % 40, g FROM generate_series(1, 500) g`)
	both(incremental.RefreshFull, 0)
	both(incremental.RefreshIncremental, 0)
	// A flip of the output to Iceberg: full.
	w.iceberg("sums")
	r = sums.run()
	require.Equal(t, incremental.RefreshFull, r.Mode)
	require.Contains(t, r.Reason, "flip")

	// A false declaration (a running total over the whole table is not
	// keyed by cust) gives a wrong output after an incremental run, which
	// Verify finds.
	ensureOutputs(t, w.pool, "share")
	lie := writestrategy.Transform{Output: "share", Source: "fact", Depends: dep, Steps: []writestrategy.Step{{Name: "s",
		SQL: `SELECT cust, sum(amount) AS total, (SELECT sum(amount) FROM source) AS grand FROM source GROUP BY cust`}}}
	w.mustWrite(lie)
	w.mustWrite(lie)
	w.exec(`INSERT INTO fact VALUES (3001, 7, 1000)`)
	res := w.mustWrite(lie)
	require.Equal(t, incremental.RefreshIncremental, res[0].Refresh.Mode, res[0].Refresh.Reason)
	ps, err := w.d.Verify(ctx, writestrategy.Request{Strategy: lie})
	require.NoError(t, err)
	require.False(t, ps[0].OK(), "Verify finds the false declaration")
}

// A relation's change share is measured against its rows even when its
// statistics are stale: analyzed when empty and filled since, or vacuumed
// with every row deleted and refilled (the planner's estimate says 0
// rows for both), or never analyzed. A change past the share is full.
func TestRefreshRelationStaleStatistics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	w.exec(`CREATE TABLE ev (id bigint PRIMARY KEY, k bigint, v bigint) WITH (autovacuum_enabled = off)`)
	w.exec(`CREATE INDEX ON ev (k)`)
	_, err := writestrategy.RegisterRelation(ctx, w.pool, nil, "ev", "ev")
	require.NoError(t, err)
	require.NoError(t, w.d.Track(ctx, "ev", "k"))
	ensureOutputs(t, w.pool, "evsum", "evsum_ref")
	steps := []writestrategy.Step{{Name: "g", SQL: `SELECT k, sum(v) AS total, count(*) AS n FROM source GROUP BY k`}}
	c := refreshCase{w: w, out: "evsum", ref: "evsum_ref",
		declared: writestrategy.Transform{Output: "evsum", Source: "ev", Steps: steps,
			Depends: &incremental.Dependency{Key: []string{"k"}, Sources: map[string][]string{"ev": {"k"}}}},
		plain: writestrategy.Transform{Output: "evsum_ref", Source: "ev", Steps: steps}}
	stats := func() (tuples float64, pages int64) {
		t.Helper()
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT reltuples, relpages FROM pg_class WHERE oid = 'ev'::regclass`).Scan(&tuples, &pages))
		return tuples, pages
	}
	incr := func(keys int64) {
		t.Helper()
		r := c.run()
		require.Equal(t, incremental.RefreshIncremental, r.Mode, r.Reason)
		require.Equal(t, keys, r.Keys)
	}

	w.exec(`ANALYZE ev`)
	w.exec(`INSERT INTO ev SELECT g, g % 50, g FROM generate_series(1, 1000) g`)
	tuples, pages := stats()
	require.Zero(t, tuples, "analyzed when empty")
	require.Zero(t, pages)
	c.run()
	w.exec(`UPDATE ev SET v = v + 1 WHERE id = 7`)
	incr(1)

	w.exec(`DELETE FROM ev`)
	r := c.run()
	require.Equal(t, incremental.RefreshFull, r.Mode, "every row changed")
	require.Contains(t, r.Reason, "exceed the share")
	w.exec(`VACUUM ev`)
	w.exec(`INSERT INTO ev SELECT g, g % 50, g FROM generate_series(1, 2000) g`)
	if tuples, pages := stats(); tuples == 0 && pages > 0 {
		t.Logf("vacuumed with no row: reltuples 0 over %d pages", pages)
	}
	r = c.run()
	require.Equal(t, incremental.RefreshFull, r.Mode, "2,000 inserts")
	w.exec(`INSERT INTO ev VALUES (5001, 3, 1), (5002, NULL, 2)`)
	incr(2)
	w.exec(`UPDATE ev SET v = 0 WHERE id <= 300`)
	r = c.run()
	require.Equal(t, incremental.RefreshFull, r.Mode, "600 images of 2,002 rows")
	require.Contains(t, r.Reason, "exceed the share")
	w.exec(`UPDATE ev SET v = 1 WHERE id <= 150`)
	incr(50)
}

// The affected keys of a row-store dataset are read through its key index
// (refresh.IndexSQL), for a key of one column and of two: the planner has
// no statistics of the keys' text, and a plain IN over it made it read
// the whole table.
func TestRowStoreKeyedReadUsesIndex(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	ctx := context.Background()
	ensureOutputs(t, w.pool, "keyed", "other")
	for _, ds := range []string{"keyed", "other"} {
		w.exec(`INSERT INTO lakewrite.dataset_rows (dataset_id, row_index, data)
			SELECT '` + ds + `', g, jsonb_build_object('', 1, 'id', g, 'k', g % 7, 'name', 'row ' || g) FROM generate_series(0, 99999) g`)
	}
	for _, cols := range [][]refresh.Col{{{Name: "id", Type: "bigint"}}, {{Name: "id", Type: "bigint"}, {Name: "k", Type: "integer"}}} {
		w.exec(refresh.IndexSQL("lakewrite.dataset_rows", "keyed", cols))
		w.exec(`ANALYZE lakewrite.dataset_rows`)
		tx, err := w.pool.Begin(ctx)
		require.NoError(t, err)
		types := []string{"bigint", "integer"}[:len(cols)]
		_, err = tx.Exec(ctx, refresh.CreateSQL(types))
		require.NoError(t, err)
		keys := `SELECT g * 97` + map[bool]string{true: ", (g * 97) % 7", false: ""}[len(cols) > 1] + ` FROM generate_series(1, 100) g`
		_, err = tx.Exec(ctx, `INSERT INTO `+refresh.Table+` `+keys)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `ANALYZE `+refresh.Table)
		require.NoError(t, err)
		q := `SELECT d.data FROM lakewrite.dataset_rows d WHERE d.dataset_id = 'keyed' AND ` + refresh.RowStoreCond("keyed", cols, false)
		var n int
		err = tx.QueryRow(ctx, `SELECT count(*) FROM (`+q+`) x`).Scan(&n)
		var plan []string
		if err == nil {
			var rows pgx.Rows
			if rows, err = tx.Query(ctx, `EXPLAIN `+q); err == nil {
				plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
			}
		}
		require.NoError(t, tx.Rollback(ctx))
		require.NoError(t, err)
		require.Equal(t, 100, n)
		require.Contains(t, strings.Join(plan, "\n"), refresh.IndexName("keyed", cols), "%d key columns: %s", len(cols), strings.Join(plan, "\n"))
	}
}

// The affected keys of an indexed relation are read through its index
// (refresh.IndexedCond), for a key of one column and of two: the rows of
// the affected keys lie all over the table, and for an IN (SELECT ...)
// over the affected-key table the planner read the whole table.
func TestRelationKeyedReadUsesIndex(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	ctx := context.Background()
	w.exec(`CREATE TABLE spread (id bigint PRIMARY KEY, g bigint NOT NULL, h integer NOT NULL, pad text NOT NULL)`)
	w.exec(`INSERT INTO spread SELECT s, (s::bigint * 104729) % 20000, s % 3, repeat('x', 60) FROM generate_series(1, 200000) s`)
	w.exec(`CREATE INDEX spread_g_h ON spread (g, h)`)
	w.exec(`ANALYZE spread`)
	// Keys of one and two columns; the second has the index's first
	// column second.
	for _, names := range [][]string{{"g"}, {"h", "g"}} {
		exprs := make([]string, len(names))
		types := make([]string, len(names))
		for i, n := range names {
			exprs[i] = "r." + n
			types[i] = map[string]string{"g": "bigint", "h": "integer"}[n]
		}
		var lead string
		var stats bool
		require.NoError(t, w.pool.QueryRow(ctx, refresh.KeyIndexedSQL, "spread", names).Scan(&lead, &stats))
		require.Equal(t, "g", lead)
		require.True(t, stats, "spread is analyzed")
		tx, err := w.pool.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, refresh.CreateSQL(types))
		require.NoError(t, err)
		// 1% of the groups, as a run's affected keys.
		cols := map[bool]string{true: "h, (g * 7919) % 20000", false: "(g * 7919) % 20000"}[len(names) > 1]
		_, err = tx.Exec(ctx, `INSERT INTO `+refresh.Table+` SELECT DISTINCT `+cols+` FROM generate_series(1, 200) g, generate_series(0, 2) h`)
		require.NoError(t, err)
		var want int
		err = tx.QueryRow(ctx, `SELECT count(*) FROM spread r WHERE `+refresh.Cond(exprs, false)).Scan(&want)
		// The keys read in the statement, and given as its parameter
		// (refresh.LeadKeysSQL), whose rows the planner then estimates.
		i := slices.Index(names, lead)
		var keys string
		if err == nil {
			err = tx.QueryRow(ctx, refresh.LeadKeysSQL(i)).Scan(&keys)
		}
		type form struct {
			q    string
			args []any
		}
		forms := []form{{q: `SELECT * FROM spread r WHERE ` + refresh.IndexedCond(exprs, i, false, "")},
			{q: `SELECT * FROM spread r WHERE ` + refresh.IndexedCond(exprs, i, false, refresh.ParamKeys("$1", "bigint")), args: []any{keys}}}
		ns := make([]int, len(forms))
		plans := make([][]string, len(forms))
		for f := range forms {
			if err == nil {
				err = tx.QueryRow(ctx, `SELECT count(*) FROM (`+forms[f].q+`) x`, forms[f].args...).Scan(&ns[f])
			}
			if err == nil {
				var rows pgx.Rows
				if rows, err = tx.Query(ctx, `EXPLAIN `+forms[f].q, forms[f].args...); err == nil {
					plans[f], err = pgx.CollectRows(rows, pgx.RowTo[string])
				}
			}
		}
		require.NoError(t, tx.Rollback(ctx))
		require.NoError(t, err)
		for f, n := range ns {
			plan := strings.Join(plans[f], "\n")
			require.Equal(t, want, n)
			require.Equal(t, 200*10, n, "%v", names)
			require.Contains(t, plan, "spread_g_h", "%v: %s", names, plan)
			require.NotContains(t, plan, "Seq Scan on spread", "%v: %s", names, plan)
		}
		// Given the keys, the planner estimates the rows of the lead
		// column's 200 keys (10 a key) within a factor of two; reading
		// them in the statement, as a few keys' rows.
		est := regexp.MustCompile(`on spread .*rows=(\d+)`).FindStringSubmatch(strings.Join(plans[1], "\n"))
		require.NotNil(t, est, "%s", strings.Join(plans[1], "\n"))
		rows, _ := strconv.Atoi(est[1])
		require.Greater(t, rows, 1000, "%v: %s", names, strings.Join(plans[1], "\n"))
	}
	// No index led by the key: no row.
	err := w.pool.QueryRow(ctx, refresh.KeyIndexedSQL, "spread", []string{"h"}).Scan(new(string), new(bool))
	require.ErrorIs(t, err, pgx.ErrNoRows)
	// A table never analyzed: the planner has no statistics of its key,
	// and the keys are not given as a parameter (refresh.ParamKeys).
	w.exec(`CREATE TABLE fresh (id bigint PRIMARY KEY, g bigint NOT NULL)`)
	w.exec(`INSERT INTO fresh SELECT s, s % 3 FROM generate_series(1, 10) s`)
	w.exec(`CREATE INDEX ON fresh (g)`)
	var lead string
	var stats bool
	require.NoError(t, w.pool.QueryRow(ctx, refresh.KeyIndexedSQL, "fresh", []string{"g"}).Scan(&lead, &stats))
	require.Equal(t, "g", lead)
	require.False(t, stats)
	w.exec(`ANALYZE fresh`)
	require.NoError(t, w.pool.QueryRow(ctx, refresh.KeyIndexedSQL, "fresh", []string{"g"}).Scan(&lead, &stats))
	require.True(t, stats)
}

// The affected keys reach the recompute of an analyzed, indexed relation
// as an array of the key's type: an enum, a domain, uuid, timestamptz,
// numeric(10,2) and varchar(8), with
// NULL keys, changes of the key and deletes, written to Iceberg. Each run
// equals the full recompute.
func TestRefreshRelationKeyTypes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	w.exec(`CREATE TYPE mood AS ENUM ('low', 'mid', 'high', 'über')`)
	w.exec(`CREATE DOMAIN code AS text CHECK (VALUE <> 'x')`)
	types := []struct{ typ, val string }{
		{"mood", `(ARRAY['low','mid','high','über']::mood[])[1 + g % 4]`},
		{"code", `'c' || (g % 300)`},
		{"uuid", `('00000000-0000-0000-0000-' || lpad((g % 300)::text, 12, '0'))::uuid`},
		{"timestamptz", `'2026-01-01 00:00:00+00'::timestamptz + (g % 300) * interval '1 hour'`},
		{"numeric(10,2)", `(g % 300) / 4.0`},
		{"varchar(8)", `'v' || (g % 300)`},
	}
	for i, ty := range types {
		src, out, ref := fmt.Sprintf("kt%d", i), fmt.Sprintf("kt%d_out", i), fmt.Sprintf("kt%d_ref", i)
		w.exec(`CREATE TABLE ` + src + ` (id bigint PRIMARY KEY, k ` + ty.typ + `, v bigint)`)
		w.exec(`INSERT INTO ` + src + ` SELECT g, ` + ty.val + `, g FROM generate_series(1, 3000) g`)
		w.exec(`CREATE INDEX ON ` + src + ` (k)`)
		w.exec(`ANALYZE ` + src)
		_, err := writestrategy.RegisterRelation(ctx, w.pool, nil, src, src)
		require.NoError(t, err)
		require.NoError(t, w.d.Track(ctx, src, "k"))
		ensureOutputs(t, w.pool, out, ref)
		w.iceberg(out, ref)
		steps := []writestrategy.Step{{Name: "g", SQL: `SELECT k, sum(v) AS total, count(*) AS n FROM source GROUP BY k`}}
		c := refreshCase{w: w, out: out, ref: ref,
			declared: writestrategy.Transform{Output: out, Source: src, Steps: steps,
				Depends: &incremental.Dependency{Key: []string{"k"}, Sources: map[string][]string{src: {"k"}}}},
			plain: writestrategy.Transform{Output: ref, Source: src, Steps: steps}}
		c.run()
		for step, sql := range []string{
			`UPDATE ` + src + ` SET v = v + 1 WHERE id % 97 = 0`,
			`UPDATE ` + src + ` SET k = (SELECT k FROM ` + src + ` WHERE id = 2) WHERE id IN (5, 6, 7)`,
			`INSERT INTO ` + src + ` VALUES (9001, NULL, 1), (9002, (SELECT k FROM ` + src + ` WHERE id = 11), 2)`,
			`DELETE FROM ` + src + ` WHERE id IN (9001, 13, 14)`,
			`UPDATE ` + src + ` SET k = NULL WHERE id = 21`,
		} {
			w.exec(sql)
			r := c.run()
			require.Equal(t, incremental.RefreshIncremental, r.Mode, "%s step %d: %s", ty.typ, step, r.Reason)
			require.Positive(t, r.Keys, "%s step %d", ty.typ, step)
			require.Empty(t, r.Scanned, ty.typ)
		}
	}
}
