package ledger_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
)

// livenessBound is how long a reconciliation of a dead writer may take in
// these tests: far below the WaitTimeout they configure, so that passing
// proves Open did not wait for the holder, yet generous for a loaded
// machine. It is a liveness check, not a benchmark.
const (
	livenessBound = 20 * time.Second
	longWait      = 60 * time.Second
)

// poolOn opens a second pool on the database at url (another "process").
func poolOn(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// noLeak checks that every connection the ledger took is back in the pool.
func noLeak(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	require.Zero(t, pool.Stat().AcquiredConns(), "a connection is still held")
}

// held makes sure in is released when the test ends, even when it fails
// (a pool waits for held connections on Close).
func held(t *testing.T, in *ledger.Intent) *ledger.Intent {
	t.Helper()
	t.Cleanup(in.Release)
	return in
}

// holderPID is the backend holding the intent's session lock.
func holderPID(t *testing.T, pool *pgxpool.Pool, id string) int32 {
	t.Helper()
	var pid int32
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT k.pid FROM pg_locks k
		JOIN lakewrite.pipeline_build_transactions t ON ((k.classid::bigint << 32) | k.objid::bigint) = t.lock_key
		WHERE t.id = $1 AND k.locktype = 'advisory' AND k.objsubid = 1 AND k.granted`, id).Scan(&pid))
	return pid
}

func landedAt(at time.Time, rows int64) ledger.Lookup {
	return func(ctx context.Context, in ledger.Intent) (ledger.Landing, error) {
		return ledger.Landing{Landed: true, Outcome: ledger.Outcome{RowCount: rows, SnapshotID: 77, CommittedAt: at}}, nil
	}
}

func absent(ctx context.Context, in ledger.Intent) (ledger.Landing, error) {
	return ledger.Landing{}, nil
}

// openTimed opens with p and reports how long it took.
func openTimed(t *testing.T, l *ledger.Ledger, p ledger.OpenParams) (*ledger.Intent, time.Duration) {
	t.Helper()
	start := time.Now()
	in, err := l.Open(context.Background(), p)
	require.NoError(t, err)
	return held(t, in), time.Since(start)
}

// A writer whose backend is terminated is seen dead at once: the next Open
// with a Lookup rolls its intent forward (landed) or aborts it (absent)
// without waiting, and the dead writer can neither commit nor pretend it
// still holds the dataset.
func TestDeadWriterTerminated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, pool := newLedger(t, &ledger.Config{WaitTimeout: longWait})
	ensure(t, l, "d")
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)

	for _, landed := range []bool{true, false} {
		dead, err := l.Open(ctx, params("d"))
		require.NoError(t, err)
		held(t, dead)
		require.NoError(t, dead.Alive(ctx))
		var ok bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT pg_terminate_backend($1, 5000)`, holderPID(t, pool, dead.ID)).Scan(&ok))
		require.True(t, ok)

		var asked []ledger.Intent
		p := params("d")
		p.Lookup = func(ctx context.Context, in ledger.Intent) (ledger.Landing, error) {
			asked = append(asked, in)
			if landed {
				return landedAt(at, 5)(ctx, in)
			}
			return absent(ctx, in)
		}
		next, took := openTimed(t, l, p)
		require.Less(t, took, livenessBound, "Open waited for a dead writer")
		require.Len(t, asked, 1)
		require.Equal(t, dead.ID, asked[0].ID)
		require.Equal(t, int64(2), asked[0].Attempt(), "Lookup sees the claimed intent")
		got, err := l.Get(ctx, dead.ID)
		require.NoError(t, err)
		if landed {
			require.Equal(t, ledger.StatusCommitted, got.Status)
			require.Equal(t, int64(5), got.RowCount)
			ds, err := l.Dataset(ctx, "d")
			require.NoError(t, err)
			require.True(t, ds.SourceWatermark.Equal(at), "roll-forward stamps the watermark")
		} else {
			require.Equal(t, ledger.StatusAborted, got.Status)
		}

		// The dead writer's session is gone: it knows, and cannot commit.
		require.ErrorIs(t, dead.Alive(ctx), ledger.ErrLostHold)
		err = l.Commit(ctx, dead, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()})
		require.ErrorIs(t, err, ledger.ErrNotOpen)
		dead.Release()
		require.NoError(t, l.Abort(ctx, next, nil))
		noLeak(t, pool)
	}
}

