package incremental_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
)

func TestDeltaPredicate(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 7, 4, 0, 0, 0, 0, time.UTC)
	w := incremental.Window{Low: t0, High: t0.Add(time.Hour)}
	p, err := incremental.DeltaPredicate(w, 3, "t", "__created_at")
	require.NoError(t, err)
	assert.Equal(t, `("t"."__created_at" > $3 AND "t"."__created_at" <= $4)`, p.SQL)
	assert.Equal(t, []any{w.Low, w.High}, p.Args)

	_, err = incremental.DeltaPredicate(incremental.Window{High: t0}, 1, "c")
	require.ErrorIs(t, err, incremental.ErrNoDelta)
	_, err = incremental.DeltaPredicate(w, 0, "c")
	require.ErrorIs(t, err, incremental.ErrInvalidArgument)
	_, err = incremental.DeltaPredicate(w, 1)
	require.ErrorIs(t, err, incremental.ErrInvalidArgument)
	_, err = incremental.DeltaPredicate(w, 1, "t", "\x00")
	require.ErrorIs(t, err, incremental.ErrInvalidArgument)

	p, err = incremental.TxnPredicate([]ledger.Txn{{ID: "a"}, {ID: "b"}}, 2, "txn_id")
	require.NoError(t, err)
	assert.Equal(t, `"txn_id" = ANY($2::pg_catalog.uuid[])`, p.SQL)
	assert.Equal(t, []any{[]string{"a", "b"}}, p.Args)
}

// Hostile column names stay identifiers and values stay parameters: the
// predicates run on Postgres and select exactly the rows in the window.
func TestPredicatesOnPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	t0 := time.Date(2026, 7, 4, 0, 0, 0, 0, time.UTC)
	w := incremental.Window{Low: t0, High: t0.Add(2 * time.Second)}
	for _, col := range []string{"__created_at", `x"; DROP TABLE lakewrite.datasets; --`, "Ünï cödé", "$1", "a'b"} {
		p, err := incremental.DeltaPredicate(w, 1, "t", col)
		require.NoError(t, err)
		rows, err := pool.Query(ctx, `SELECT n FROM (SELECT n, $3::timestamptz + n * interval '1 second' AS `+
			pgx.Identifier{col}.Sanitize()+` FROM generate_series(0, 4) n) t WHERE `+p.SQL+` ORDER BY n`, append(p.Args, t0)...)
		require.NoError(t, err, col)
		var got []int
		for rows.Next() {
			var n int
			require.NoError(t, rows.Scan(&n))
			got = append(got, n)
		}
		require.NoError(t, rows.Err())
		assert.Equal(t, []int{1, 2}, got, "(t0, t0+2s] holds n = 1, 2 (column %q)", col)
	}
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.datasets`).Scan(&n), "the table survived")

	ids := []ledger.Txn{{ID: ledger.NewID()}, {ID: ledger.NewID()}}
	p, err := incremental.TxnPredicate(ids, 1, "id")
	require.NoError(t, err)
	var c int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM (VALUES ($2::uuid), ($3::uuid), (gen_random_uuid())) v(id) WHERE `+p.SQL,
		p.Args[0], ids[0].ID, ids[1].ID).Scan(&c))
	assert.Equal(t, 2, c)

	// The same on a session whose temporary table named uuid shadows the
	// type's bare name.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `CREATE TEMP TABLE uuid (x int) ON COMMIT DROP`)
	require.NoError(t, err)
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM (VALUES ($2::pg_catalog.uuid), ($3::pg_catalog.uuid),
		(pg_catalog.gen_random_uuid())) v(id) WHERE `+p.SQL, p.Args[0], ids[0].ID, ids[1].ID).Scan(&c))
	assert.Equal(t, 2, c)
}
