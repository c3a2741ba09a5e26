package writestrategy_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// turnCounter counts the round trips of a pool's connections: a write to
// the server after a read from it (or the first write) starts one. A
// pipelined batch, sent as one write and answered as one stream, is one.
// Connections count once the pool has finished connecting them.
type turnCounter struct {
	mu    sync.Mutex
	on    bool
	turns int
	stmts []string
}

type countedConn struct {
	net.Conn
	c        *turnCounter
	ready    bool
	lastRead bool
}

func (cc *countedConn) Write(b []byte) (int, error) {
	cc.c.mu.Lock()
	if cc.ready && cc.c.on && cc.lastRead {
		cc.c.turns++
	}
	cc.lastRead = false
	cc.c.mu.Unlock()
	return cc.Conn.Write(b)
}

func (cc *countedConn) Read(b []byte) (int, error) {
	n, err := cc.Conn.Read(b)
	cc.c.mu.Lock()
	cc.lastRead = true
	cc.c.mu.Unlock()
	return n, err
}

func (c *turnCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.record(d.SQL)
	return ctx
}
func (c *turnCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *turnCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (c *turnCounter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.record("(batch) " + d.SQL)
}
func (c *turnCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (c *turnCounter) record(sql string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.on {
		s := strings.Join(strings.Fields(sql), " ")
		if len(s) > 100 {
			s = s[:100] + "..."
		}
		c.stmts = append(c.stmts, s)
	}
}

func (c *turnCounter) start() {
	c.mu.Lock()
	c.on, c.turns, c.stmts = true, 0, nil
	c.mu.Unlock()
}

func (c *turnCounter) stop() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.on = false
	return c.turns, c.stmts
}

// maxSmallWriteRoundTrips is the most round trips a 1-row replace of a
// fresh dataset on the Postgres arm may take (warm pool and statement
// caches, built-in column types, no idempotency key, no open intent to
// recover): the output's row and open intents with the writer's flags,
// the intent (lock and insert) with the datasets rows read, the
// transaction's begin and settings, the output's description, the row
// store's delete and insert, and the ledger commit with its unlock and the
// COMMIT.
const maxSmallWriteRoundTrips = 6

// maxSmallIcebergWriteRoundTrips is the most round trips a 1-row replace
// of a fresh dataset on the Iceberg arm may take, its catalog being the
// Postgres catalog in the ledger's database (same conditions as
// maxSmallWriteRoundTrips): the output's row with the flags, the intent
// with the datasets rows read, the compute transaction's begin (on the
// intent's session), the output's description and rows, the catalog's
// reads of the table, the pointer swap, the ledger commit with its unlock
// and the COMMIT.
const maxSmallIcebergWriteRoundTrips = 13

// The fixed cost of a small write, in round trips to the database, is
// pinned on either arm: it may go down, never up.
func TestDispatchSmallWriteRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		arm   sink.Sink
		limit int
	}{
		{sink.Postgres, maxSmallWriteRoundTrips},
		{sink.Iceberg, maxSmallIcebergWriteRoundTrips},
	} {
		t.Run(string(tc.arm), func(t *testing.T) {
			t.Parallel()
			smallWriteRoundTrips(t, tc.arm, tc.limit)
		})
	}
}

