package writestrategy_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/writestrategy"
)

func apply(t *testing.T, pool *pgxpool.Pool, s writestrategy.WriteStrategy) ([]writestrategy.WriteResult, error) {
	t.Helper()
	var res []writestrategy.WriteResult
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		var err error
		res, err = writestrategy.Apply(context.Background(), tx, &writestrategy.Env{}, s)
		return err
	})
	return res, err
}

func TestApplyTransform(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	seedRowStore(t, pool, "orders", ordersSchema, ordersSQL, 100)
	ensureOutputs(t, pool, "by_category")
	s := writestrategy.Transform{Output: "by_category", Source: "orders", Args: []any{10}, Steps: []writestrategy.Step{
		{Name: "big", SQL: `SELECT * FROM source WHERE amount > $1`},
		{Name: "agg", SQL: `SELECT category, count(*) AS n, sum(amount) AS total FROM big GROUP BY category ORDER BY category`},
	}}
	res, err := apply(t, pool, s)
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Equal(t, int64(3), res[0].Rows)
	require.Equal(t, []writestrategy.Column{{Name: "category", Type: "text"}, {Name: "n", Type: "bigint"}, {Name: "total", Type: "numeric"}}, writestrategy.ResultColumns(res[0]).Columns)
	require.Equal(t, []string{
		`{"n": 30, "total": 2043.75, "category": "c"}`, // 92 rows with amount > 10
		`{"n": 31, "total": 2092.50, "category": "a"}`,
		`{"n": 31, "total": 2131.25, "category": "b"}`,
	}, rowStoreRows(t, pool, "by_category"))
	require.Equal(t, "0,1,2", rowIndexes(t, pool, "by_category"))
	// A replace again: same contents.
	_, err = apply(t, pool, s)
	require.NoError(t, err)
	require.Equal(t, "0,1,2", rowIndexes(t, pool, "by_category"))
}

func TestApplyJoinAndPreflight(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	seedRowStore(t, pool, "orders", ordersSchema, ordersSQL, 20)
	cats := writestrategy.Schema{Columns: []writestrategy.Column{{Name: "code", Type: "text"}, {Name: "label", Type: "text"}}}
	seedRowStore(t, pool, "cats", cats, `SELECT * FROM (VALUES ('a', 'Apples'), ('b', 'Bananas')) v(code, label)`)
	ensureOutputs(t, pool, "joined", "crossed")
	res, err := apply(t, pool, writestrategy.Join{Output: "joined", Left: "orders", Right: "cats", Type: writestrategy.LeftJoin,
		On:      []writestrategy.JoinOn{{Left: "category", Right: "code"}},
		Columns: []writestrategy.JoinColumn{{Side: "left", Name: "id"}, {Side: "right", Name: "label", As: "category_label"}}})
	require.NoError(t, err)
	require.Equal(t, int64(20), res[0].Rows)
	rows := rowStoreRows(t, pool, "joined")
	require.Contains(t, rows, `{"id": 3, "category_label": "Apples"}`)
	require.Contains(t, rows, `{"id": 2, "category_label": null}`)

	// Cross join: 20 x 2 = 40 rows estimated from the recorded row counts.
	cross := writestrategy.Join{Output: "crossed", Left: "orders", Right: "cats", Type: writestrategy.CrossJoin,
		Columns: []writestrategy.JoinColumn{{Side: "left", Name: "id"}, {Side: "right", Name: "code"}}}
	err = pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		_, err := writestrategy.Apply(context.Background(), tx, writestrategy.EnvWithMaxCrossJoin(39), cross)
		return err
	})
	require.ErrorIs(t, err, writestrategy.ErrCrossJoinTooLarge)
	require.ErrorIs(t, err, writestrategy.ErrInvalid)
	require.Contains(t, err.Error(), `"orders" (20 rows) and "cats" (2 rows) would produce about 40 rows, above the limit of 39`)
	require.Empty(t, rowStoreRows(t, pool, "crossed"))
	res, err = apply(t, pool, cross)
	require.NoError(t, err)
	require.Equal(t, int64(40), res[0].Rows)
}

func TestApplySplit(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	seedRowStore(t, pool, "orders", ordersSchema, ordersSQL, 30)
	ensureOutputs(t, pool, "big", "small")
	res, err := apply(t, pool, writestrategy.Split{Source: "orders", Predicate: "amount >= $1", Args: []any{20}, Matched: "big", Unmatched: "small"})
	require.NoError(t, err)
	require.Equal(t, "big", res[0].DatasetID)
	require.Equal(t, int64(15), res[0].Rows) // 16..30 -> amount >= 20
	require.Equal(t, int64(15), res[1].Rows)
	require.Len(t, rowStoreRows(t, pool, "big"), 15)
	require.Equal(t, "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14", rowIndexes(t, pool, "small"))
}

