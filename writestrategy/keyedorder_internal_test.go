package writestrategy

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/internal/refresh"
)

// A refresh's keyed read of a relation carries no row order: the
// Transform's ORDER BY "__ord" over it sorts nothing, and the scan hands up
// only the columns the query uses (no window numbers the rows).
func TestKeyedRelationUnordered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `CREATE TEMP TABLE keyed_src (id bigint PRIMARY KEY, g bigint NOT NULL, name text, amount numeric(12,2));
		INSERT INTO keyed_src SELECT s, s % 500, 'n' || s, s FROM generate_series(1, 20000) s;
		CREATE INDEX ON keyed_src (g); ANALYZE keyed_src`)
	require.NoError(t, err)
	sc := Schema{Columns: []Column{{Name: "id", Type: "bigint"}, {Name: "g", Type: "bigint"}, {Name: "name", Type: "text"}, {Name: "amount", Type: "numeric(12,2)"}}}
	src := keyedRelation(&relation{datasetID: "src", schema: sc, scanOrder: true}, "keyed_src", "r.g = ANY ("+refresh.ParamKeys(keysParam, "bigint")+")", "{3,7,11}")
	ps, err := Transform{Source: "src", Output: "out", Steps: []Step{{Name: "agg", SQL: `SELECT g, count(*) AS n, sum(amount) AS total FROM source GROUP BY g`}}}.
		plan(&planContext{sources: map[string]*relation{"src": src}})
	require.NoError(t, err)
	var n int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM (`+ps[0].sql+`) x`, ps[0].args...).Scan(&n))
	require.Equal(t, 3, n)
	rows, err := tx.Query(ctx, `EXPLAIN (VERBOSE) `+ps[0].sql, ps[0].args...)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	plan := strings.Join(lines, "\n")
	require.NotContains(t, plan, "WindowAgg", plan)
	require.NotContains(t, plan, "__ord", plan)
	require.NotContains(t, plan, "r.name", plan) // the unused column is not read up
}
