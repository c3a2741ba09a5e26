package writestrategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// A crash restart of Postgres between two refreshes of a declared output
// over a tracked table: the changes committed before it are read by the
// next run, those of a transaction in flight at the crash (rolled back by
// the restart) never are, and the runs after it stay incremental and equal
// to the full recompute, on the Iceberg and on the Postgres arm.
func TestRefreshAcrossCrashRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, cluster := newCrashableWorld(t)
	url := cluster.URL("postgres")
	trackedFact(t, w, 4000, 200)
	steps := []writestrategy.Step{{Name: "g", SQL: `SELECT cust, sum(amount) AS total, count(*) AS n FROM source GROUP BY cust`}}
	dep := &incremental.Dependency{Key: []string{"cust"}, Sources: map[string][]string{"fact": {"cust"}}}
	var cases []refreshCase
	for _, arm := range []string{"ice", "pg"} {
		out, ref := "sums_"+arm, "sums_"+arm+"_ref"
		ensureOutputs(t, w.pool, out, ref)
		if arm == "ice" {
			w.iceberg(out, ref)
		}
		cases = append(cases, refreshCase{w: w, out: out, ref: ref,
			declared: writestrategy.Transform{Output: out, Source: "fact", Steps: steps, Depends: dep},
			plain:    writestrategy.Transform{Output: ref, Source: "fact", Steps: steps}})
	}
	runAll := func(want incremental.RefreshMode, keys int64) {
		t.Helper()
		for _, c := range cases {
			r := c.run()
			require.Equal(t, want, r.Mode, "%s: %s", c.out, r.Reason)
			if want == incremental.RefreshIncremental {
				require.Equal(t, keys, r.Keys, c.out)
			}
		}
	}
	runAll(incremental.RefreshFull, 0)
	w.exec(`UPDATE fact SET amount = amount + 1 WHERE id = 1`)
	runAll(incremental.RefreshIncremental, 1)

	// Committed before the crash: key 2. In flight at the crash: key 3.
	w.exec(`UPDATE fact SET amount = amount + 10 WHERE id = 2`)
	inflight, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer inflight.Close(context.Background())
	tx, err := inflight.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE fact SET amount = -1 WHERE id = 3`)
	require.NoError(t, err)
	require.NoError(t, cluster.CrashRestart(ctx))
	require.Error(t, tx.Commit(ctx), "the session ended with the crash")
	// pgxpool checks a connection idle for more than a second before
	// handing it out: the sessions the crash ended are then replaced.
	time.Sleep(1100 * time.Millisecond)
	w.pool.Reset()

	var v int64
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT amount FROM fact WHERE id = 3`).Scan(&v))
	require.EqualValues(t, 3, v, "the transaction in flight at the crash rolled back")
	runAll(incremental.RefreshIncremental, 1)
	w.exec(`UPDATE fact SET cust = 7 WHERE id IN (4, 5)`)
	w.exec(`DELETE FROM fact WHERE id = 6`)
	runAll(incremental.RefreshIncremental, 4)
	runAll(incremental.RefreshIncremental, 0)
}