const (
	helperURL     = "LAKEWRITE_LEDGER_HELPER_URL"
	helperDataset = "LAKEWRITE_LEDGER_HELPER_DATASET"
)

// TestHelperProcess is not a test: TestDeadWriterKilled runs the test
// binary again with this test only, as a writer process that opens an
// intent, says so, and waits to be killed.
func TestHelperProcess(t *testing.T) {
	url := os.Getenv(helperURL)
	if url == "" {
		return
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		fmt.Println("ERROR", err)
		return
	}
	var cfg ledger.Config
	if s := os.Getenv(helperLease); s != "" {
		if cfg.Lease, err = time.ParseDuration(s); err != nil {
			fmt.Println("ERROR", err)
			return
		}
	}
	l, err := ledger.New(pool, &cfg)
	if err != nil {
		fmt.Println("ERROR", err)
		return
	}
	in, err := l.Open(ctx, params(os.Getenv(helperDataset)))
	if err != nil {
		fmt.Println("ERROR", err)
		return
	}
	defer l.KeepAlive(ctx, in)() // the live call renews its lease, if it has one
	fmt.Println("OPEN", in.ID)
	time.Sleep(2 * time.Minute) // until SIGKILL
}

// A writer process killed with SIGKILL while its intent is open: the next
// writer reconciles the intent at once.
func TestDeadWriterKilled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	pool := poolOn(t, url)
	l, err := ledger.New(pool, &ledger.Config{WaitTimeout: longWait})
	require.NoError(t, err)
	ensure(t, l, "d")

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1", "-test.timeout=3m")
	cmd.Env = append(os.Environ(), helperURL+"="+url, helperDataset+"=d")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var id string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		require.False(t, strings.HasPrefix(line, "ERROR"), line)
		if after, ok := strings.CutPrefix(line, "OPEN "); ok {
			id = after
			break
		}
	}
	require.NotEmpty(t, id, "the writer process did not open its intent")
	got, err := l.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusOpen, got.Status)

	// While it lives, it holds the dataset.
	p := params("d")
	p.Lookup = absent
	p.NoWait = true
	_, err = l.Open(ctx, p)
	holder, busy := ledger.BusyHolder(err)
	require.True(t, busy, "a busy error: %v", err)
	require.Equal(t, id, holder)
	require.NotContains(t, err.Error(), "writer is gone", "the holder's writer is alive")

	require.NoError(t, cmd.Process.Kill()) // SIGKILL
	_ = cmd.Wait()

	p.NoWait = false
	next, took := openTimed(t, l, p)
	require.Less(t, took, livenessBound, "Open waited for a killed writer")
	got, err = l.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusAborted, got.Status)
	require.Contains(t, got.Error, "did not land")
	require.NoError(t, l.Commit(ctx, next, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}))
	noLeak(t, pool)
}

