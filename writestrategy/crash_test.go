package writestrategy_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/facadetest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// The crash tests run one Dispatcher.Write in a child process (this test
// binary again, running only TestCrashChild), stop it at a fault point of
// the facade and SIGKILL it there: no deferred cleanup, no abort, its
// connections simply drop. The parent then checks what the next writer of
// the dataset makes of what the dead one left.

// crashMarker is the line the child prints when it reached the fault point.
const crashMarker = "LAKEWRITE-CRASH-POINT"

// Environment of the child.
const (
	envCrashURL       = "LAKEWRITE_CRASH_DATABASE_URL"
	envCrashWarehouse = "LAKEWRITE_CRASH_WAREHOUSE"
	envCrashDataset   = "LAKEWRITE_CRASH_DATASET"
	envCrashKind      = "LAKEWRITE_CRASH_KIND"
	envCrashPoint     = "LAKEWRITE_CRASH_POINT"
	envCrashAfterRows = "LAKEWRITE_CRASH_AFTER_ROWS"
	// envCrashLoop: the child writes in a loop with the most aggressive
	// lifecycle (maintenance after every write) until it is killed.
	envCrashLoop = "LAKEWRITE_CRASH_LOOP"
)

// aggressiveLifecycle runs maintenance after every commit, keeps one
// snapshot and deletes what expiry dereferenced at the next run.
var aggressiveLifecycle = facade.Lifecycle{KeepLast: 1, EveryCommits: 1, FileGrace: -1, OrphanEvery: -1, CompactMinFiles: 2}

// crashSpec is the write the child makes and where it dies.
type crashSpec struct {
	url       string // database of the ledger, the row store and the catalog
	warehouse string // warehouse of the child's facade
	dataset   string
	kind      writestrategy.Kind
	point     facadetest.Point
	afterRows int64 // for facadetest.MidStream
	// loop > 0: the child writes in a loop (maintenance after every write)
	// and is killed this long after its first write, wherever it is.
	loop time.Duration
}

// crashStrategy is the strategy of a kind writing output from the row-store
// dataset "orders"; parent and child build the same one.
func crashStrategy(kind writestrategy.Kind, output string) writestrategy.WriteStrategy {
	switch kind {
	case writestrategy.KindTransform:
		return writestrategy.Transform{Output: output, Source: "orders", Steps: []writestrategy.Step{
			{Name: "f", SQL: `SELECT id, upper(name) AS name, amount, category, ts FROM source`}}}
	case writestrategy.KindAppendAlways:
		return writestrategy.Deploy{Mode: writestrategy.KindAppendAlways, Source: "orders", Target: output}
	case writestrategy.KindAppendNew, writestrategy.KindSnapshotReplace:
		return writestrategy.Deploy{Mode: kind, Source: "orders", Target: output, Key: []string{"id"}}
	}
	panic("crash test: no strategy for kind " + string(kind))
}

