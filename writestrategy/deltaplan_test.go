package writestrategy_test

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// appendNewTargetRows sizes TestDeltaAppendNewOverLargeTarget's target.
var appendNewTargetRows = flag.Int64("appendnew.target", 20000, "target rows of TestDeltaAppendNewOverLargeTarget")

// An append_new in delta mode over a target much larger than the window
// on the row store: it writes exactly the window's new keys (by a
// multi-column key holding NULLs and numbers, which compare by value:
// 1.50 is 1.5, NULL is NULL), the first of keys repeated in the window,
// and the statement is planned as a full join, read once, never as a
// nested-loop anti-join over the target (a plan over a source estimated
// at one row), reading only the target's key columns; the snapshot read
// plans the same.
func TestDeltaAppendNewOverLargeTarget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, _ := newDeltaWorld(t)
	ensureOutputs(t, w.pool, "src", "out")
	appendNew := writestrategy.Deploy{Mode: writestrategy.KindAppendNew, Source: "src", Target: "out", Key: []string{"k1", "k2"}}
	n := *appendNewTargetRows
	load := func(sql string, args ...any) writestrategy.WriteResult {
		t.Helper()
		res, err := w.d.Load(ctx, writestrategy.LoadRequest{WriterID: writer, DatasetID: "src", Mode: facade.Append, SQL: sql, Args: args})
		require.NoError(t, err)
		require.Equal(t, sink.Postgres, res.Sink)
		return res
	}
	// Keys (g/2 with one decimal, 'x'g or NULL when g is a multiple of
	// 3), plus (NULL, NULL).
	load(`SELECT round(g / 2.0, 1) AS k1, CASE WHEN g % 3 = 0 THEN NULL ELSE 'x' || g END AS k2, 'seed ' || g AS v
		FROM generate_series(1, $1::bigint) g UNION ALL SELECT NULL::numeric, NULL::text, 'seed null'`, n)
	res := w.mustWrite(appendNew)[0]
	require.EqualValues(t, n+1, res.Rows)
	_, err := w.pool.Exec(ctx, `ANALYZE lakewrite.dataset_rows`)
	require.NoError(t, err)

	win := load(`SELECT k1, k2, v FROM (VALUES
		(1.50, NULL, 'old: 1.5 and NULL'),
		(2.00, 'x4', 'old: 2.0 and x4'),
		(NULL, NULL, 'old: NULL and NULL'),
		(NULL, 'new', 'new: NULL and new'),
		(2.5, 'other', 'new: 2.5 and other'),
		($1::numeric + 0.25, NULL, 'new: first'),
		($1::numeric + 0.250, NULL, 'new: repeated'),
		(1.5, 'x3', 'new: x3 is NULL in the target')) AS v(k1, k2, v)`, n)

	delta := map[string][]string{"src": {win.TxnID}}
	for _, d := range []map[string][]string{delta, nil} {
		name := map[bool]string{true: "delta", false: "snapshot"}[d != nil]
		require.NoError(t, pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
			sql, args, err := writestrategy.PostgresSQL(ctx, tx, appendNew, d)
			require.NoError(t, err)
			require.Equal(t, d != nil, strings.Contains(sql, "txn_id = ANY"), "%s read", name)
			require.Equal(t, 1, strings.Count(sql, `"v" text`), "the target is read for its keys only: %s", sql)
			rows, err := tx.Query(ctx, "EXPLAIN "+sql, args...)
			require.NoError(t, err)
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			plan := strings.Join(lines, "\n")
			require.Contains(t, plan, "Full Join", "%s plan:\n%s", name, plan)
			require.NotContains(t, plan, "Anti Join", "%s plan:\n%s", name, plan)
			return nil
		}))
	}

	got := w.deltaWrite(appendNew, "src", delta["src"])
	require.EqualValues(t, 4, got.Rows)
	require.EqualValues(t, 4, got.Skipped)
	rows, err := w.pool.Query(ctx, `SELECT coalesce(data->>'k1', 'NULL') || ' ' || coalesce(data->>'k2', 'NULL') || ' ' || (data->>'v')
		FROM lakewrite.dataset_rows WHERE dataset_id = 'out' AND txn_id = $1::uuid ORDER BY row_index`, got.TxnID)
	require.NoError(t, err)
	written, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{
		"NULL new new: NULL and new",
		"2.5 other new: 2.5 and other",
		fmt.Sprintf("%d.25 NULL new: first", n),
		"1.5 x3 new: x3 is NULL in the target",
	}, written)
	var total int64
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.dataset_rows WHERE dataset_id = 'out'`).Scan(&total))
	require.EqualValues(t, n+1+4, total)
}