// A slow writer that is alive is never swept, whatever the age of its
// intent, and never reconciled by Open: others wait (or give up), and the
// writer commits as usual.
func TestLiveSlowWriterNeverSwept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	poolA, poolB := poolOn(t, url), poolOn(t, url)
	writer, err := ledger.New(poolA, nil)
	require.NoError(t, err)
	other, err := ledger.New(poolB, &ledger.Config{WaitTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	ensure(t, writer, "d")

	in, err := writer.Open(ctx, params("d"))
	require.NoError(t, err)
	held(t, in)
	_, err = poolA.Exec(ctx, `UPDATE lakewrite.pipeline_build_transactions SET created_at = created_at - interval '1 day'`)
	require.NoError(t, err)

	asked := 0
	lookup := func(ctx context.Context, in ledger.Intent) (ledger.Landing, error) {
		asked++
		return ledger.Landing{}, nil
	}
	rep, err := other.Sweep(ctx, ledger.SweepParams{OlderThan: time.Nanosecond, Lookup: lookup})
	require.NoError(t, err)
	require.Len(t, rep.Live, 1)
	require.Equal(t, in.ID, rep.Live[0].ID)
	require.Empty(t, rep.Aborted)
	rep, err = other.Recover(ctx, "d", 0, lookup)
	require.NoError(t, err)
	require.Len(t, rep.Live, 1)

	p := params("d")
	p.Lookup = lookup
	_, err = other.Open(ctx, p)
	holder, busy := ledger.BusyHolder(err)
	require.True(t, busy, "a busy error: %v", err)
	require.Equal(t, in.ID, holder)
	require.NotContains(t, err.Error(), "writer is gone", "the holder's writer is alive")
	p.NoWait = true
	_, err = other.Open(ctx, p)
	require.ErrorIs(t, err, ledger.ErrBusy)
	require.Zero(t, asked, "a live writer's intent was looked up")
	noLeak(t, poolB)

	require.NoError(t, in.Alive(ctx))
	require.NoError(t, writer.Commit(ctx, in, ledger.Outcome{RowCount: 3, CommittedAt: time.Now()}))
	got, err := writer.Get(ctx, in.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusCommitted, got.Status)
	require.Equal(t, int64(1), got.Attempt)
	noLeak(t, poolA)
}

// Release is idempotent and safe from several goroutines; a released
// intent that is still open belongs to reconciliation, at once.
func TestRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, pool := newLedger(t, &ledger.Config{WaitTimeout: longWait})
	ensure(t, l, "d")
	in, err := l.Open(ctx, params("d"))
	require.NoError(t, err)
	held(t, in)
	require.Equal(t, int32(1), pool.Stat().AcquiredConns(), "an open intent holds one connection")
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); in.Release() }()
	}
	wg.Wait()
	in.Release()
	noLeak(t, pool)
	require.ErrorIs(t, in.Alive(ctx), ledger.ErrLostHold)
	err = l.Commit(ctx, in, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()})
	require.ErrorIs(t, err, ledger.ErrLostHold)
	got, err := l.Get(ctx, in.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusOpen, got.Status, "a refused commit leaves the intent open")

	// A Lookup that cannot tell: typed error, intent left open (claimed).
	catalogDown := errors.New("catalog unreachable")
	p := params("d")
	p.Lookup = func(ctx context.Context, in ledger.Intent) (ledger.Landing, error) {
		return ledger.Landing{}, catalogDown
	}
	_, err = l.Open(ctx, p)
	require.ErrorIs(t, err, ledger.ErrUnresolved)
	require.ErrorIs(t, err, ledger.ErrBusy)
	require.ErrorIs(t, err, catalogDown)
	require.EqualError(t, err, fmt.Sprintf(`ledger: dataset "d" is held by intent %s whose writer is gone, and its outcome is unknown (left open): catalog unreachable`, in.ID))
	noLeak(t, pool)
	got, err = l.Get(ctx, in.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusOpen, got.Status)
	require.Equal(t, int64(2), got.Attempt)
	require.ErrorIs(t, l.Abort(ctx, in, nil), ledger.ErrFenced, "the original writer is fenced")

	// Without a Lookup, Open does not reconcile: it waits, then says the
	// holder is gone.
	short, err := ledger.New(pool, &ledger.Config{WaitTimeout: 100 * time.Millisecond})
	require.NoError(t, err)
	_, err = short.Open(ctx, params("d"))
	_, busy := ledger.BusyHolder(err)
	require.True(t, busy, "a busy error: %v", err)
	require.Contains(t, err.Error(), "(its writer is gone: reconcile it with OpenParams.Lookup, Sweep or Recover)")

	// The catalog is back.
	p.Lookup = absent
	next, took := openTimed(t, l, p)
	require.Less(t, took, livenessBound)
	got, err = l.Get(ctx, in.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusAborted, got.Status)
	next.Release()
	next.Release()
	noLeak(t, pool)

	// Sweep takes a released intent whatever its age (OlderThan zero).
	rep, err := l.Sweep(ctx, ledger.SweepParams{Lookup: absent})
	require.NoError(t, err)
	require.Len(t, rep.Aborted, 1)
	require.Equal(t, next.ID, rep.Aborted[0].ID)
	noLeak(t, pool)
}