func smallWriteRoundTrips(t *testing.T, arm sink.Sink, limit int) {
	ctx := context.Background()
	counter := &turnCounter{}
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	require.NoError(t, err)
	cfg.MaxConns = 2 // every connection sees every statement during the warm-up
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	cfg.ConnConfig.Tracer = counter
	cfg.ConnConfig.AfterNetConnect = func(_ context.Context, _ *pgconn.Config, c net.Conn) (net.Conn, error) {
		return &countedConn{Conn: c, c: counter}, nil
	}
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		cc := c.PgConn().Conn().(*countedConn)
		counter.mu.Lock()
		cc.ready = true
		counter.mu.Unlock()
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	l, err := ledger.New(pool, nil)
	require.NoError(t, err)
	flags, err := sink.NewFlags(pool, nil)
	require.NoError(t, err)
	require.NoError(t, flags.SetWriter(ctx, sink.WriterFlags{WriterID: writer, Default: arm, Max: arm}))
	res, err := sink.NewResolver(flags, nil)
	require.NoError(t, err)
	dc := &writestrategy.DispatchConfig{Ledger: l, Resolver: res, Workspace: "test"}
	var lake *facade.Facade
	if arm == sink.Iceberg {
		cat, err := facade.NewPostgresCatalog(ctx, pool, facade.CatalogConfig{Warehouse: t.TempDir()})
		require.NoError(t, err)
		lake, err = facade.New(cat, nil)
		require.NoError(t, err)
		dc.Lakehouse = lake
	}
	d, err := writestrategy.NewDispatcher(pool, dc)
	require.NoError(t, err)
	seedRowStore(t, pool, "orders", ordersSchema, ordersSQL, 1)

	const measured = 4
	var turns int
	var stmts []string
	write := func(i int) writestrategy.WriteResult {
		t.Helper()
		out := fmt.Sprintf("small_%d", i)
		_, err := l.EnsureDataset(ctx, out, out, nil)
		require.NoError(t, err)
		res.Invalidate() // a fresh dataset's flags are read
		if i == measured {
			counter.start()
		}
		rs, err := d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: writestrategy.Transform{Output: out, Source: "orders"}})
		if i == measured {
			turns, stmts = counter.stop()
		}
		require.NoError(t, err)
		require.Len(t, rs, 1)
		require.Equal(t, arm, rs[0].Sink)
		require.EqualValues(t, 1, rs[0].Rows)
		require.False(t, rs[0].CommittedAt.IsZero())
		return rs[0]
	}
	for i := range measured { // warm the pool's connections and their statement caches
		write(i)
	}
	r := write(measured)
	t.Logf("a 1-row %s-arm write: %d round trips, %d statements:\n  %s", arm, turns, len(stmts), strings.Join(stmts, "\n  "))
	require.LessOrEqual(t, turns, limit, "statements:\n  %s", strings.Join(stmts, "\n  "))

	// The write is what it claims: its rows (its snapshot), its ledger
	// commit, its watermark at the commit time; nothing stays held.
	txn, err := l.Get(ctx, r.TxnID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusCommitted, txn.Status)
	require.True(t, r.CommittedAt.Equal(txn.CommittedAt), "result %v, ledger %v", r.CommittedAt, txn.CommittedAt)
	ds, err := l.Dataset(ctx, "small_4")
	require.NoError(t, err)
	require.EqualValues(t, 1, ds.RowCount)
	require.True(t, ds.SourceWatermark.Equal(txn.CommittedAt), "watermark %v, committed at %v", ds.SourceWatermark, txn.CommittedAt)
	if arm == sink.Iceberg {
		require.NotZero(t, r.SnapshotID)
		require.Equal(t, r.SnapshotID, txn.SnapshotID)
		tbl, err := lake.LoadTable(ctx, "small_4")
		require.NoError(t, err)
		require.Equal(t, r.SnapshotID, tbl.CurrentSnapshot().SnapshotID)
	}
	require.Zero(t, pool.Stat().AcquiredConns(), "nothing held")
	var locks int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&locks))
	require.Zero(t, locks, "every hold given up")
}

