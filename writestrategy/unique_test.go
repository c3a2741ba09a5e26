package writestrategy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// dedups reports whether the deploy's planned SELECT deduplicates its
// source by key (the row_number() window).
func (w *world) dedups(dep writestrategy.Deploy) bool {
	w.t.Helper()
	ctx := context.Background()
	tx, err := w.pool.Begin(ctx)
	require.NoError(w.t, err)
	defer tx.Rollback(ctx)
	sqls, err := writestrategy.PlannedSQL(ctx, tx, dep, sink.Postgres)
	require.NoError(w.t, err)
	require.Len(w.t, sqls, 1)
	return strings.Contains(sqls[0], "PARTITION BY")
}

// A deploy over a registered table whose primary key is the deploy's key
// skips the deduplication window; its outputs (rows, skipped, preserved,
// checksum, on both sinks, snapshot_replace and append_new, across runs
// that change the source) are those of the same deploy over an unindexed
// copy of the table, which goes through the window. Once the key is no
// longer provably unique (the primary key dropped, a duplicate inserted)
// the deploy deduplicates again, as the copy does.
func TestDeployUniqueKeySkipsDedup(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	for _, tb := range []string{"uk_src", "nk_src"} {
		w.exec(`CREATE TABLE ` + tb + ` AS SELECT g::bigint AS id, 'v' || g AS v, (g % 100)::int AS n,
			(ARRAY['a','b','c','d'])[1 + g % 4] AS category FROM generate_series(1, 500) g`)
	}
	w.exec(`ALTER TABLE uk_src ADD PRIMARY KEY (id)`)
	ctx := context.Background()
	for _, r := range [][2]string{{"uk", "uk_src"}, {"nk", "nk_src"}} {
		_, err := writestrategy.RegisterRelation(ctx, w.pool, nil, r[0], r[1])
		require.NoError(t, err)
	}
	// change applies the same statement to both tables.
	change := func(sql string) {
		for _, tb := range []string{"uk_src", "nk_src"} {
			w.exec(strings.ReplaceAll(sql, "$T", tb))
		}
	}
	outs := []string{"ice_sr_uk", "ice_sr_nk", "pg_sr_uk", "pg_sr_nk", "ice_an_uk", "ice_an_nk", "pg_an_uk", "pg_an_nk"}
	ensureOutputs(t, w.pool, outs...)
	w.iceberg("ice_sr_uk", "ice_sr_nk", "ice_an_uk", "ice_an_nk")
	deploy := func(mode writestrategy.Kind, src, out string) writestrategy.Deploy {
		return writestrategy.Deploy{Mode: mode, Source: src, Target: out, Key: []string{"id"}}
	}
	type pair struct {
		mode   writestrategy.Kind
		uk, nk string
	}
	pairs := []pair{
		{mode: writestrategy.KindSnapshotReplace, uk: "ice_sr_uk", nk: "ice_sr_nk"},
		{mode: writestrategy.KindSnapshotReplace, uk: "pg_sr_uk", nk: "pg_sr_nk"},
		{mode: writestrategy.KindAppendNew, uk: "ice_an_uk", nk: "ice_an_nk"},
		{mode: writestrategy.KindAppendNew, uk: "pg_an_uk", nk: "pg_an_nk"},
	}
	// compare writes every pair from both sources and checks they agree.
	compare := func(step string, wantDedup bool) {
		t.Helper()
		for _, p := range pairs {
			if strings.HasPrefix(p.uk, "pg_") { // the plan is the same on either sink
				require.Equal(t, wantDedup, w.dedups(deploy(p.mode, "uk", p.uk)), "%s %s", step, p.uk)
				require.True(t, w.dedups(deploy(p.mode, "nk", p.nk)), "%s %s", step, p.nk)
			}
			got := w.mustWrite(deploy(p.mode, "uk", p.uk))[0]
			want := w.mustWrite(deploy(p.mode, "nk", p.nk))[0]
			require.Equal(t, want.Rows, got.Rows, "%s %s rows", step, p.uk)
			require.Equal(t, want.Skipped, got.Skipped, "%s %s skipped", step, p.uk)
			require.Equal(t, want.Preserved, got.Preserved, "%s %s preserved", step, p.uk)
			require.Equal(t, w.checksum(p.nk), w.checksum(p.uk), "%s %s rows", step, p.uk)
		}
	}
	compare("full write", false)
	change(`UPDATE $T SET v = v || 'x', n = n + 1 WHERE id % 37 = 0`)
	change(`DELETE FROM $T WHERE id % 53 = 0`)
	change(`INSERT INTO $T SELECT g, 'new' || g, 7, 'e' FROM generate_series(501, 520) g`)
	compare("changed", false)
	require.Equal(t, int64(500-500/53+20), w.mustWrite(deploy(writestrategy.KindSnapshotReplace, "uk", "pg_sr_uk"))[0].Rows)

	// The key stops being unique: the next writes deduplicate again.
	w.exec(`ALTER TABLE uk_src DROP CONSTRAINT uk_src_pkey`)
	change(`INSERT INTO $T SELECT id, v || 'dup', n, category FROM $T WHERE id IN (2, 3, 5)`)
	compare("duplicates", true)
	res := w.mustWrite(deploy(writestrategy.KindSnapshotReplace, "uk", "pg_sr_uk"))[0]
	require.Equal(t, int64(3), res.Skipped, "one row of each duplicated key is left out")

	// A unique index on a nullable key proves nothing: NULL keys are
	// deduplicated as equal.
	w.exec(`DELETE FROM uk_src WHERE id IN (2, 3, 5) AND v LIKE '%dup'`)
	w.exec(`DELETE FROM nk_src WHERE id IN (2, 3, 5) AND v LIKE '%dup'`)
	w.exec(`ALTER TABLE uk_src ALTER COLUMN id DROP NOT NULL`)
	w.exec(`CREATE UNIQUE INDEX uk_src_id ON uk_src (id)`)
	change(`INSERT INTO $T VALUES (NULL, 'null1', 1, 'n'), (NULL, 'null2', 2, 'n')`)
	compare("null keys", true)
	w.exec(`DELETE FROM uk_src WHERE id IS NULL`)
	w.exec(`DELETE FROM nk_src WHERE id IS NULL`)
	w.exec(`ALTER TABLE uk_src ALTER COLUMN id SET NOT NULL`)
	compare("unique index", false)
}
