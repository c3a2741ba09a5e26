package cursor_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// env is one database with a pool, a plain connection and an admin
// connection that observes the others.
type env struct {
	url   string
	pool  *pgxpool.Pool
	conn  *pgx.Conn
	admin *pgx.Conn
}

func newEnv(t *testing.T) *env {
	t.Helper()
	url := pgtest.URL(t)
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return &env{url: url, pool: pool, conn: pgtest.Conn(t, url), admin: pgtest.Conn(t, url)}
}

// assertClean checks that nothing the stream used is left open: no
// connection checked out of the pool, no session of this database in a
// transaction or running a query, no staging table, no open cursor and no
// transaction on the plain connection.
func (e *env) assertClean(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	require.Equal(t, int32(0), e.pool.Stat().AcquiredConns(), "pool connections still acquired")
	if !e.conn.IsClosed() {
		require.Equal(t, byte('I'), e.conn.PgConn().TxStatus(), "plain connection left in a transaction")
		var cursors int
		require.NoError(t, e.conn.QueryRow(ctx, `SELECT count(*) FROM pg_cursors WHERE name <> ''`).Scan(&cursors))
		require.Zero(t, cursors, "cursor left open")
	}
	// Backends of destroyed connections exit asynchronously: wait for them.
	var busy, staged int
	require.Eventually(t, func() bool {
		err := e.admin.QueryRow(ctx, `SELECT
  (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
     AND backend_type = 'client backend' AND state IS DISTINCT FROM 'idle'),
  (SELECT count(*) FROM pg_class WHERE relname LIKE 'lakewrite_stage_%')`).Scan(&busy, &staged)
		require.NoError(t, err)
		return busy == 0 && staged == 0
	}, 10*time.Second, 20*time.Millisecond, "busy sessions or staging tables left")
}