// TestCrashChild is the writer process of the crash tests. Run by the test
// runner (no LAKEWRITE_CRASH_DATABASE_URL), it has nothing to do. Run by
// crashWriter, it builds its own pool, ledger, facade and dispatcher on
// the parent's database and warehouse, writes, and at the fault point
// prints crashMarker and blocks until it is killed.
func TestCrashChild(t *testing.T) {
	url := os.Getenv(envCrashURL)
	if url == "" {
		return // not a child: see crashWriter
	}
	ctx := context.Background()
	spec := crashSpec{url: url, warehouse: os.Getenv(envCrashWarehouse), dataset: os.Getenv(envCrashDataset),
		kind: writestrategy.Kind(os.Getenv(envCrashKind)), point: facadetest.Point(os.Getenv(envCrashPoint))}
	if s := os.Getenv(envCrashAfterRows); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		require.NoError(t, err)
		spec.afterRows = n
	}
	pool, err := pgxpool.New(ctx, spec.url)
	require.NoError(t, err)
	defer pool.Close()
	cat, err := facade.OpenSQLCatalog(ctx, facade.CatalogConfig{DatabaseURL: spec.url, Warehouse: spec.warehouse})
	require.NoError(t, err)
	defer cat.Close()
	loop := os.Getenv(envCrashLoop) != ""
	var fc *facade.Config
	if loop {
		fc = &facade.Config{Lifecycle: aggressiveLifecycle}
	}
	f, err := facade.New(cat, fc)
	require.NoError(t, err)
	l, err := ledger.New(pool, nil)
	require.NoError(t, err)
	flags, err := sink.NewFlags(pool, nil)
	require.NoError(t, err)
	res, err := sink.NewResolver(flags, nil)
	require.NoError(t, err)
	if loop {
		d, err := writestrategy.NewDispatcher(pool, &writestrategy.DispatchConfig{Ledger: l, Resolver: res, Lakehouse: f, Workspace: "test"})
		require.NoError(t, err)
		for i := 0; ; i++ {
			_, err := d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: crashStrategy(spec.kind, spec.dataset)})
			require.NoError(t, err)
			if i == 0 {
				fmt.Println(crashMarker)
			}
		}
	}
	stop := func(ctx context.Context) error {
		fmt.Println(crashMarker) // the test binary's stdout is the parent's pipe
		<-ctx.Done()             // the write's context never ends: wait for SIGKILL
		return context.Cause(ctx)
	}
	lh := facadetest.Wrap(f, facadetest.Fault{Point: spec.point, Dataset: spec.dataset, AfterRows: spec.afterRows, Times: 1, Do: stop})
	d, err := writestrategy.NewDispatcher(pool, &writestrategy.DispatchConfig{Ledger: l, Resolver: res, Lakehouse: lh, Workspace: "test"})
	require.NoError(t, err)
	_, err = d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: crashStrategy(spec.kind, spec.dataset)})
	t.Fatalf("the write returned instead of stopping at %s: %v", spec.point, err)
}

// crashWriter runs spec's write in a child process and SIGKILLs the child
// as soon as it reports that it reached spec.point. It returns once the
// child is dead.
func crashWriter(t *testing.T, spec crashSpec) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		envCrashURL+"="+spec.url, envCrashWarehouse+"="+spec.warehouse, envCrashDataset+"="+spec.dataset,
		envCrashKind+"="+string(spec.kind), envCrashPoint+"="+string(spec.point),
		envCrashAfterRows+"="+strconv.FormatInt(spec.afterRows, 10))
	if spec.loop > 0 {
		cmd.Env = append(cmd.Env, envCrashLoop+"=1")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
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
	if reached && spec.loop > 0 {
		time.Sleep(spec.loop)
	}
	_ = cmd.Process.Kill() // SIGKILL: the child dies at the point, as a crashed writer does
	err = cmd.Wait()
	require.True(t, reached, "the child ended without reaching %s (%v)\nstdout:\n%s\nstderr:\n%s",
		spec.point, err, strings.Join(out, "\n"), stderr.String())
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	ws, ok := ee.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "child ended with %v", err)
}