// Every path out of Open gives the connection back.
func TestOpenErrorsHoldNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, pool := newLedger(t, &ledger.Config{WaitTimeout: 100 * time.Millisecond})
	ensure(t, l, "d", "owned")
	require.NoError(t, l.ClaimDataset(ctx, "owned", "someone.else"))
	warm(t, pool, 3) // the waits measured below are not a connection's start

	_, err := l.Open(ctx, params("missing"))
	require.ErrorIs(t, err, ledger.ErrDatasetNotFound)
	noLeak(t, pool)
	_, err = l.Open(ctx, params("owned"))
	require.ErrorIs(t, err, ledger.ErrNotOwner)
	noLeak(t, pool)
	bad := params("d")
	bad.WriteMode = "upsert"
	_, err = l.Open(ctx, bad)
	require.ErrorIs(t, err, ledger.ErrInvalid)
	noLeak(t, pool)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = l.Open(cancelled, params("d"))
	require.ErrorIs(t, err, context.Canceled)
	noLeak(t, pool)

	holder, err := l.Open(ctx, params("d"))
	require.NoError(t, err)
	held(t, holder)
	_, err = l.Open(ctx, params("d"))
	require.ErrorIs(t, err, ledger.ErrBusy)
	nw := params("d")
	nw.NoWait = true
	_, err = l.Open(ctx, nw)
	require.ErrorIs(t, err, ledger.ErrBusy)
	tctx, tcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer tcancel()
	long, err := ledger.New(pool, &ledger.Config{WaitTimeout: time.Hour})
	require.NoError(t, err)
	_, err = long.Open(tctx, params("d"))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, int32(1), pool.Stat().AcquiredConns(), "only the holder's connection")

	// A veto releases too.
	vl, err := ledger.New(pool, &ledger.Config{Expectations: []ledger.Expectation{atLeast10(nil)}})
	require.NoError(t, err)
	require.NoError(t, l.Abort(ctx, holder, nil))
	in, err := vl.Open(ctx, params("d"))
	require.NoError(t, err)
	held(t, in)
	require.ErrorIs(t, vl.Commit(ctx, in, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}), ledger.ErrVetoed)
	noLeak(t, pool)
	// So does a refused commit.
	in, err = vl.Open(ctx, params("d"))
	require.NoError(t, err)
	held(t, in)
	require.ErrorIs(t, vl.Commit(ctx, in, ledger.Outcome{RowCount: -1, CommittedAt: time.Now()}), ledger.ErrInvalid)
	noLeak(t, pool)
	require.NoError(t, vl.Abort(ctx, in, nil), "the intent is still open and its writer may abort it")
	noLeak(t, pool)
}

