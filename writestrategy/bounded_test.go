package writestrategy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
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

// Writers on a pool far too small for them (16 writers, 4 connections,
// the Iceberg catalog on the same pool) all return within their deadline
// plus the documented cleanup bound, with typed errors (the caller's
// deadline, ErrBusy, ErrNoConnection) or results, and leave no connection
// held and no intent open. With a short deadline (3 s) the caller's
// deadline ends the waits; with a long one (1 min) the library's own
// bounds do (ledger.Config.WaitTimeout, facade.Config.CatalogWait): no
// call waits for its deadline. LAKEWRITE_BOUNDED_ROUNDS sets the writes
// per writer (default 2).
func TestUndersizedPoolBounded(t *testing.T) {
	t.Parallel()
	t.Run("caller deadline", func(t *testing.T) {
		t.Parallel()
		undersizedPool(t, 3*time.Second, 0)
	})
	t.Run("library bounds", func(t *testing.T) {
		t.Parallel()
		undersizedPool(t, time.Minute, 300*time.Millisecond)
	})
}

// undersizedPool runs TestUndersizedPoolBounded's writers, each call with
// deadline, the facade with catalogWait (0: its default).
func undersizedPool(t *testing.T, deadline, catalogWait time.Duration) {
	ctx := context.Background()
	rounds := 2
	if s := os.Getenv("LAKEWRITE_BOUNDED_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		rounds = n
	}
	const writers, conns = 16, 4
	url := pgtest.URL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = conns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	warehouse := t.TempDir()
	cat, err := facade.NewPostgresCatalog(ctx, pool, facade.CatalogConfig{Warehouse: warehouse})
	require.NoError(t, err)
	f, err := facade.New(cat, &facade.Config{CatalogWait: catalogWait})
	require.NoError(t, err)
	w := wireWorld(t, pool, f, nil, &ledger.Config{WaitTimeout: time.Second})
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 2000)
	outs := make([]string, writers)
	for i := range outs {
		outs[i] = fmt.Sprintf("b%02d", i)
	}
	ensureOutputs(t, w.pool, outs...)
	w.iceberg(outs[:writers/2]...) // half on each sink

	type call struct {
		output string
		over   time.Duration
		err    error
	}
	var mu sync.Mutex
	var calls []call
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				cctx, cancel := context.WithTimeout(ctx, deadline)
				out := outs[(i+r)%writers]
				_, err := w.d.Write(cctx, writestrategy.Request{WriterID: writer,
					Strategy: writestrategy.Transform{Output: out, Source: "orders"}})
				dl, _ := cctx.Deadline()
				cancel()
				mu.Lock()
				calls = append(calls, call{output: out, over: time.Since(dl), err: err})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	worst := -deadline
	kinds := map[string]int{}
	var worstErr error
	for _, c := range calls {
		if c.over > worst {
			worst, worstErr = c.over, c.err
		}
		if c.over >= 0 && deadline >= time.Minute {
			t.Errorf("a call waited for its deadline: %v", c.err)
		}
		switch {
		case c.err == nil:
			kinds["ok"]++
		case errors.Is(c.err, ledger.ErrBusy):
			kinds["busy"]++
		case errors.Is(c.err, ledger.ErrNoConnection):
			kinds["no connection"]++
		case errors.Is(c.err, context.DeadlineExceeded):
			kinds["deadline"]++
		default:
			t.Errorf("untyped error: %v", c.err)
		}
	}
	t.Logf("%d calls: %v; latest return %s after its deadline (%v)", len(calls), kinds, worst.Round(time.Millisecond), worstErr)
	// The clean-up context ends CleanupBound after the deadline; the call
	// returns as soon as its clean-up step sees that.
	require.LessOrEqual(t, worst, writestrategy.CleanupBound+time.Second, "every call returns within its deadline plus the cleanup bound")
	// A broken connection leaves the pool's count once pgx has closed it.
	require.Eventually(t, func() bool { return pool.Stat().AcquiredConns() == 0 }, 10*time.Second, 10*time.Millisecond, "no connection held")
	// A failed call ended its own intents before returning, even one whose
	// held session the deadline broke (its abort runs on a connection in
	// that session's place): none is left open for reconciliation.
	var open []string
	rows, err := pool.Query(ctx, `SELECT id || ' ' || dataset_id FROM lakewrite.pipeline_build_transactions WHERE status = 'open'`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		open = append(open, s)
	}
	require.NoError(t, rows.Err())
	for _, o := range open {
		for _, c := range calls {
			if strings.HasSuffix(o, " "+c.output) {
				t.Logf("a call on %s: %v", c.output, c.err)
			}
		}
	}
	require.Empty(t, open, "no intent left open once every call returned")
	rep, err := w.ledger.Sweep(ctx, ledger.SweepParams{Lookup: w.d.Lookup})
	require.NoError(t, err)
	require.Empty(t, rep.Live)
	require.Empty(t, rep.Unresolved)
	require.Empty(t, rep.Aborted)
	require.Empty(t, rep.RolledForward)
}
