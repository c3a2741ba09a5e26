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

// Behind PgBouncer in transaction mode, with several server connections and
// with one, the default configuration lets concurrent writers through: 6
// writers making 30 calls each on 3 datasets either commit (and the commit
// is in the ledger) or are refused with an error matching ErrBusy, and once
// they are done no advisory lock is held by any backend and no intent is
// open.
func TestTransactionPoolingConcurrentWriters(t *testing.T) {
	t.Parallel()
	for _, servers := range []int{20, 1} {
		t.Run(fmt.Sprintf("servers=%d", servers), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := pgtest.URL(t)
			pool, err := pgxpool.New(ctx, pgtest.PgBouncerPool(t, url, "transaction", servers))
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			l, err := ledger.New(pool, &ledger.Config{WaitTimeout: 5 * time.Second})
			require.NoError(t, err)
			datasets := []string{"a", "b", "c"}
			ensure(t, l, datasets...)

			const writers, calls = 6, 30
			var mu sync.Mutex
			var committed []string
			var refused int
			var wg sync.WaitGroup
			errs := make(chan error, writers*calls)
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for c := range calls {
						var id string
						_, err := l.With(ctx, params(datasets[(w+c)%len(datasets)]), func(ctx context.Context, in *ledger.Intent) (ledger.Outcome, error) {
							id = in.ID
							return ledger.Outcome{RowCount: int64(c), CommittedAt: time.Now()}, nil
						})
						mu.Lock()
						switch {
						case err == nil:
							committed = append(committed, id)
						case errors.Is(err, ledger.ErrBusy):
							refused++
						default:
							errs <- err
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err, "a call neither committed nor was refused as busy")
			}
			require.Equal(t, writers*calls, len(committed)+refused)
			require.NotEmpty(t, committed)
			for _, id := range committed {
				txn, err := l.Get(ctx, id)
				require.NoError(t, err)
				require.Equal(t, ledger.StatusCommitted, txn.Status)
			}
			direct := poolOn(t, url)
			var n int
			require.NoError(t, direct.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE status = 'committed'`).Scan(&n))
			require.Equal(t, len(committed), n)
			require.NoError(t, direct.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE status <> 'committed'`).Scan(&n))
			require.Zero(t, n, "no intent left open or aborted")
			require.Zero(t, advisoryLocks(t, direct), "no advisory lock outlives its intent")
			t.Logf("%d committed, %d refused busy", len(committed), refused)
		})
	}
}

const helperLease = "LAKEWRITE_LEDGER_HELPER_LEASE"

// A writer process behind PgBouncer in transaction mode, whose intent is
// held by a lease its live call renews (KeepAlive), is seen alive for
// longer than the lease; SIGKILLed, its dataset is written again once the
// lease lapses: the next Open, bounded by Config.Lease plus the backoff's
// last step (1s), reconciles it and opens.
func TestLeaseWriterKilled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const lease = time.Second
	url := pgtest.PgBouncer(t, pgtest.URL(t), "transaction")
	pool := poolOn(t, url)
	l, err := ledger.New(pool, &ledger.Config{Lease: lease, WaitTimeout: lease + time.Second})
	require.NoError(t, err)
	ensure(t, l, "k")

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1", "-test.timeout=3m")
	cmd.Env = append(os.Environ(), helperURL+"="+url, helperDataset+"=k", helperLease+"="+lease.String())
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
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

	// Alive past its first lease: the live call renews it.
	time.Sleep(2 * lease)
	p := params("k")
	p.Lookup, p.NoWait = absent, true
	_, err = l.Open(ctx, p)
	holder, busy := ledger.BusyHolder(err)
	require.True(t, busy, "a busy error: %v", err)
	require.Equal(t, id, holder)

	require.NoError(t, cmd.Process.Kill()) // SIGKILL
	_ = cmd.Wait()
	p.NoWait = false
	next, err := boundedOpen(t, l, p)
	require.NoError(t, err, "the killed writer's dataset is free within the lease and a backoff step")
	got, err := l.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusAborted, got.Status)
	require.NoError(t, l.Commit(ctx, next, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}))
	require.Zero(t, advisoryLocks(t, pool))
}

