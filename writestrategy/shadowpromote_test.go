package writestrategy_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"

	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// Promotion and revert while two writers append (a Tier B strategy,
// append_new from a growing relation), a feeder grows the source and a
// reader reads the output wherever the ledger says it lives: the reader
// always finds it on a sink, its row count never goes down, and after the
// last write the output holds every source row exactly once; every write
// that returned success is committed in the ledger on its sink. No write and
// no Promote fails busy: the writers, their shadow writes and Promote wait
// for the dataset in turn, each for a few writes at most, far below the
// ledger's wait. A write may only fail with ErrSinkChanged (it raced a
// flip, wrote nothing, and is retried).
func TestPromoteRevertUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Two writers (an intent each, one waiting), the shadow's intent, the
	// reader, the feeder and Promote's intent and transaction.
	url := pgtest.URL(t)
	pc, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	pc.MaxConns = 12
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	cat, err := facade.OpenSQLCatalog(ctx, facade.CatalogConfig{DatabaseURL: url, Warehouse: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cat.Close() })
	f, err := facade.New(cat, nil)
	require.NoError(t, err)
	w := wireWorld(t, pool, f, nil, nil)
	_, err = w.pool.Exec(ctx, `CREATE TABLE public.src (id bigint PRIMARY KEY, v text NOT NULL);
		INSERT INTO public.src SELECT g, 'v' || g FROM generate_series(1, 10) g`)
	require.NoError(t, err)
	_, err = writestrategy.RegisterRelation(ctx, w.pool, nil, "src", "public.src")
	require.NoError(t, err)
	ensureOutputs(t, w.pool, "out")
	w.shadow("out")
	fast, err := sink.NewResolver(w.flags, &sink.ResolverConfig{TTL: 50 * time.Millisecond})
	require.NoError(t, err)
	d, err := writestrategy.NewDispatcher(w.pool, &writestrategy.DispatchConfig{Ledger: w.ledger, Resolver: fast, Lakehouse: w.lake, Workspace: "test"})
	require.NoError(t, err)
	appendNew := writestrategy.Deploy{Mode: writestrategy.KindAppendNew, Source: "src", Target: "out", Key: []string{"id"}}
	write := func() error {
		_, err := d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: appendNew})
		return err
	}
	require.NoError(t, write())

	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	var writes [2]atomic.Int64 // by sink: Postgres, Iceberg
	var raced atomic.Int64
	var longest atomic.Int64 // the longest Write, in nanoseconds (logged)
	var mu sync.Mutex
	committed := map[string]sink.Sink{} // the writes that succeeded, by transaction
	run := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if err := f(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	next := int64(10)
	run(func() error { // the feeder
		next++
		_, err := w.pool.Exec(ctx, `INSERT INTO public.src VALUES ($1, $2)`, next, "v"+strconv.FormatInt(next, 10))
		time.Sleep(2 * time.Millisecond)
		return err
	})
	for range 2 {
		run(func() error {
			began := time.Now()
			res, err := d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: appendNew})
			for took := int64(time.Since(began)); ; {
				if l := longest.Load(); took <= l || longest.CompareAndSwap(l, took) {
					break
				}
			}
			if errors.Is(err, writestrategy.ErrSinkChanged) {
				raced.Add(1) // raced a flip: nothing written, retried
				return nil
			}
			if err == nil {
				k := 0
				if res[0].Sink == sink.Iceberg {
					k = 1
				}
				writes[k].Add(1)
				mu.Lock()
				committed[res[0].TxnID] = res[0].Sink
				mu.Unlock()
			}
			return err
		})
	}
	var seen int64
	run(func() error { // the reader
		ds, err := w.ledger.Dataset(ctx, "out")
		if err != nil {
			return err
		}
		if ds.Sink != sink.Postgres && ds.Sink != sink.Iceberg {
			return errors.New("the output is on no sink: " + string(ds.Sink))
		}
		c, err := writestrategy.DatasetChecksum(ctx, d, "out")
		if err != nil {
			return err
		}
		if c.Rows < seen {
			return errors.New("the output lost rows")
		}
		seen = c.Rows
		return nil
	})
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for !cond() {
			select {
			case err := <-errs:
				stop.Store(true)
				wg.Wait()
				t.Fatalf("while waiting for %s: %v", what, err)
			default:
			}
			require.True(t, time.Now().Before(deadline), "waiting for %s", what)
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("matching shadow runs", func() bool {
		st, err := d.ShadowStatus(ctx, "out")
		require.NoError(t, err)
		return st.Matching >= 3
	})
	promotions := 0
	waitFor("a promotion", func() bool {
		err := d.Promote(ctx, writer, "out")
		if err != nil && !errors.Is(err, writestrategy.ErrNotPromoted) { // not promotable yet: retried
			require.NoError(t, err)
		}
		promotions++
		return err == nil
	})
	icebergWrites := writes[1].Load()
	waitFor("writes on Iceberg", func() bool { return writes[1].Load() >= icebergWrites+3 })
	_, err = w.flags.ClearOverride(ctx, writer, "out") // revert
	require.NoError(t, err)
	pgWrites := writes[0].Load()
	waitFor("writes on Postgres again", func() bool { return writes[0].Load() >= pgWrites+3 })
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	time.Sleep(60 * time.Millisecond) // past the resolver's TTL
	require.NoError(t, write())
	ds, err := w.ledger.Dataset(ctx, "out")
	require.NoError(t, err)
	require.Equal(t, sink.Postgres, ds.Sink)
	require.Equal(t, w.checksum("src"), w.checksum("out"), "every source row once")
	for id, on := range committed { // no write that returned success was undone
		txn, err := w.ledger.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, ledger.StatusCommitted, txn.Status, id)
		require.Equal(t, on, txn.Sink, id)
	}
	t.Logf("writes: %d on Postgres, %d on Iceberg, %d raced a flip; promote attempts %d; longest write %s",
		writes[0].Load(), writes[1].Load(), raced.Load(), promotions, time.Duration(longest.Load()).Round(time.Millisecond))
}

