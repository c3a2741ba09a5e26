package writestrategy_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/writestrategy"

	"github.com/lakewrite/lakewrite/facade"
)

// TestMain gives the Examples a database in DATABASE_URL. A child process
// of a crash or kill test uses its parent's database and starts no server.
func TestMain(m *testing.M) {
	if os.Getenv(envCrashURL) != "" || os.Getenv(envTxKillURL) != "" {
		pgtest.Main(m)
		return
	}
	pgtest.MainWithDatabase(m, "DATABASE_URL")
}

var ordersSchema = writestrategy.Schema{Columns: []writestrategy.Column{
	{Name: "id", Type: "bigint"},
	{Name: "name", Type: "text"},
	{Name: "amount", Type: "numeric(12,2)"},
	{Name: "category", Type: "text"},
	{Name: "ts", Type: "timestamp with time zone"},
}}

// seedRowStore registers dataset id in the row store with rows produced by
// selectSQL (whose columns match schema), written with RowStoreInsert.
func seedRowStore(t *testing.T, pool *pgxpool.Pool, id string, schema writestrategy.Schema, selectSQL string, args ...any) {
	t.Helper()
	seed(t, pool, id, schema, func(tx pgx.Tx, txn string) int64 {
		n, _, err := writestrategy.RowStoreInsert(context.Background(), tx, nil, id, txn, selectSQL, args...)
		require.NoError(t, err)
		return n
	})
}

// seedOldRowStore is seedRowStore in the encoding of earlier versions:
// to_jsonb of each row, without the marker.
func seedOldRowStore(t *testing.T, pool *pgxpool.Pool, id string, schema writestrategy.Schema, selectSQL string, args ...any) {
	t.Helper()
	seed(t, pool, id, schema, func(tx pgx.Tx, txn string) int64 {
		tag, err := tx.Exec(context.Background(), `INSERT INTO lakewrite.dataset_rows (dataset_id, row_index, data, txn_id)
			SELECT '`+id+`', row_number() OVER () - 1, to_jsonb(x.*), '`+txn+`' FROM (`+selectSQL+`) x`, args...)
		require.NoError(t, err)
		return tag.RowsAffected()
	})
}

func seed(t *testing.T, pool *pgxpool.Pool, id string, schema writestrategy.Schema, insert func(tx pgx.Tx, txn string) int64) {
	t.Helper()
	ctx := context.Background()
	l, err := ledger.New(pool, nil)
	require.NoError(t, err)
	_, err = l.EnsureDataset(ctx, id, id, nil)
	require.NoError(t, err)
	in, err := l.Open(ctx, ledger.OpenParams{DatasetID: id, WriterID: "seed", Sink: "pg", WriteMode: facade.Replace})
	require.NoError(t, err)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, `DELETE FROM lakewrite.dataset_rows WHERE dataset_id = $1`, id)
	require.NoError(t, err)
	n := insert(tx, in.ID)
	require.NoError(t, l.CommitTx(ctx, tx, in, ledger.Outcome{RowCount: n, CommittedAt: timeNow(t, tx), Schema: schema.JSON()}))
	require.NoError(t, tx.Commit(ctx))
}

func timeNow(t *testing.T, tx pgx.Tx) (now time.Time) {
	t.Helper()
	require.NoError(t, tx.QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&now))
	return now
}

const ordersSQL = `SELECT g::bigint AS id, 'name ' || (g % 7) AS name, (g * 1.25)::numeric(12,2) AS amount,
	(ARRAY['a','b','c'])[1 + g % 3] AS category, timestamptz '2026-01-01 00:00:00+00' + g * interval '1 minute' AS ts
	FROM generate_series(1, $1::int) g`

func ensureOutputs(t *testing.T, pool *pgxpool.Pool, ids ...string) {
	t.Helper()
	l, err := ledger.New(pool, nil)
	require.NoError(t, err)
	for _, id := range ids {
		_, err := l.EnsureDataset(context.Background(), id, id, nil)
		require.NoError(t, err)
	}
}

// rowStoreRows returns the rows of a row-store dataset as sorted JSON texts
// (without the encoding's marker key).
func rowStoreRows(t *testing.T, pool *pgxpool.Pool, id string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT (data - '')::text FROM lakewrite.dataset_rows WHERE dataset_id = $1`, id)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	sort.Strings(out)
	return out
}

func rowIndexes(t *testing.T, pool *pgxpool.Pool, id string) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT row_index FROM lakewrite.dataset_rows WHERE dataset_id = $1 ORDER BY row_index`, id)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	var parts []string
	for _, v := range out {
		parts = append(parts, fmt.Sprint(v))
	}
	return strings.Join(parts, ",")
}
