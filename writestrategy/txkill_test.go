package writestrategy_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"

	"github.com/lakewrite/lakewrite/writestrategy"

	"github.com/lakewrite/lakewrite/sink"
)

// The one-transaction kill test: writer processes on the Postgres catalog
// are SIGKILLed at random moments of a loop of writes (appends to one
// dataset, split pairs to two others). After every kill, with no sweep and
// no reconciliation, the ledger and the tables must agree exactly.

const (
	envTxKillURL       = "LAKEWRITE_TXKILL_DATABASE_URL"
	envTxKillWarehouse = "LAKEWRITE_TXKILL_WAREHOUSE"
	txKillReady        = "LAKEWRITE-TXKILL-READY"
	txKillAppName      = "lakewrite-txkill-child"
)

var txKillSplit = writestrategy.Split{Source: "orders", Predicate: "amount >= $1", Args: []any{20}, Matched: "big", Unmatched: "small"}

func txKillStrategy(i int) writestrategy.WriteStrategy {
	if i%2 == 0 {
		return writestrategy.Deploy{Mode: writestrategy.KindAppendAlways, Source: "orders", Target: "out"}
	}
	return txKillSplit
}

// txKillFacade keeps every snapshot, so that every committed intent's
// snapshot can be found in the table's history.
func txKillFacade() *facade.Config {
	return &facade.Config{Lifecycle: facade.Lifecycle{Disabled: true}}
}

// requireHistoryAgrees is requireAgree over a table that keeps its whole
// history, with one table load: the set of transaction ids in the table's
// snapshots equals the set of the dataset's committed Iceberg intents, each
// with its snapshot id, and the ledger's row count is the table's.
func requireHistoryAgrees(t *testing.T, w *pgWorld, dataset, msg string) {
	t.Helper()
	ctx := context.Background()
	landed := map[string]int64{}
	tbl, err := w.f.LoadTable(ctx, dataset)
	if err == nil {
		for _, s := range tbl.Metadata().Snapshots() {
			if s.Summary != nil {
				if id := s.Summary.Properties[facade.SummaryTxnID]; id != "" {
					_, dup := landed[id]
					require.False(t, dup, "%s: two snapshots of intent %s", msg, id)
					landed[id] = s.SnapshotID
				}
			}
		}
	} else {
		require.ErrorIs(t, err, facade.ErrTableNotFound)
	}
	rows, err := w.pool.Query(ctx, `SELECT id::text, status, coalesce(snapshot_id, 0) FROM lakewrite.pipeline_build_transactions
		WHERE dataset_id = $1 AND sink = $2`, dataset, sink.Iceberg)
	require.NoError(t, err)
	committed := map[string]int64{}
	var id, status string
	var snap int64
	_, err = pgx.ForEachRow(rows, []any{&id, &status, &snap}, func() error {
		if status == "committed" {
			committed[id] = snap
		} else if _, ok := landed[id]; ok {
			return fmt.Errorf("%s intent %s has a snapshot", status, id)
		}
		return nil
	})
	require.NoError(t, err, msg)
	require.Equal(t, committed, landed, "%s: committed intents = snapshots in the table", msg)
	if len(committed) > 0 {
		ds, err := w.ledger.Dataset(ctx, dataset)
		require.NoError(t, err)
		sum, err := w.lake.Checksum(ctx, dataset, 0)
		require.NoError(t, err)
		require.Equal(t, ds.RowCount, sum.Rows, "%s: ledger row count = rows in the table", msg)
	}
}

// TestTxKillChild is the writer process of TestKillOneTransaction; run by
// the test runner it has nothing to do.
func TestTxKillChild(t *testing.T) {
	dbURL := os.Getenv(envTxKillURL)
	if dbURL == "" {
		return
	}
	w := newPGWorldOn(t, dbURL, os.Getenv(envTxKillWarehouse), txKillFacade(), nil)
	fmt.Println(txKillReady)
	for i := 0; ; i++ {
		_, err := w.write(txKillStrategy(i))
		require.NoError(t, err)
	}
}

func TestKillOneTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	target, minKills := 200, 30 // committed writes, kills
	if testing.Short() {
		target, minKills = 40, 5
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))

	w := newPGWorld(t, txKillFacade(), nil)
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 40)
	ensureOutputs(t, w.pool, "out", "big", "small")
	w.iceberg("out", "big", "small")
	u, err := url.Parse(w.pool.Config().ConnString())
	require.NoError(t, err)
	q := u.Query()
	q.Set("application_name", txKillAppName)
	u.RawQuery = q.Encode()
	childURL := u.String()

	committed := func(dataset string) (n int) {
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions
			WHERE dataset_id = $1 AND status = 'committed'`, dataset).Scan(&n))
		return n
	}
	kills, open := 0, 0
	for done := 0; done < target || kills < minKills; kills++ {
		delay := time.Duration(rng.IntN(700)) * time.Millisecond
		txKillChild(t, childURL, w.warehouse, delay)
		waitBackendsGone(t, w)
		msg := fmt.Sprintf("kill %d (after %s)", kills, delay)
		for _, ds := range []string{"out", "big", "small"} {
			requireHistoryAgrees(t, w, ds, msg+": "+ds)
		}
		// A split pair commits both outputs or neither.
		require.Equal(t, committed("big"), committed("small"), msg+": split pairs whole")
		if n := committed("out"); n > 0 {
			// No duplicate and no missing row: appends of 40 rows each.
			requireDenseRowIndex(t, w.f, "out", 40*n)
		}
		var o int
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE status = 'open'`).Scan(&o))
		if o > 0 {
			open++
		}
		done = committed("out") + committed("big")
	}
	t.Logf("%d kills, %d writes committed, %d kills left an intent open", kills, committed("out")+committed("big"), open)
	// The next writer reconciles what the last kill left and writes.
	for i := range 2 {
		w.mustWrite(txKillStrategy(i))
	}
	for _, ds := range []string{"out", "big", "small"} {
		requireHistoryAgrees(t, w, ds, "after the kills")
	}
	var o int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE status = 'open'`).Scan(&o))
	require.Zero(t, o)
}

// txKillChild starts a writer process, lets it write for delay after it
// is ready, and SIGKILLs it.
func txKillChild(t *testing.T, dbURL, warehouse string, delay time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestTxKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envTxKillURL+"="+dbURL, envTxKillWarehouse+"="+warehouse)
	out := &watchWriter{marker: txKillReady, ready: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var werr error
	select {
	case <-out.ready:
		select {
		case <-time.After(delay):
			_ = cmd.Process.Kill()
			werr = <-exited
		case werr = <-exited:
		}
	case werr = <-exited:
	}
	ee, ok := werr.(*exec.ExitError)
	require.True(t, ok, "child: %v\n%s", werr, out.String())
	ws, ok := ee.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL,
		"the child ended by itself (%v): a write failed\n%s", werr, out.String())
}

// watchWriter collects a child's output and closes ready when marker
// appears.
type watchWriter struct {
	marker string
	ready  chan struct{}
	mu     sync.Mutex
	buf    strings.Builder
	seen   bool
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.seen && strings.Contains(w.buf.String(), w.marker) {
		w.seen = true
		close(w.ready)
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// waitBackendsGone waits until the killed child's server sessions ended,
// so that nothing it sent is still being committed while the test reads.
func waitBackendsGone(t *testing.T, w *pgWorld) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var n int
		require.NoError(t, w.pool.QueryRow(context.Background(),
			`SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, txKillAppName).Scan(&n))
		if n == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "the killed child's sessions did not end")
		time.Sleep(20 * time.Millisecond)
	}
}
