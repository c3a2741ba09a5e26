package ledger_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/ledger"
)

// A writer waiting for a dataset gets it in turn, even while two others
// keep it busy with intents that each end and reopen at once (the pattern
// of a write followed by its shadow write, or of writers in a loop): it is
// never starved past its wait. Then the queue is left: the others open
// again.
func TestOpenWaitsInTurn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, pool := newLedger(t, nil)
	ensure(t, l, "hot")
	warm(t, pool, 4)

	var stop atomic.Bool
	var opened [2]atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				// NoWait: retried at once, so the dataset is free only for
				// the moment between one intent and the next.
				p := params("hot")
				p.NoWait = true
				in, err := l.Open(ctx, p)
				if errors.Is(err, ledger.ErrBusy) {
					time.Sleep(time.Millisecond)
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				opened[i].Add(1)
				time.Sleep(30 * time.Millisecond)
				if err := l.Commit(ctx, in, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	total := func() int64 { return opened[0].Load() + opened[1].Load() }
	waitOpened := func(n int64) {
		t.Helper()
		for total() < n {
			select {
			case err := <-errs:
				t.Fatal(err)
			default:
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitOpened(4)
	// Polling, this writer would look at the dataset about ten times in
	// its wait and find it busy each time but by chance.
	waiter, err := ledger.New(pool, &ledger.Config{WaitTimeout: 5 * time.Second})
	require.NoError(t, err)
	for range 3 {
		in, err := waiter.Open(ctx, params("hot"))
		require.NoError(t, err, "starved")
		require.NoError(t, waiter.Commit(ctx, in, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}))
		waitOpened(total() + 2) // the queue is left: the others take the dataset again
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	noLeak(t, pool)
}
