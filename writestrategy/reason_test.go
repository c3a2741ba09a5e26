package writestrategy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// slowStage is a Lakehouse whose Stage, once it has read every row, takes
// a while before returning (a slow encode or upload): the write's compute
// transaction stays open and idle meanwhile.
type slowStage struct {
	facade.Lakehouse
	pause time.Duration
}

func (s slowStage) Stage(ctx context.Context, t facade.Target, req facade.WriteRequest) (facade.Staged, error) {
	st, err := s.Lakehouse.Stage(ctx, t, req)
	if err == nil {
		time.Sleep(s.pause)
	}
	return st, err
}

// A session timeout of the server that ends a write names itself in the
// write's error: idle_in_transaction_session_timeout, which closes the
// compute transaction's session while the client is still staging (the
// server's message is lost with the connection: inferred from the
// settings), and statement_timeout (the server's own message).
func TestDispatchErrorNamesServerTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = "300ms"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	cat, err := facade.OpenSQLCatalog(ctx, facade.CatalogConfig{DatabaseURL: url, Warehouse: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cat.Close() })
	f, err := facade.New(cat, nil)
	require.NoError(t, err)
	w := wireWorld(t, pool, slowStage{Lakehouse: f, pause: 1500 * time.Millisecond}, nil, nil)
	seedWorld(t, w, 10)
	ensureOutputs(t, w.pool, "slow")
	w.iceberg("slow")

	_, err = w.write(writestrategy.Transform{Output: "slow", Source: "orders"})
	require.ErrorIs(t, err, writestrategy.ErrServerTimeout)
	require.Contains(t, err.Error(), "the server closed the session", "inferred")
	require.Contains(t, err.Error(), "idle_in_transaction_session_timeout (300ms)")
	require.Contains(t, err.Error(), "SQLSTATE 25P03")
	var open int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE status = 'open'`).Scan(&open))
	require.Zero(t, open, "the write's intent was aborted")

	// statement_timeout: the server's message names it.
	_, err = w.pool.Exec(ctx, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET statement_timeout = %L', current_database(), '200ms'); END $$`)
	require.NoError(t, err)
	w.pool.Reset() // new sessions take the role's setting
	_, err = w.write(writestrategy.Transform{Output: "slow", Source: "orders", Steps: []writestrategy.Step{{Name: "s", SQL: "SELECT * FROM source WHERE (SELECT true FROM pg_sleep(1))"}}})
	require.ErrorIs(t, err, writestrategy.ErrServerTimeout)
	require.NotContains(t, err.Error(), "the server closed the session", "named by the server's message")
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr))
	require.Equal(t, "57014", pgErr.Code)
	require.Contains(t, err.Error(), "the server's statement_timeout ended the write")
	require.Contains(t, err.Error(), "SQLSTATE 57014")
}