// The Postgres arm's commit, whichever way it goes: on the held session of
// an intent (liveness) or on a pool connection (none), with or without
// expectations (which see the commit time), one output or a split pair.
// The results' commit time is the ledger's and the watermark, every
// intent commits, nothing stays held; a veto writes nothing.
func TestDispatchPostgresCommitPaths(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range commitPaths {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var seen []time.Time
			var veto bool
			lc := &ledger.Config{Liveness: tc.liveness}
			if tc.expect {
				lc.Expectations = []ledger.Expectation{func(_ context.Context, _ pgx.Tx, c ledger.Commit) error {
					seen = append(seen, c.Outcome.CommittedAt)
					if veto {
						return errors.New("vetoed")
					}
					return nil
				}}
			}
			w := newWorldWith(t, nil, nil, nil, lc)
			seedWorld(t, w, 50)
			ensureOutputs(t, w.pool, "one", "m", "u")
			check := func(res []writestrategy.WriteResult) {
				t.Helper()
				for _, r := range res {
					require.False(t, r.CommittedAt.IsZero())
					require.True(t, r.CommittedAt.Equal(res[0].CommittedAt), "one commit time per write")
					txn, err := w.ledger.Get(ctx, r.TxnID)
					require.NoError(t, err)
					require.Equal(t, ledger.StatusCommitted, txn.Status)
					require.True(t, r.CommittedAt.Equal(txn.CommittedAt))
					ds, err := w.ledger.Dataset(ctx, r.DatasetID)
					require.NoError(t, err)
					require.True(t, ds.SourceWatermark.Equal(txn.CommittedAt))
					require.Equal(t, r.Rows, ds.RowCount)
				}
				require.Zero(t, w.pool.Stat().AcquiredConns(), "nothing held")
			}
			res := w.mustWrite(writestrategy.Transform{Output: "one", Source: "orders"})
			require.EqualValues(t, 50, res[0].Rows)
			check(res)
			res = w.mustWrite(writestrategy.Split{Source: "orders", Predicate: "category = 'a'", Matched: "m", Unmatched: "u"})
			require.EqualValues(t, 50, res[0].Rows+res[1].Rows)
			check(res)
			if !tc.expect {
				return
			}
			require.Len(t, seen, 3)
			for _, at := range seen {
				require.False(t, at.IsZero(), "expectations see the commit time")
			}
			veto = true
			before := w.checksum("one")
			_, err := w.write(writestrategy.Transform{Output: "one", Source: "cats"})
			require.ErrorIs(t, err, ledger.ErrVetoed)
			require.Equal(t, before, w.checksum("one"), "a veto writes nothing")
			var open int
			require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE status = 'open'`).Scan(&open))
			require.Zero(t, open)
			require.Zero(t, w.pool.Stat().AcquiredConns())
		})
	}
}

// killHeld terminates, at the start of the apply phase, the sessions that
// hold intents (advisory locks) in its pool's database (other tests share
// the server), from a connection of its own.
type killHeld struct {
	pool   *pgxpool.Pool
	killed int
}

func (k *killHeld) PhaseStart(ctx context.Context, ev writestrategy.PhaseEvent) context.Context {
	if ev.Phase == writestrategy.PhaseApply {
		var n int
		if err := k.pool.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
			WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()
			  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n); err == nil {
			k.killed += n
		}
	}
	return ctx
}

func (k *killHeld) PhaseEnd(context.Context, writestrategy.PhaseEvent) {}

// A Postgres-arm write whose session dies before its transaction's first
// round trip (its BEGIN) fails
// with nothing written and nothing held, and the next write of the output
// lands: the dead intent is reconciled, the session is not reused.
func TestDispatchPostgresSessionDiesBeforeBegin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	w := newWorldOn(t, url, nil, nil, nil, nil)
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 5)
	_, err := w.ledger.EnsureDataset(ctx, "out", "out", nil)
	require.NoError(t, err)
	w.mustWrite(writestrategy.Transform{Output: "out", Source: "orders"})
	before := w.checksum("out")

	killPool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(killPool.Close)
	k := &killHeld{pool: killPool}
	d, err := writestrategy.NewDispatcher(w.pool, &writestrategy.DispatchConfig{Ledger: w.ledger, Resolver: w.resolver,
		Lakehouse: w.lake, Workspace: "test", Observer: k})
	require.NoError(t, err)
	seedRowStore(t, w.pool, "orders2", ordersSchema, ordersSQL, 3)
	_, err = d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: writestrategy.Transform{Output: "out", Source: "orders2"}})
	require.Error(t, err)
	require.Equal(t, 1, k.killed)
	require.Equal(t, before, w.checksum("out"), "nothing written")
	require.Zero(t, w.pool.Stat().AcquiredConns(), "nothing held")

	res := w.mustWrite(writestrategy.Transform{Output: "out", Source: "orders2"})
	require.EqualValues(t, 3, res[0].Rows)
	var open int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions
		WHERE dataset_id = 'out' AND status = 'open'`).Scan(&open))
	require.Zero(t, open)
}