// A split pair in shadow: each output is shadowed and recorded; both are
// promoted in one call (one transaction), and the pair's next write lands
// on Iceberg with the same contents.
func TestShadowSplitPairPromotedTogether(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 60)
	ensureOutputs(t, w.pool, "m", "u")
	w.shadow("m", "u")
	split := writestrategy.Split{Source: "orders", Predicate: "category = 'a'", Matched: "m", Unmatched: "u"}
	for range 2 {
		res := w.mustWrite(split)
		require.Len(t, res, 2)
		for _, r := range res {
			st := w.shadowStatus(r.DatasetID)
			require.Equal(t, "matched", st.Last.Status, r.DatasetID)
			require.Equal(t, r.TxnID, st.Last.TxnID)
		}
	}
	before := []any{w.checksum("m"), w.checksum("u")}
	require.NoError(t, w.d.Promote(ctx, writer, "u", "m"))
	for _, id := range []string{"m", "u"} {
		ds, err := w.ledger.Dataset(ctx, id)
		require.NoError(t, err)
		require.Equal(t, sink.Iceberg, ds.Sink)
	}
	require.Equal(t, before, []any{w.checksum("m"), w.checksum("u")})
	res := w.mustWrite(split)
	require.Equal(t, sink.Iceberg, res[0].Sink)
	require.Equal(t, before, []any{w.checksum("m"), w.checksum("u")})
}

// Promote catches up the shadow of the latest write of record: a dataset
// whose previous shadow run matched and whose latest write has no shadow
// run yet (its shadow waits behind Promote under continuous writes; here
// it was written on Postgres without one) is shadowed by Promote itself,
// under its hold, and promoted with the latest contents. A dataset never
// shadowed is still refused.
func TestPromoteCatchesUpLatestShadow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 30)
	ensureOutputs(t, w.pool, "out", "never")
	copyOrders := writestrategy.Transform{Output: "out", Source: "orders"}
	w.mustWrite(writestrategy.Transform{Output: "never", Source: "orders"})
	require.ErrorIs(t, w.d.Promote(ctx, writer, "never"), writestrategy.ErrNotPromoted, "never written in shadow")

	w.shadow("out")
	w.mustWrite(copyOrders)
	require.Equal(t, "matched", w.shadowStatus("out").Last.Status)
	require.NoError(t, w.flags.SetOverride(ctx, writer, sink.Postgres, "out"))
	w.resolver.Invalidate()
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 45)
	res := w.mustWrite(copyOrders)
	require.Equal(t, sink.Postgres, res[0].Sink)
	st := w.shadowStatus("out")
	require.NotEqual(t, res[0].TxnID, st.Last.TxnID, "the latest write has no shadow run")

	w.shadow("out")
	before := w.checksum("out")
	require.NoError(t, w.d.Promote(ctx, writer, "out"))
	st = w.shadowStatus("out")
	require.Equal(t, res[0].TxnID, st.Last.TxnID, "Promote shadowed the latest write")
	require.Equal(t, "matched", st.Last.Status)
	ds, err := w.ledger.Dataset(ctx, "out")
	require.NoError(t, err)
	require.Equal(t, sink.Iceberg, ds.Sink)
	require.Equal(t, before, w.checksum("out"), "promoted with the latest write of record")
	require.Equal(t, w.checksum("orders"), w.checksum("out"))
}
