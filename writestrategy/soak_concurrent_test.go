package writestrategy_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// soakConcurrentRounds sizes TestSoakConcurrentMerges.
var soakConcurrentRounds = flag.Int("soak.concurrent.rounds", 3, "rounds of TestSoakConcurrentMerges")

// sharedFacade is a facade of its own (own SQL catalog connection) on the
// database at url and the warehouse wh: what a second process sees.
func sharedFacade(t *testing.T, url, wh string) *facade.Facade {
	t.Helper()
	cat, err := facade.OpenSQLCatalog(context.Background(), facade.CatalogConfig{DatabaseURL: url, Warehouse: wh})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cat.Close() })
	f, err := facade.New(cat, nil)
	require.NoError(t, err)
	return f
}

// writeRetrying writes s with d until it is not refused as busy (at most
// ten tries), and returns the result and the busy refusals met. It may
// run on any goroutine.
func writeRetrying(d *writestrategy.Dispatcher, s writestrategy.WriteStrategy) (writestrategy.WriteResult, int, error) {
	busy := 0
	for range 10 {
		res, err := d.Write(context.Background(), writestrategy.Request{WriterID: writer, Strategy: s})
		if errors.Is(err, ledger.ErrBusy) {
			busy++
			continue
		}
		if err != nil {
			return writestrategy.WriteResult{}, busy, err
		}
		return res[0], busy, nil
	}
	return writestrategy.WriteResult{}, busy, fmt.Errorf("still busy after %d tries", busy)
}

// Two writers (two Dispatchers, each with its own pool, ledger, catalog
// connection and facade, on the same database and warehouse) merging the
// same snapshot_replace dataset at once. In a free race both writes land
// one after the other (the second waits for the first's intent): one
// merges the changes, the other finds nothing changed. When the first
// holds the dataset longer than the second's ledger wait, the second gets
// an error matching ledger.ErrBusy naming the holder, and its retry, once the holder
// committed, converges. After every round the table holds a full
// rebuild's rows, each key once, and no intent stays open.
func TestSoakConcurrentMerges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, wh := pgtest.URL(t), t.TempDir()
	a := newWorldOn(t, url, sharedFacade(t, url, wh), nil, nil, nil)
	poolB, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(poolB.Close)
	b := wireWorld(t, poolB, sharedFacade(t, url, wh), nil, &ledger.Config{WaitTimeout: time.Second})
	src := newMergeSource(t, a.pool, 800)
	ensureOutputs(t, a.pool, "sr")
	a.iceberg("sr")
	b.resolver.Invalidate()
	a.mustWrite(mergeDeploy("sr"))

	check := func(msg string) {
		t.Helper()
		count := sourceCount(t, a)
		require.Equal(t, soakSourceRows(a, mergeSchema), soakDatasetRows(a, mergeSchema, "sr"), msg)
		require.Len(t, rowIdentities(t, a.lake, "sr"), int(count), "%s: each key once", msg)
		verifyReplace(t, a, "sr", msg)
		verifyReplace(t, b, "sr", msg)
		require.Zero(t, a.openIntents("sr"), msg)
		ds, err := a.ledger.Dataset(ctx, "sr")
		require.NoError(t, err)
		require.Equal(t, count, ds.RowCount, msg)
	}
	for r := range *soakConcurrentRounds {
		// A free race.
		msg := fmt.Sprintf("round %d, free race", r)
		prev := sourceCount(t, a)
		src.change(10, 6, 4)
		count := sourceCount(t, a)
		var wg sync.WaitGroup
		results := make([]writestrategy.WriteResult, 2)
		errs := make([]error, 2)
		for i, w := range []*world{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], _, errs[i] = writeRetrying(w.d, mergeDeploy("sr"))
			}()
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...), msg)
		preserved := []int64{results[0].Preserved, results[1].Preserved}
		slices.Sort(preserved)
		require.Equal(t, []int64{prev - 14, count}, preserved, "%s: one merges the changes, the other finds none", msg)
		for _, res := range results {
			require.Equal(t, count, res.Rows, msg)
		}
		check(msg)

		// The first writer holds the dataset (paused mid-stream) past the
		// second's wait.
		msg = fmt.Sprintf("round %d, held", r)
		src.change(8, 4, 3)
		count = sourceCount(t, a)
		obs := newPauseAt("sr", "", true)
		dA, err := writestrategy.NewDispatcher(a.pool, &writestrategy.DispatchConfig{Ledger: a.ledger, Resolver: a.resolver,
			Lakehouse: a.lake, Workspace: "test", Observer: obs})
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			_, err := dA.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: mergeDeploy("sr")})
			done <- err
		}()
		select {
		case <-obs.reached:
		case err := <-done:
			t.Fatalf("%s: the first writer ended before its pause: %v", msg, err)
		}
		held := openIntent(t, a, "sr")
		_, err = b.write(mergeDeploy("sr"))
		require.ErrorIs(t, err, ledger.ErrBusy, msg)
		require.ErrorContains(t, err, held.ID, msg)
		close(obs.resume)
		require.NoError(t, <-done, msg)
		before := rowIdentities(t, a.lake, "sr")
		res, busy, err := writeRetrying(b.d, mergeDeploy("sr"))
		require.NoError(t, err, msg)
		require.Zero(t, busy, "%s: the holder committed", msg)
		require.Equal(t, count, res.Rows, msg)
		require.Equal(t, count, res.Preserved, "%s: nothing changed since the holder's merge", msg)
		require.Equal(t, count, keptIdentities(before, rowIdentities(t, a.lake, "sr")), msg)
		check(msg)
	}
}
