package writestrategy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// envMergeCrash: the child of TestMergeKilledBeforeLedgerCommit (its value
// is the warehouse; the database is envCrashURL's).
const envMergeCrash = "LAKEWRITE_MERGE_CRASH_WAREHOUSE"

// blockAtLedgerCommit is an Observer that stops the write when its ledger
// commit begins: the snapshot has landed, the intent is still open.
type blockAtLedgerCommit struct{}

func (blockAtLedgerCommit) PhaseStart(ctx context.Context, ev writestrategy.PhaseEvent) context.Context {
	if ev.Phase == writestrategy.PhaseLedgerCommit {
		fmt.Println(crashMarker)
		select {} // until SIGKILL
	}
	return ctx
}

func (blockAtLedgerCommit) PhaseEnd(context.Context, writestrategy.PhaseEvent) {}

func mergeDeploy(out string) writestrategy.Deploy {
	return writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "src", Target: out, Key: []string{"id"}}
}

// TestMergeCrashChild is the writer process of
// TestMergeKilledBeforeLedgerCommit; run by the test runner it does
// nothing.
func TestMergeCrashChild(t *testing.T) {
	wh := os.Getenv(envMergeCrash)
	if wh == "" {
		return
	}
	ctx := context.Background()
	url := os.Getenv(envCrashURL)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	cat, err := facade.OpenSQLCatalog(ctx, facade.CatalogConfig{DatabaseURL: url, Warehouse: wh})
	require.NoError(t, err)
	defer cat.Close()
	f, err := facade.New(cat, nil)
	require.NoError(t, err)
	l, err := ledger.New(pool, nil)
	require.NoError(t, err)
	flags, err := sink.NewFlags(pool, nil)
	require.NoError(t, err)
	res, err := sink.NewResolver(flags, nil)
	require.NoError(t, err)
	d, err := writestrategy.NewDispatcher(pool, &writestrategy.DispatchConfig{Ledger: l, Resolver: res, Lakehouse: f,
		Workspace: "test", Observer: blockAtLedgerCommit{}})
	require.NoError(t, err)
	_, err = d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: mergeDeploy("dst")})
	t.Fatalf("the merge returned instead of stopping at its ledger commit: %v", err)
}

// A merge killed between its Iceberg commit and its ledger commit: the
// next writer rolls the landed snapshot forward, and the table holds every
// key once, with the rows and checksum of the same merge that completed.
func TestMergeKilledBeforeLedgerCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	src := newMergeSource(t, w.pool, 2000)
	ensureOutputs(t, w.pool, "dst", "ref")
	w.iceberg("dst", "ref")
	w.mustWrite(mergeDeploy("dst"))
	w.mustWrite(mergeDeploy("ref"))
	src.change(30, 10, 5)
	ref := w.mustWrite(mergeDeploy("ref"))[0]

	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, os.Args[0], "-test.run=^TestMergeCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCrashURL+"="+w.pool.Config().ConnString(), envMergeCrash+"="+t.TempDir())
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	var out []string
	reached := false
	for sc := bufio.NewScanner(stdout); sc.Scan(); {
		if sc.Text() == crashMarker {
			reached = true
			break
		}
		out = append(out, sc.Text())
	}
	_ = cmd.Process.Kill()
	err = cmd.Wait()
	require.True(t, reached, "the child ended without reaching its ledger commit (%v)\n%s\n%s", err, strings.Join(out, "\n"), stderr.String())
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee))
	ws, ok := ee.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL)

	dead := openIntent(t, w, "dst")
	landed, ok, err := w.lake.FindTxn(ctx, "dst", dead.ID)
	require.NoError(t, err)
	require.True(t, ok, "the merge's snapshot landed")
	require.Equal(t, ref.Rows, landed.Rows)
	require.Equal(t, lakeChecksum(t, w, "ref"), lakeChecksum(t, w, "dst"))

	// The next write rolls the dead merge forward, then merges nothing new.
	next := w.mustWrite(mergeDeploy("dst"))[0]
	rolled, err := w.ledger.Get(ctx, dead.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusCommitted, rolled.Status)
	require.Equal(t, ref.Rows, rolled.RowCount)
	require.Equal(t, ref.Rows, next.Rows)
	require.Equal(t, ref.Rows, next.Preserved, "nothing changed since the landed merge")
	require.Equal(t, w.checksum("ref"), w.checksum("dst"))
	ids := rowIdentities(t, w.lake, "dst")
	require.Len(t, ids, int(ref.Rows), "every key once")
	var want []int64
	rows, err := w.pool.Query(ctx, `SELECT id FROM merge_src ORDER BY id`)
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		want = append(want, id)
	}
	require.NoError(t, rows.Err())
	var got []int64
	for id := range ids {
		got = append(got, id)
	}
	slices.Sort(got)
	require.Equal(t, want, got, "no key lost or added")
}