// Intents opened through a pgx.Tx have no liveness: they are recovered by
// age only. Intents on a *pgx.Conn hold their lock on that connection.
func TestLivenessByDB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	pool := poolOn(t, url)
	l, err := ledger.New(pool, nil)
	require.NoError(t, err)
	ensure(t, l, "tx", "conn")

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	lt, err := ledger.New(tx, nil)
	require.NoError(t, err)
	in, err := lt.Open(ctx, params("tx"))
	require.NoError(t, err)
	held(t, in)
	require.NoError(t, in.Alive(ctx), "no hold to lose")
	require.NoError(t, tx.Commit(ctx))
	var key *int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT lock_key FROM lakewrite.pipeline_build_transactions WHERE id = $1`, in.ID).Scan(&key))
	require.Nil(t, key)
	rep, err := l.Sweep(ctx, ledger.SweepParams{Lookup: absent})
	require.NoError(t, err)
	require.Empty(t, rep.Aborted, "no liveness: not swept at OlderThan zero")
	rep, err = l.Sweep(ctx, ledger.SweepParams{OlderThan: time.Nanosecond, Lookup: absent})
	require.NoError(t, err)
	require.Len(t, rep.Aborted, 1)

	conn := pgtest.Conn(t, url)
	lc, err := ledger.New(conn, nil)
	require.NoError(t, err)
	cin, err := lc.Open(ctx, params("conn"))
	require.NoError(t, err)
	held(t, cin)
	rep, err = l.Sweep(ctx, ledger.SweepParams{Lookup: absent})
	require.NoError(t, err)
	require.Len(t, rep.Live, 1)
	require.Equal(t, cin.ID, rep.Live[0].ID)
	require.NoError(t, cin.Alive(ctx))
	require.NoError(t, conn.Close(ctx)) // the writer's connection ends
	// The server notices the closed connection and ends the session (and
	// its lock) a moment later.
	deadline := time.Now().Add(livenessBound)
	for {
		rep, err = l.Sweep(ctx, ledger.SweepParams{Lookup: absent})
		require.NoError(t, err)
		if len(rep.Aborted) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.Len(t, rep.Aborted, 1)
	require.Equal(t, cin.ID, rep.Aborted[0].ID)
	noLeak(t, pool)
}

func TestFindByKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, pool := newLedger(t, nil)
	ensure(t, l, "d", "e")
	keyed := func(ds, key string) ledger.OpenParams {
		p := params(ds)
		p.IdempotencyKey = key
		return p
	}
	_, ok, err := l.FindByKey(ctx, "d", "req-1")
	require.NoError(t, err)
	require.False(t, ok)

	base := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	first, err := l.Open(ctx, keyed("d", "req-1"))
	require.NoError(t, err)
	held(t, first)
	require.Equal(t, "req-1", first.IdempotencyKey())
	require.NoError(t, l.Commit(ctx, first, ledger.Outcome{RowCount: 4, CommittedAt: base}))
	aborted, err := l.Open(ctx, keyed("d", "req-1"))
	require.NoError(t, err)
	held(t, aborted)
	require.NoError(t, l.Abort(ctx, aborted, nil))
	other, err := l.Open(ctx, keyed("e", "req-1"))
	require.NoError(t, err)
	held(t, other)
	require.NoError(t, l.Commit(ctx, other, ledger.Outcome{RowCount: 1, CommittedAt: base.Add(time.Hour)}))

	txn, ok, err := l.FindByKey(ctx, "d", "req-1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, first.ID, txn.ID)
	require.Equal(t, "req-1", txn.IdempotencyKey())
	require.Equal(t, int64(4), txn.RowCount)

	second, err := l.Open(ctx, keyed("d", "req-1"))
	require.NoError(t, err)
	held(t, second)
	require.NoError(t, l.Commit(ctx, second, ledger.Outcome{RowCount: 5, CommittedAt: base.Add(time.Minute)}))
	txn, ok, err = l.FindByKey(ctx, "d", "req-1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, second.ID, txn.ID, "the newest committed intent")

	_, ok, err = l.FindByKey(ctx, "d", "req-2")
	require.NoError(t, err)
	require.False(t, ok)
	_, _, err = l.FindByKey(ctx, "d", "")
	require.ErrorIs(t, err, ledger.ErrInvalid)
	unkeyed, err := l.Get(ctx, aborted.ID)
	require.NoError(t, err)
	require.Equal(t, "req-1", unkeyed.IdempotencyKey())

	// The lookup is an index scan on (dataset, key), whatever the length of
	// the dataset's history.
	_, err = pool.Exec(ctx, `INSERT INTO lakewrite.pipeline_build_transactions
			(id, dataset_id, writer_id, sink, write_mode, status, committed_at)
		SELECT gen_random_uuid(), 'd', 'w', 'pg', 'append', 'committed', now() - g * interval '1 minute'
		FROM generate_series(1, 5000) g;
		ANALYZE lakewrite.pipeline_build_transactions`)
	require.NoError(t, err)
	txn, ok, err = l.FindByKey(ctx, "d", "req-1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, second.ID, txn.ID)
	var plan string
	rows, err := pool.Query(ctx, `EXPLAIN SELECT id FROM lakewrite.pipeline_build_transactions
		WHERE dataset_id = 'd' AND idempotency_key = 'req-1' AND status = 'committed'
		ORDER BY committed_at DESC, created_at DESC LIMIT 1`)
	require.NoError(t, err)
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		plan += line + "\n"
	}
	require.NoError(t, rows.Err())
	require.Contains(t, plan, "pipeline_build_transactions_idempotency")
}

func TestMaintenanceIntent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The expectation refuses fewer than 10 rows: it must not run for
	// maintenance commits (which carry 0).
	l, pool := newLedger(t, &ledger.Config{Expectations: []ledger.Expectation{atLeast10(nil)}, WaitTimeout: longWait})
	ensure(t, l, "d")
	at := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	in, err := l.Open(ctx, params("d"))
	require.NoError(t, err)
	held(t, in)
	require.NoError(t, l.Commit(ctx, in, ledger.Outcome{RowCount: 12, SnapshotID: 3, CommittedAt: at, Schema: []byte(`{"c":1}`)}))
	before, err := l.Dataset(ctx, "d")
	require.NoError(t, err)
	require.True(t, before.MaintainedAt.IsZero())
	require.Nil(t, before.Maintenance)

	maint := ledger.OpenParams{DatasetID: "d", WriterID: "lakewrite.maintenance", Sink: "iceberg_native", WriteMode: ledger.Maintenance}
	m, err := l.Open(ctx, maint)
	require.NoError(t, err)
	held(t, m)
	_, open, err := l.OldestOpen(ctx, "d")
	require.NoError(t, err)
	require.False(t, open, "a maintenance intent is not an open write")
	// It serializes with writers like any intent.
	nw := params("d")
	nw.NoWait = true
	_, err = l.Open(ctx, nw)
	require.ErrorIs(t, err, ledger.ErrBusy)
	require.ErrorIs(t, l.Check(ctx, m, ledger.Outcome{Schema: []byte(`{}`)}), ledger.ErrInvalid)
	require.NoError(t, l.Check(ctx, m, ledger.Outcome{}), "no expectations for maintenance")
	require.NoError(t, l.Commit(ctx, m, ledger.Outcome{SnapshotID: 4, Report: []byte(`{"expired_snapshots": 3}`)}))

	after, err := l.Dataset(ctx, "d")
	require.NoError(t, err)
	require.False(t, after.MaintainedAt.IsZero())
	require.JSONEq(t, `{"expired_snapshots": 3}`, string(after.Maintenance))
	require.True(t, after.SourceWatermark.Equal(before.SourceWatermark), "watermark unchanged")
	require.Equal(t, before.RowCount, after.RowCount)
	require.Equal(t, before.Status, after.Status)
	require.Equal(t, before.Sink, after.Sink)
	require.JSONEq(t, string(before.Schema), string(after.Schema))
	got, err := l.Get(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusCommitted, got.Status)
	require.True(t, got.CommittedAt.Equal(after.MaintainedAt))
	window, err := l.Committed(ctx, "d", time.Time{}, time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Len(t, window, 1, "maintenance intents carry no data")
	require.Equal(t, in.ID, window[0].ID)

	// A second run without a report keeps the last report.
	m, err = l.Open(ctx, maint)
	require.NoError(t, err)
	held(t, m)
	mat := time.Date(2026, 6, 2, 0, 0, 0, 0, time.UTC)
	require.NoError(t, l.Commit(ctx, m, ledger.Outcome{CommittedAt: mat}))
	after, err = l.Dataset(ctx, "d")
	require.NoError(t, err)
	require.True(t, after.MaintainedAt.Equal(mat))
	require.JSONEq(t, `{"expired_snapshots": 3}`, string(after.Maintenance))

	// Reports are for maintenance only.
	w, err := l.Open(ctx, params("d"))
	require.NoError(t, err)
	held(t, w)
	require.ErrorIs(t, l.Check(ctx, w, ledger.Outcome{RowCount: 12, CommittedAt: at, Report: []byte(`{}`)}), ledger.ErrInvalid)
	require.NoError(t, l.Abort(ctx, w, nil))

	// A dead maintenance run is aborted without a Lookup, by Open (with
	// or without one) and by Sweep.
	forbidden := func(ctx context.Context, in ledger.Intent) (ledger.Landing, error) {
		t.Errorf("Lookup asked about maintenance intent %s", in.ID)
		return ledger.Landing{}, errors.New("no")
	}
	m, err = l.Open(ctx, maint)
	require.NoError(t, err)
	held(t, m)
	m.Release()
	next, took := openTimed(t, l, params("d"))
	require.Less(t, took, livenessBound)
	got, err = l.Get(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusAborted, got.Status)
	require.NoError(t, l.Abort(ctx, next, nil))

	m, err = l.Open(ctx, maint)
	require.NoError(t, err)
	held(t, m)
	m.Release()
	rep, err := l.Sweep(ctx, ledger.SweepParams{Lookup: forbidden})
	require.NoError(t, err)
	require.Len(t, rep.Aborted, 1)
	require.Equal(t, m.ID, rep.Aborted[0].ID)
	noLeak(t, pool)
}

// The cost of liveness per write: with a session lock, Open takes a session
// and a lock, Commit runs on that session and unlocks; with a lease, Open
// stamps it on the row and Commit runs on the pool. Compare the
// sub-benchmarks.
func BenchmarkOpenCommit(b *testing.B) {
	for _, c := range []struct {
		name string
		mode ledger.Liveness
	}{{"lock", ledger.LivenessAuto}, {"lease", ledger.LivenessLease}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			pool := pgtest.Pool(b)
			l, err := ledger.New(pool, &ledger.Config{Liveness: c.mode})
			require.NoError(b, err)
			_, err = l.EnsureDataset(ctx, "d", "", nil)
			require.NoError(b, err)
			at := time.Now()
			b.ResetTimer()
			for range b.N {
				in, err := l.Open(ctx, params("d"))
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Commit(ctx, in, ledger.Outcome{RowCount: 1, CommittedAt: at}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The actor an intent was opened for is stored and read back, on the open
// intent, through Get and after commit.
func TestActorRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, _ := newLedger(t, nil)
	ensure(t, l, "d")
	p := params("d")
	p.Actor = "alice@example.com"
	in, err := l.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, "alice@example.com", in.Actor())
	require.NoError(t, l.Commit(ctx, in, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}))
	txn, err := l.Get(ctx, in.ID)
	require.NoError(t, err)
	require.Equal(t, "alice@example.com", txn.Actor)

	anon, err := l.Open(ctx, params("d"))
	require.NoError(t, err)
	require.NoError(t, l.Abort(ctx, anon, nil))
	txn, err = l.Get(ctx, anon.ID)
	require.NoError(t, err)
	require.Empty(t, txn.Actor)
}
