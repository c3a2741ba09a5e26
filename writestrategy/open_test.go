package writestrategy_test

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/writestrategy"
)

func TestOpenRefusesBadConfig(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	require.NoError(t, err)
	defer pool.Close()
	wh := t.TempDir()

	_, err = writestrategy.Open(ctx, pool, nil)
	require.ErrorContains(t, err, "Warehouse is required")
	_, err = writestrategy.Open(ctx, nil, &writestrategy.OpenConfig{Warehouse: wh})
	require.ErrorContains(t, err, "nil pool")
	_, err = writestrategy.Open(ctx, pool, &writestrategy.OpenConfig{Warehouse: wh, Catalog: &facade.CatalogConfig{Warehouse: wh + "/other"}})
	require.ErrorContains(t, err, "differs")
	_, err = writestrategy.Open(ctx, pool, &writestrategy.OpenConfig{Warehouse: wh, Catalog: &facade.CatalogConfig{DatabaseURL: os.Getenv("DATABASE_URL")}})
	require.ErrorContains(t, err, "DatabaseURL must be empty")
	l, err := ledger.New(pool, nil)
	require.NoError(t, err)
	_, err = writestrategy.Open(ctx, pool, &writestrategy.OpenConfig{Warehouse: wh, Dispatch: &writestrategy.DispatchConfig{Ledger: l}})
	require.ErrorContains(t, err, "set by Open")
}

func TestOpenLeavesConfigsAlone(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	require.NoError(t, err)
	defer pool.Close()
	lc, fc, dc := &ledger.Config{}, &facade.Config{}, &writestrategy.DispatchConfig{Workspace: "w"}
	st, err := writestrategy.Open(ctx, pool, &writestrategy.OpenConfig{
		Warehouse: t.TempDir(), Migrate: true, Logger: slog.New(slog.DiscardHandler),
		Ledger: lc, Facade: fc, Dispatch: dc, Catalog: &facade.CatalogConfig{Name: "open_test"}})
	require.NoError(t, err)
	require.NotNil(t, st.Ledger)
	require.NotNil(t, st.Flags)
	require.NotNil(t, st.Resolver)
	require.NotNil(t, st.Catalog)
	require.NotNil(t, st.Facade)
	require.NotNil(t, st.Dispatcher)
	require.Nil(t, lc.Logger)
	require.Nil(t, fc.Logger)
	require.Nil(t, dc.Ledger)
	require.Nil(t, dc.Logger)
}