// terminateStreamer kills the backend serving the stream.
func (e *env) terminateStreamer(t *testing.T) {
	t.Helper()
	var n int
	err := e.admin.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend' AND state <> 'idle'`).Scan(&n)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

type source struct {
	name string
	db   func(t *testing.T, e *env) (cursor.DB, func()) // db and a check after the stream
}

var sources = []source{
	{"pool", func(t *testing.T, e *env) (cursor.DB, func()) { return e.pool, func() {} }},
	{"conn", func(t *testing.T, e *env) (cursor.DB, func()) { return e.conn, func() {} }},
	{"tx", func(t *testing.T, e *env) (cursor.DB, func()) {
		// The caller's transaction, on its own connection.
		conn, err := pgx.Connect(context.Background(), e.url)
		require.NoError(t, err)
		tx, err := conn.Begin(context.Background())
		require.NoError(t, err)
		return tx, func() {
			defer conn.Close(context.Background())
			if conn.IsClosed() {
				return // killed by a cancel or a lost connection, as documented
			}
			// Still the caller's transaction, still usable: the stream ran in a
			// savepoint and never committed or rolled back the caller's tx.
			var one int
			require.NoError(t, tx.QueryRow(context.Background(), `SELECT 1`).Scan(&one))
			require.Equal(t, byte('T'), conn.PgConn().TxStatus())
			require.NoError(t, tx.Rollback(context.Background()))
		}
	}},
}

const bigQuery = `SELECT g::int8 AS id, repeat('x', 100) AS pad, 1 / (g - $1::int) AS boom FROM generate_series(1, 200000) g`

type path struct {
	name string
	// opts tweaks the options; boomAt is the row where division by zero
	// happens (0 = never); hook runs after each batch and returns false to
	// break; wantErr checks the single yielded error (nil = no error).
	opts    func(o *cursor.Options)
	boomAt  int
	hook    func(t *testing.T, e *env, cancel context.CancelFunc, i int) bool
	wantErr func(t *testing.T, err error)
	connDie bool // the connection is expected to be dead afterwards
}

var paths = []path{
	{name: "complete", boomAt: -1},
	{name: "break", boomAt: -1, hook: func(_ *testing.T, _ *env, _ context.CancelFunc, i int) bool { return i < 2 }},
	{name: "server-error", boomAt: 150000, wantErr: func(t *testing.T, err error) {
		var pge *pgconn.PgError
		require.ErrorAs(t, err, &pge)
		require.Equal(t, "22012", pge.Code)
		var qe *cursor.QueryError
		require.ErrorAs(t, err, &qe)
	}},
	{name: "cancel", boomAt: -1, connDie: true,
		hook: func(_ *testing.T, _ *env, cancel context.CancelFunc, i int) bool {
			if i == 1 {
				cancel()
			}
			return true
		},
		wantErr: func(t *testing.T, err error) { require.ErrorIs(t, err, context.Canceled) }},
	{name: "conn-loss", boomAt: -1, connDie: true,
		hook: func(t *testing.T, e *env, _ context.CancelFunc, i int) bool {
			if i == 1 {
				e.terminateStreamer(t)
			}
			return true
		},
		wantErr: func(t *testing.T, err error) {
			var qe *cursor.QueryError
			require.ErrorAs(t, err, &qe)
		}},
	{name: "max-rows", boomAt: -1, opts: func(o *cursor.Options) { o.MaxRows = 5000 },
		wantErr: func(t *testing.T, err error) {
			require.ErrorIs(t, err, cursor.ErrRunaway)
			var le *cursor.LimitError
			require.ErrorAs(t, err, &le)
			require.EqualValues(t, 5000, le.MaxRows)
		}},
	{name: "max-duration", boomAt: -1, opts: func(o *cursor.Options) { o.MaxDuration = 50 * time.Millisecond },
		hook: func(_ *testing.T, _ *env, _ context.CancelFunc, i int) bool {
			time.Sleep(30 * time.Millisecond) // a slow consumer
			return true
		},
		wantErr: func(t *testing.T, err error) {
			require.ErrorIs(t, err, cursor.ErrRunaway)
			var le *cursor.LimitError
			require.ErrorAs(t, err, &le)
			require.Equal(t, 50*time.Millisecond, le.MaxDuration)
		}},
}

func TestCleanupBatches(t *testing.T) {
	e := newEnv(t)
	for _, mode := range []cursor.StreamMode{cursor.Direct, cursor.Staged} {
		for _, src := range sources {
			if mode == cursor.Staged && src.name == "tx" {
				continue // ErrStagedNeedsSession, tested below
			}
			for _, p := range paths {
				t.Run(fmt.Sprintf("%s/%s/%s", mode, src.name, p.name), func(t *testing.T) {
					if !p.connDie || src.name != "conn" {
						// the plain connection cannot be revived: run those last
					}
					e.runBatches(t, mode, src, p)
				})
			}
		}
	}
}

func (e *env) runBatches(t *testing.T, mode cursor.StreamMode, src source, p path) {
	if e.conn.IsClosed() {
		e.conn = pgtest.Conn(t, e.url)
	}
	db, after := src.db(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	o := &cursor.Options{Mode: mode, BatchSize: 1000, Allocator: mem}
	if p.opts != nil {
		p.opts(o)
	}
	boom := p.boomAt
	s, err := cursor.Batches(ctx, db, bigQuery, []any{boom}, o)
	require.NoError(t, err)
	var errs []error
	rows, i := 0, 0
	for b, err := range s.All() {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rows += int(b.NumRows())
		b.Release()
		i++
		if p.hook != nil && !p.hook(t, e, cancel, i) {
			break
		}
	}
	switch {
	case p.wantErr != nil:
		require.Len(t, errs, 1, "the error is yielded exactly once")
		p.wantErr(t, errs[0])
	default:
		require.Empty(t, errs)
	}
	if p.name == "complete" {
		require.Equal(t, 200000, rows)
	}
	mem.AssertSize(t, 0)
	after()
	e.assertClean(t)
	if p.connDie && src.name == "conn" {
		require.True(t, e.conn.IsClosed())
	}
}

func TestCleanupRows(t *testing.T) {
	e := newEnv(t)
	type row struct {
		ID   int64
		Pad  string
		Boom *int32
	}
	for _, mode := range []cursor.StreamMode{cursor.Direct, cursor.Staged} {
		for _, src := range sources {
			if mode == cursor.Staged && src.name == "tx" {
				continue
			}
			for _, p := range paths {
				t.Run(fmt.Sprintf("%s/%s/%s", mode, src.name, p.name), func(t *testing.T) {
					if e.conn.IsClosed() {
						e.conn = pgtest.Conn(t, e.url)
					}
					db, after := src.db(t, e)
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					o := &cursor.Options{Mode: mode}
					if p.opts != nil {
						p.opts(o)
					}
					var errs []error
					n := 0
					for r, err := range cursor.Rows(ctx, db, bigQuery, []any{p.boomAt}, pgx.RowToStructByName[row], o) {
						if err != nil {
							errs = append(errs, err)
							continue
						}
						n++
						require.EqualValues(t, n, r.ID)
						if n%1000 == 0 && p.hook != nil && !p.hook(t, e, cancel, n/1000) {
							break
						}
					}
					if p.wantErr != nil {
						require.Len(t, errs, 1, "the error is yielded exactly once")
						p.wantErr(t, errs[0])
					} else {
						require.Empty(t, errs)
					}
					after()
					e.assertClean(t)
				})
			}
		}
	}
}

func TestRecordReaderEarlyRelease(t *testing.T) {
	e := newEnv(t)
	for _, mode := range []cursor.StreamMode{cursor.Direct, cursor.Staged} {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		s, err := cursor.Batches(context.Background(), e.pool, bigQuery, []any{-1}, &cursor.Options{Mode: mode, BatchSize: 1000, Allocator: mem})
		require.NoError(t, err)
		rr := s.RecordReader()
		require.True(t, rr.Next())
		require.True(t, rr.Next())
		kept := rr.RecordBatch()
		kept.Retain()
		rr.Release() // a consumer that failed and gave up
		require.EqualValues(t, 1000, kept.NumRows())
		kept.Release()
		mem.AssertSize(t, 0)
		e.assertClean(t)

		// Read to the end through the reader.
		s, err = cursor.Batches(context.Background(), e.pool, bigQuery, []any{-1}, &cursor.Options{Mode: mode, Allocator: mem})
		require.NoError(t, err)
		rr = s.RecordReader()
		n := 0
		for rr.Next() {
			n += int(rr.RecordBatch().NumRows())
		}
		require.NoError(t, rr.Err())
		rr.Release()
		require.Equal(t, 200000, n)
		mem.AssertSize(t, 0)
		e.assertClean(t)
	}
}

func TestConsumerPanic(t *testing.T) {
	e := newEnv(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	s, err := cursor.Batches(context.Background(), e.pool, bigQuery, []any{-1}, &cursor.Options{BatchSize: 1000, Allocator: mem})
	require.NoError(t, err)
	require.Panics(t, func() {
		for b := range s.All() {
			b.Release()
			panic("consumer bug")
		}
	})
	mem.AssertSize(t, 0)
	e.assertClean(t)
}

func TestStagedNeedsSession(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = cursor.Batches(ctx, tx, `SELECT 1`, nil, &cursor.Options{Mode: cursor.Staged})
	require.ErrorIs(t, err, cursor.ErrStagedNeedsSession)
	for _, err := range cursor.Rows(ctx, tx, `SELECT 1`, nil, rowToAny, &cursor.Options{Mode: cursor.Staged}) {
		require.ErrorIs(t, err, cursor.ErrStagedNeedsSession)
	}

	// A plain connection already in a transaction is refused too.
	_, err = e.conn.Exec(ctx, `BEGIN`)
	require.NoError(t, err)
	_, err = cursor.Batches(ctx, e.conn, `SELECT 1`, nil, nil)
	require.ErrorIs(t, err, cursor.ErrConnInTransaction)
	_, err = e.conn.Exec(ctx, `ROLLBACK`)
	require.NoError(t, err)
}

var _ = errors.New
var _ arrow.RecordBatch