// A writer whose lease lapsed and was taken over is fenced: its renewal,
// Alive, Commit and a CommitTx in a transaction of its own (with a row of
// its write) are refused with an error matching ErrFenced, and nothing of
// its write is visible. Once the new holder aborted the intent, the old
// writer's commit is refused with ErrNotOpen.
func TestLeaseTakeoverFences(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const lease = 200 * time.Millisecond
	l, pool := bouncedLedger(t, "transaction", &ledger.Config{Lease: lease, WaitTimeout: 5 * time.Second})
	ensure(t, l, "f")
	_, err := pool.Exec(ctx, `CREATE TABLE written (v int)`)
	require.NoError(t, err)

	old, err := boundedOpen(t, l, params("f"))
	require.NoError(t, err)
	// The old writer stalls past its lease without renewing it; another
	// writer takes the intent over, and its Lookup cannot tell whether the
	// write landed: the intent stays open, claimed.
	p := params("f")
	p.Lookup = func(context.Context, ledger.Intent) (ledger.Landing, error) {
		return ledger.Landing{}, errors.New("catalog unreachable")
	}
	_, err = l.Open(ctx, p)
	require.ErrorIs(t, err, ledger.ErrUnresolved)
	txn, err := l.Get(ctx, old.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusOpen, txn.Status)
	require.Equal(t, int64(2), txn.Attempt, "taken over")

	require.ErrorIs(t, l.Renew(ctx, old), ledger.ErrFenced)
	require.ErrorIs(t, old.Alive(ctx), ledger.ErrFenced)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO written VALUES (1)`)
	require.NoError(t, err)
	_, err = l.CommitTxEnd(ctx, tx, old, ledger.Outcome{RowCount: 1})
	require.ErrorIs(t, err, ledger.ErrFenced)
	require.NoError(t, tx.Rollback(ctx))
	require.ErrorIs(t, l.Commit(ctx, old, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}), ledger.ErrFenced)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM written`).Scan(&n))
	require.Zero(t, n, "nothing of the fenced write is visible")
	ds, err := l.Dataset(ctx, "f")
	require.NoError(t, err)
	require.Zero(t, ds.RowCount)

	// The taker's own lease (from its claim) lapses too; the next Open
	// finds the write absent and aborts the intent.
	p.Lookup = absent
	next, err := boundedOpen(t, l, p)
	require.NoError(t, err)
	require.ErrorIs(t, l.Commit(ctx, old, ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}), ledger.ErrNotOpen)
	require.NoError(t, l.Commit(ctx, next, ledger.Outcome{RowCount: 2, CommittedAt: time.Now()}))
	require.Zero(t, advisoryLocks(t, pool))
}

// With renews the lease while fn runs, so a write longer than the lease
// keeps its dataset (another writer finds it busy, not dead) and commits;
// the renewals end with the call.
func TestWithRenewsLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const lease = 300 * time.Millisecond
	l, _ := newLedger(t, &ledger.Config{Liveness: ledger.LivenessLease, Lease: lease})
	ensure(t, l, "w")
	p := params("w")
	p.Lookup, p.NoWait = absent, true
	_, err := l.With(ctx, params("w"), func(ctx context.Context, in *ledger.Intent) (ledger.Outcome, error) {
		time.Sleep(3 * lease)
		_, err := l.Open(ctx, p)
		holder, busy := ledger.BusyHolder(err)
		require.True(t, busy, "a busy error: %v", err)
		require.Equal(t, in.ID, holder)
		time.Sleep(lease)
		return ledger.Outcome{RowCount: 1, CommittedAt: time.Now()}, nil
	})
	require.NoError(t, err, "the write outlived its first lease and still committed")
}
