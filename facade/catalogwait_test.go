package facade_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/internal/contract"
	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// Stage on the catalog of NewPostgresCatalog whose pool has no free connection (the
// caller holds them all, as writes holding their intents' sessions do)
// does not wait as long as the caller's context: its load of the table
// fails within Config.CatalogWait with ErrCatalogTimeout, having written
// nothing. Once a connection is free the same write stages. WriteOrder,
// Scan and FindTxn load the table within the same bound.
func TestStageCatalogWaitBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	require.NoError(t, err)
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	cat, err := facade.NewPostgresCatalog(ctx, pool, facade.CatalogConfig{Warehouse: t.TempDir()})
	require.NoError(t, err)
	f, err := facade.New(cat, &facade.Config{CatalogWait: 200 * time.Millisecond})
	require.NoError(t, err)
	mem := memory.NewGoAllocator()
	sc := contract.Schema()
	bs := contract.Batches(mem, sc, 0, 10, 10, 10)
	t.Cleanup(func() {
		for _, b := range bs {
			b.Release()
		}
	})
	req := facade.WriteRequest{Mode: facade.Replace, Schema: sc, Rows: contract.Seq(bs)}
	target := facade.Target{DatasetID: "waits", WriterID: "w"}

	held, err := pool.Acquire(ctx)
	require.NoError(t, err)
	released := false
	t.Cleanup(func() { // a failed assertion must not leave pool.Close waiting
		if !released {
			held.Release()
		}
	})
	// A bound on the test itself, far above CatalogWait: without the
	// bound Stage waits for this context.
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = f.Stage(sctx, target, req)
	require.ErrorIs(t, err, facade.ErrCatalogTimeout)
	require.NoError(t, sctx.Err(), "Stage returned before the caller's context ended")
	held.Release()
	released = true

	_, err = f.LoadTable(ctx, "waits")
	require.ErrorIs(t, err, facade.ErrTableNotFound, "nothing was created")
	st, err := f.Stage(ctx, target, req)
	require.NoError(t, err)
	res, err := st.Commit(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 10, res.Rows)

	// The other loads a write makes while it may hold connections of the
	// pool (WriteOrder, a native source's Scan, the Lookup's FindTxn) are
	// bounded the same way.
	held, err = pool.Acquire(ctx)
	require.NoError(t, err)
	released = false
	_, err = f.WriteOrder(sctx, "waits")
	require.ErrorIs(t, err, facade.ErrCatalogTimeout)
	_, _, err = f.FindTxn(sctx, "waits", "some-txn")
	require.ErrorIs(t, err, facade.ErrCatalogTimeout)
	var scanErr error
	for _, err := range f.Scan(sctx, "waits", facade.ScanOptions{}) {
		scanErr = err
	}
	require.ErrorIs(t, scanErr, facade.ErrCatalogTimeout)
	require.NoError(t, sctx.Err(), "the loads returned before the caller's context ended")
	held.Release()
	released = true
	keys, err := f.WriteOrder(ctx, "waits")
	require.NoError(t, err)
	require.Empty(t, keys)
}