func TestApplyDeploys(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	kv := writestrategy.Schema{Columns: []writestrategy.Column{{Name: "k", Type: "integer"}, {Name: "v", Type: "text"}}}
	seedRowStore(t, pool, "src", kv, `SELECT * FROM (VALUES (1, 'a'), (2, 'b'), (2, 'b2'), (3, NULL)) v(k, v)`)
	ensureOutputs(t, pool, "always", "new", "snap")

	// append_always: every source row, every time.
	always := writestrategy.Deploy{Mode: writestrategy.KindAppendAlways, Source: "src", Target: "always"}
	for i := 0; i < 2; i++ {
		res, err := apply(t, pool, always)
		require.NoError(t, err)
		require.Equal(t, int64(4), res[0].Rows)
	}
	require.Equal(t, "0,1,2,3,4,5,6,7", rowIndexes(t, pool, "always"))

	// append_new keyed by k: first run 3 rows (the second k=2 skipped),
	// second run nothing new.
	newOnly := writestrategy.Deploy{Mode: writestrategy.KindAppendNew, Source: "src", Target: "new", Key: []string{"k"}}
	res, err := apply(t, pool, newOnly)
	require.NoError(t, err)
	require.Equal(t, int64(3), res[0].Rows)
	require.Equal(t, int64(1), res[0].Skipped)
	// Only the first deploy registered the target's schema through the
	// dispatcher; set it here as the dispatcher would.
	setSchema(t, pool, "new", kv)
	res, err = apply(t, pool, newOnly)
	require.NoError(t, err)
	require.Equal(t, int64(0), res[0].Rows)
	require.Equal(t, int64(4), res[0].Skipped)

	// snapshot_replace keyed by k: dedup; then unchanged rows preserved.
	snap := writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "src", Target: "snap", Key: []string{"k"}}
	res, err = apply(t, pool, snap)
	require.NoError(t, err)
	require.Equal(t, int64(3), res[0].Rows)
	require.Equal(t, int64(1), res[0].Skipped)
	require.Equal(t, int64(0), res[0].Preserved)
	setSchema(t, pool, "snap", kv)
	require.Equal(t, "0,1,2", rowIndexes(t, pool, "snap"))
	// Change k=1 in the source.
	seedRowStore(t, pool, "src", kv, `SELECT * FROM (VALUES (1, 'changed'), (2, 'b'), (3, NULL)) v(k, v)`)
	res, err = apply(t, pool, snap)
	require.NoError(t, err)
	require.Equal(t, int64(3), res[0].Rows)
	require.Equal(t, int64(2), res[0].Preserved)
	require.Equal(t, int64(0), res[0].Skipped)
	require.Equal(t, "1,2,3", rowIndexes(t, pool, "snap"), "unchanged rows keep their row_index; the changed row is new")
	require.Equal(t, []string{`{"k": 1, "v": "changed"}`, `{"k": 2, "v": "b"}`, `{"k": 3, "v": null}`}, rowStoreRows(t, pool, "snap"))
}

func setSchema(t *testing.T, pool *pgxpool.Pool, id string, s writestrategy.Schema) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `UPDATE lakewrite.datasets SET schema = $2, sink = 'pg' WHERE id = $1`, id, string(s.JSON()))
	require.NoError(t, err)
}