// openIntent returns the dataset's open intent: the one a crashed writer
// left.
func openIntent(t *testing.T, w *world, dataset string) ledger.Txn {
	t.Helper()
	ctx := context.Background()
	var id string
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT id::text FROM lakewrite.pipeline_build_transactions
		WHERE dataset_id = $1 AND status = 'open'`, dataset).Scan(&id))
	txn, err := w.ledger.Get(ctx, id)
	require.NoError(t, err)
	return txn
}

// requireSameDataset compares what commits stamped on two datasets' rows.
func requireSameDataset(t *testing.T, want, got ledger.Dataset, msg string) {
	t.Helper()
	require.Equal(t, want.RowCount, got.RowCount, msg+": row_count")
	require.JSONEq(t, string(want.Schema), string(got.Schema), msg+": schema")
	require.Equal(t, want.Sink, got.Sink, msg+": sink")
	require.Equal(t, want.Status, got.Status, msg+": status")
}

// lakeChecksum is the checksum of a dataset's Iceberg table, whatever the
// ledger says of the dataset yet.
func lakeChecksum(t *testing.T, w *world, dataset string) facade.Checksum {
	t.Helper()
	c, err := w.lake.Checksum(context.Background(), dataset, 0)
	require.NoError(t, err)
	return c
}

// timedWrite is one Dispatcher.Write of strategy and how long it took.
func timedWrite(d *writestrategy.Dispatcher, s writestrategy.WriteStrategy) ([]writestrategy.WriteResult, time.Duration, error) {
	start := time.Now()
	res, err := d.Write(context.Background(), writestrategy.Request{WriterID: writer, Strategy: s})
	return res, time.Since(start), err
}

// A writer killed after its Iceberg commit and before its ledger commit:
// the next write of the dataset, by a dispatcher with the default config
// (no sweeper, RecoverAfter 15 minutes), rolls the dead writer's intent
// forward at once, exactly as a normal commit would have stamped it, and
// writes on top without duplicating anything. Each case is compared with a
// reference dataset given the same writes normally.
func TestKillAfterIcebergCommit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		kind  writestrategy.Kind
		prior bool // the dataset was written once before the crash
		// aggressive: the parent's writes run the most aggressive
		// lifecycle (maintenance after every write, one snapshot kept).
		aggressive bool
	}{
		{"transform", writestrategy.KindTransform, true, false},
		{"append_new", writestrategy.KindAppendNew, true, false},
		{"append_always", writestrategy.KindAppendAlways, true, false},
		{"snapshot_replace", writestrategy.KindSnapshotReplace, true, false},
		{"new_dataset", writestrategy.KindTransform, false, false},
		{"transform_aggressive_retention", writestrategy.KindTransform, true, true},
		{"append_always_aggressive_retention", writestrategy.KindAppendAlways, true, true},
		{"append_new_aggressive_retention", writestrategy.KindAppendNew, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var fc *facade.Config
			if c.aggressive {
				fc = &facade.Config{Lifecycle: aggressiveLifecycle}
			}
			w := newWorldWith(t, nil, fc, nil, nil)
			seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 300)
			ensureOutputs(t, w.pool, "out", "ref")
			w.iceberg("out", "ref")
			write := func(output string) writestrategy.WriteResult {
				return w.mustWrite(crashStrategy(c.kind, output))[0]
			}
			if c.prior {
				write("out")
				write("ref")
			}
			// The crashed write's input differs from the prior one, so an
			// append adds rows and a replace changes the table.
			seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 600)
			ref1 := write("ref")
			refDS1, err := w.ledger.Dataset(ctx, "ref")
			require.NoError(t, err)

			crashWriter(t, crashSpec{url: w.pool.Config().ConnString(), warehouse: t.TempDir(),
				dataset: "out", kind: c.kind, point: facadetest.AfterCommit})
			dead := openIntent(t, w, "out")
			landed, ok, err := w.lake.FindTxn(ctx, "out", dead.ID)
			require.NoError(t, err)
			require.True(t, ok, "the dead writer's snapshot landed")
			require.Equal(t, lakeChecksum(t, w, "ref"), lakeChecksum(t, w, "out"), "the table holds what one write gives")

			// A dispatcher with the default config meets the dead writer's
			// intent. Its own write is stopped before staging, so that the
			// dataset row shows what the roll-forward alone stamped.
			probe := errors.New("probe: stop before staging")
			d, err := writestrategy.NewDispatcher(w.pool, &writestrategy.DispatchConfig{Ledger: w.ledger, Resolver: w.resolver,
				Lakehouse: facadetest.Wrap(w.lake, facadetest.Fault{Point: facadetest.BeforeStage, Times: 1, Err: probe}),
				Workspace: "test"})
			require.NoError(t, err)
			_, took, err := timedWrite(d, crashStrategy(c.kind, "out"))
			require.ErrorIs(t, err, probe, "the next writer got past the dead writer's intent (after %s)", took)
			require.Less(t, took, 20*time.Second)
			rolled, err := w.ledger.Get(ctx, dead.ID)
			require.NoError(t, err)
			require.Equal(t, ledger.StatusCommitted, rolled.Status, "rolled forward")
			require.Equal(t, ref1.Rows, rolled.RowCount)
			require.Equal(t, landed.SnapshotID, rolled.SnapshotID)
			require.True(t, rolled.CommittedAt.Equal(landed.CommittedAt), "committed_at = the snapshot's time")
			ds, err := w.ledger.Dataset(ctx, "out")
			require.NoError(t, err)
			requireSameDataset(t, refDS1, ds, "after the roll-forward")
			require.True(t, ds.SourceWatermark.Equal(rolled.CommittedAt), "watermark = committed_at of the rolled-forward intent")

			// The next write goes through and duplicates nothing.
			res, took, err := timedWrite(d, crashStrategy(c.kind, "out"))
			require.NoError(t, err)
			require.Less(t, took, 20*time.Second)
			ref2 := write("ref")
			require.Equal(t, ref2.Rows, res[0].Rows)
			require.Equal(t, ref2.Skipped, res[0].Skipped)
			require.Equal(t, ref2.Preserved, res[0].Preserved)
			require.Equal(t, w.checksum("ref"), w.checksum("out"))
			refDS2, err := w.ledger.Dataset(ctx, "ref")
			require.NoError(t, err)
			ds, err = w.ledger.Dataset(ctx, "out")
			require.NoError(t, err)
			requireSameDataset(t, refDS2, ds, "after the next write")
			require.True(t, ds.SourceWatermark.Equal(res[0].CommittedAt))
		})
	}
}

// A writer killed in the middle of its stream: nothing is visible; the next
// write of the dataset aborts the dead writer's intent at once and writes.
func TestKillMidStream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 300)
	ensureOutputs(t, w.pool, "out")
	w.iceberg("out")
	copyOrders := writestrategy.Transform{Output: "out", Source: "orders"}
	first := w.mustWrite(copyOrders)[0]
	before := w.checksum("out")
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 600)

	crashWriter(t, crashSpec{url: w.pool.Config().ConnString(), warehouse: t.TempDir(),
		dataset: "out", kind: writestrategy.KindTransform, point: facadetest.MidStream, afterRows: 100})
	dead := openIntent(t, w, "out")
	_, ok, err := w.lake.FindTxn(ctx, "out", dead.ID)
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, before, w.checksum("out"), "table unchanged")
	last, ok, err := w.lake.FindTxn(ctx, "out", first.TxnID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, first.SnapshotID, last.SnapshotID)

	res, took, err := timedWrite(w.d, copyOrders)
	require.NoError(t, err, "the next write (after %s)", took)
	require.Less(t, took, 20*time.Second)
	aborted, err := w.ledger.Get(ctx, dead.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusAborted, aborted.Status)
	require.Equal(t, int64(600), res[0].Rows)
	require.Equal(t, w.checksum("orders"), w.checksum("out"))
}

// A live writer that is slow (blocked mid-stream, in this process) keeps
// its dataset even when its intent is older than another dispatcher's
// RecoverAfter: the other writer waits and gets an error matching ledger.ErrBusy, and
// sweeps nothing. Once unblocked, the slow writer ends cleanly.
func TestLiveSlowWriterNotSwept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 300)
	ensureOutputs(t, w.pool, "out")
	w.iceberg("out")
	copyOrders := writestrategy.Transform{Output: "out", Source: "orders"}
	first := w.mustWrite(copyOrders)[0]
	before := w.checksum("out")

	reached := make(chan struct{})
	slow := facadetest.Wrap(w.lake, facadetest.Fault{Point: facadetest.MidStream, Dataset: "out", AfterRows: 100, Times: 1,
		Do: func(ctx context.Context) error {
			close(reached)
			<-ctx.Done()
			return context.Cause(ctx)
		}})
	dA, err := writestrategy.NewDispatcher(w.pool, &writestrategy.DispatchConfig{Ledger: w.ledger, Resolver: w.resolver, Lakehouse: slow, Workspace: "test"})
	require.NoError(t, err)
	ctxA, cancelA := context.WithCancelCause(ctx)
	doneA := make(chan error, 1)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancelA below: the slow writer ends before the test does
	defer cancelA(nil)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := dA.Write(ctxA, writestrategy.Request{WriterID: writer, Strategy: copyOrders})
		doneA <- err
	}()
	select {
	case err := <-doneA:
		t.Fatalf("the slow writer ended before its fault point: %v", err)
	case <-reached:
	}
	held := openIntent(t, w, "out")
	time.Sleep(300 * time.Millisecond) // the intent is now older than B's RecoverAfter

	lB, err := ledger.New(w.pool, &ledger.Config{WaitTimeout: time.Second})
	require.NoError(t, err)
	dB, err := writestrategy.NewDispatcher(w.pool, &writestrategy.DispatchConfig{Ledger: lB, Resolver: w.resolver, Lakehouse: w.lake,
		Workspace: "test", RecoverAfter: 200 * time.Millisecond})
	require.NoError(t, err)
	_, errB := dB.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: copyOrders})
	require.ErrorIs(t, errB, ledger.ErrBusy, "the second writer waits for the live one")
	require.ErrorContains(t, errB, held.ID)
	still, err := w.ledger.Get(ctx, held.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusOpen, still.Status, "not swept")
	require.Equal(t, held.Attempt, still.Attempt, "not claimed by a sweeper")

	stop := errors.New("unblocked by the test")
	cancelA(stop)
	select {
	case err := <-doneA:
		require.ErrorIs(t, err, stop)
	case <-time.After(time.Minute):
		t.Fatal("the slow writer did not end after its context was cancelled")
	}
	ended, err := w.ledger.Get(ctx, held.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusAborted, ended.Status)
	require.Equal(t, before, w.checksum("out"), "table unchanged")
	last, ok, err := w.lake.FindTxn(ctx, "out", first.TxnID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, first.SnapshotID, last.SnapshotID)
	w.mustWrite(copyOrders)
}

// Writers killed at arbitrary moments of a loop of appends, each followed
// by maintenance under the most aggressive lifecycle (the kill often lands
// inside expiry, file deletion or compaction): after every kill the table
// reads back whole, and the next writer, with the same aggressive policy,
// reconciles whatever was left open within seconds and writes; rows,
// row indices and the ledger's row count agree.
func TestKillDuringMaintenance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorldWith(t, nil, &facade.Config{Lifecycle: aggressiveLifecycle}, nil, nil)
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 50)
	ensureOutputs(t, w.pool, "out")
	w.iceberg("out")
	appendOrders := crashStrategy(writestrategy.KindAppendAlways, "out")
	w.mustWrite(appendOrders)
	warehouse := t.TempDir()
	for i, delay := range []time.Duration{150 * time.Millisecond, 400 * time.Millisecond, 700 * time.Millisecond, 1100 * time.Millisecond, 1600 * time.Millisecond} {
		crashWriter(t, crashSpec{url: w.pool.Config().ConnString(), warehouse: warehouse, dataset: "out",
			kind: writestrategy.KindAppendAlways, loop: delay})
		// The table is readable as it is.
		sum := lakeChecksum(t, w, "out")
		require.Positive(t, sum.Rows, "kill %d", i)
		res, took, err := timedWrite(w.d, appendOrders)
		require.NoError(t, err, "kill %d: the next write (after %s)", i, took)
		require.Less(t, took, 20*time.Second)
		ds, err := w.ledger.Dataset(ctx, "out")
		require.NoError(t, err)
		sum = lakeChecksum(t, w, "out")
		require.Equal(t, ds.RowCount, sum.Rows, "kill %d: ledger row count = rows in the table", i)
		require.Zero(t, sum.Rows%50, "kill %d: whole appends only", i)
		require.True(t, ds.SourceWatermark.Equal(res[0].CommittedAt), "kill %d", i)
		requireDenseRowIndex(t, w.lake.(*facade.Facade), "out", int(sum.Rows))
		var open int
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions
			WHERE dataset_id = 'out' AND status = 'open'`).Scan(&open))
		require.Zero(t, open, "kill %d", i)
	}
}