func TestApplyErrors(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	seedRowStore(t, pool, "orders", ordersSchema, ordersSQL, 10)
	ensureOutputs(t, pool, "out")
	// A runtime error: nothing written.
	_, err := apply(t, pool, writestrategy.Transform{Output: "out", Source: "orders", Steps: []writestrategy.Step{
		{Name: "boom", SQL: `SELECT id / (id - 5) AS x FROM source`}}})
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "got %v", err)
	require.Equal(t, "22012", pgErr.Code)
	var qe *writestrategy.QueryError
	require.ErrorAs(t, err, &qe)
	require.Empty(t, rowStoreRows(t, pool, "out"))

	for name, s := range map[string]writestrategy.WriteStrategy{
		"unknown source":    writestrategy.Transform{Output: "out", Source: "nope"},
		"unknown output":    writestrategy.Transform{Output: "nope", Source: "orders"},
		"empty output":      writestrategy.Transform{Source: "orders"},
		"bad join type":     writestrategy.Join{Output: "out", Left: "orders", Right: "orders", Type: "sideways"},
		"join without on":   writestrategy.Join{Output: "out", Left: "orders", Right: "orders"},
		"bad key":           writestrategy.Deploy{Mode: writestrategy.KindAppendNew, Source: "orders", Target: "out", Key: []string{"nope"}},
		"bad deploy mode":   writestrategy.Deploy{Mode: "upsert", Source: "orders", Target: "out"},
		"split same":        writestrategy.Split{Source: "orders", Predicate: "true", Matched: "out", Unmatched: "out"},
		"reserved column":   writestrategy.Transform{Output: "out", Source: "orders", Steps: []writestrategy.Step{{Name: "s", SQL: `SELECT 1 AS __row_id`}}},
		"step named source": writestrategy.Transform{Output: "out", Source: "orders", Steps: []writestrategy.Step{{Name: "source", SQL: `SELECT 1`}}},
	} {
		_, err := apply(t, pool, s)
		require.Error(t, err, name)
		require.True(t, errors.Is(err, writestrategy.ErrInvalid) || errors.Is(err, ledger.ErrDatasetNotFound) ||
			errors.Is(err, writestrategy.ErrUnsafeIdentifier), "%s: %v", name, err)
	}
	require.Empty(t, rowStoreRows(t, pool, "out"))
}

// Hostile identifiers are quoted, never spliced: the data round-trips and
// nothing else happens.
// Columns named like the aliases of the generated SQL (o, x, s, t, ...)
// are stored as columns, not mistaken for the whole row, on every row-store
// path: replace, split, append and a preserving snapshot_replace.
func TestApplyAliasNamedColumns(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	cols := writestrategy.Schema{Columns: []writestrategy.Column{
		{Name: "o", Type: "integer"}, {Name: "x", Type: "text"}, {Name: "s", Type: "integer"}, {Name: "t", Type: "text"},
	}}
	seedRowStore(t, pool, "src", cols, `SELECT g AS o, 'v' || g AS x, g * 2 AS s, 'w' AS t FROM generate_series(1, 3) g`)
	ensureOutputs(t, pool, "rep", "m", "u", "app", "snap")
	want := []string{
		`{"o": 1, "s": 2, "t": "w", "x": "v1"}`,
		`{"o": 2, "s": 4, "t": "w", "x": "v2"}`,
		`{"o": 3, "s": 6, "t": "w", "x": "v3"}`,
	}
	for _, s := range []writestrategy.WriteStrategy{
		writestrategy.Transform{Output: "rep", Source: "src"},
		writestrategy.Split{Source: "src", Predicate: "o < 10", Matched: "m", Unmatched: "u"},
		writestrategy.Deploy{Mode: writestrategy.KindAppendAlways, Source: "src", Target: "app"},
		writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "src", Target: "snap", Key: []string{"o"}},
		writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "src", Target: "snap", Key: []string{"o"}}, // preserving
	} {
		_, err := apply(t, pool, s)
		require.NoError(t, err)
	}
	for _, id := range []string{"rep", "m", "app", "snap"} {
		require.Equal(t, want, rowStoreRows(t, pool, id), id)
	}
}

func TestApplyHostileIdentifiers(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	weird := writestrategy.Schema{Columns: []writestrategy.Column{
		{Name: `a"; DROP TABLE lakewrite.datasets; --`, Type: "integer"},
		{Name: "Mixed Case ü", Type: "text"},
	}}
	seedRowStore(t, pool, "src", weird, `SELECT 1 AS "a""; DROP TABLE lakewrite.datasets; --", 'x' AS "Mixed Case ü"`)
	ensureOutputs(t, pool, "out")
	res, err := apply(t, pool, writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "src", Target: "out",
		Key: []string{`a"; DROP TABLE lakewrite.datasets; --`}})
	require.NoError(t, err)
	require.Equal(t, int64(1), res[0].Rows)
	require.Equal(t, []string{`{"Mixed Case ü": "x", "a\"; DROP TABLE lakewrite.datasets; --": 1}`}, rowStoreRows(t, pool, "out"))

	bad := writestrategy.Schema{Columns: []writestrategy.Column{{Name: "x", Type: "int; DROP TABLE t"}}}
	_, err = writestrategy.ParseSchema(bad.JSON())
	require.ErrorIs(t, err, writestrategy.ErrUnsafeIdentifier)
	_, err = writestrategy.ParseSchema([]byte(`{"columns":[{"name":"` + string(make([]byte, 0)) + `","type":"int"}]}`))
	require.ErrorIs(t, err, writestrategy.ErrUnsafeIdentifier)
}
