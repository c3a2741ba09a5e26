package sliceriver_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/internal/slicetest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
	"github.com/lakewrite/lakewrite/writestrategy/sliced/sliceriver"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const writer = "pipeline.output"

// Environment of a worker process (TestHelperWorker) and of a
// coordinator process (TestHelperCoordinator).
const (
	envWorker  = "LAKEWRITE_SLICERIVER_WORKER" // "1": run as a worker process
	envDB      = "LAKEWRITE_SLICERIVER_DB"
	envWH      = "LAKEWRITE_SLICERIVER_WAREHOUSE"
	envHang    = "LAKEWRITE_SLICERIVER_HANG"        // slice index that hangs after its first batch
	envHold    = "LAKEWRITE_SLICERIVER_HOLD"        // a path: every slice waits, before its first batch, until it exists
	envWorkers = "LAKEWRITE_SLICERIVER_MAX_WORKERS" // slices run at once (default 4)
	envLeader  = "LAKEWRITE_SLICERIVER_LEADER"      // "0": no leader election
	envRescue  = "LAKEWRITE_SLICERIVER_RESCUE"      // RescueStuckJobsAfter

	envCoordinator = "LAKEWRITE_SLICERIVER_COORDINATOR" // "1": run as a coordinator process
	envWrite       = "LAKEWRITE_SLICERIVER_WRITE"       // the coordinator's write: "output source slices"
)

// coordinatorApp is the application_name of a coordinator process's
// connections.
const coordinatorApp = "sliceriver_test_coordinator"

// world is a database, a warehouse, a Dispatcher whose slices run on
// River workers in other processes (river), one whose slices run in this
// process (local), and the worker processes.
type world struct {
	t         *testing.T
	url       string
	pool      *pgxpool.Pool
	f         *facade.Facade
	l         *ledger.Ledger
	res       *sink.Resolver
	warehouse string
	client    *river.Client[pgx.Tx]
	coord     *sliceriver.Coordinator
	// obs, when set, observes the writes of dispatcher.
	obs writestrategy.Observer
}

func newWorld(t *testing.T) *world { return newWorldOn(t, pgtest.URL(t), t.TempDir()) }

// newWorldOn is the world of the database url and the warehouse (a
// coordinator process joins the test's).
func newWorldOn(t *testing.T, url, warehouse string) *world {
	t.Helper()
	ctx := context.Background()
	w := &world{t: t, url: url, warehouse: warehouse}
	var err error
	w.pool, err = pgxpool.New(ctx, w.url)
	require.NoError(t, err)
	t.Cleanup(w.pool.Close)
	require.NoError(t, sliceriver.Migrate(ctx, w.pool, ""))
	cat, err := facade.NewPostgresCatalog(ctx, w.pool, facade.CatalogConfig{Warehouse: w.warehouse})
	require.NoError(t, err)
	w.f, err = facade.New(cat, &facade.Config{Lifecycle: facade.Lifecycle{Disabled: true}})
	require.NoError(t, err)
	w.l, err = ledger.New(w.pool, nil)
	require.NoError(t, err)
	flags, err := sink.NewFlags(w.pool, nil)
	require.NoError(t, err)
	require.NoError(t, flags.SetWriter(ctx, sink.WriterFlags{WriterID: writer, Default: sink.Iceberg, Max: sink.Iceberg}))
	w.res, err = sink.NewResolver(flags, nil)
	require.NoError(t, err)
	// An insert-only client: it is never started.
	w.client, err = river.NewClient(riverpgxv5.New(w.pool), &river.Config{Logger: quiet()})
	require.NoError(t, err)
	w.coord, err = sliceriver.NewCoordinator(sliceriver.CoordinatorConfig{Client: w.client, DB: w.pool, MaxAttempts: 2, Poll: 50 * time.Millisecond})
	require.NoError(t, err)
	return w
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func (w *world) dispatcher(onRiver bool) *writestrategy.Dispatcher {
	cfg := &writestrategy.DispatchConfig{Ledger: w.l, Resolver: w.res, Lakehouse: w.f, Workspace: "test",
		Cursor: &cursor.Options{BatchSize: 512}, SliceDeadline: 2 * time.Minute, Observer: w.obs}
	if onRiver {
		cfg.StageSlices = w.coord.Stage
	}
	d, err := writestrategy.NewDispatcher(w.pool, cfg)
	require.NoError(w.t, err)
	return d
}

// write writes s in n slices, on River workers when onRiver.
func (w *world) write(ctx context.Context, s writestrategy.WriteStrategy, n int, onRiver bool) (writestrategy.WriteResult, error) {
	for _, out := range s.Outputs() {
		_, err := w.l.EnsureDataset(context.Background(), out, out, nil)
		require.NoError(w.t, err)
	}
	res, err := w.dispatcher(onRiver).Write(ctx, writestrategy.Request{WriterID: writer, Strategy: s, Slices: n})
	if err != nil {
		return writestrategy.WriteResult{}, err
	}
	require.Len(w.t, res, 1)
	return res[0], nil
}

func (w *world) checksum(id string) facade.Checksum {
	w.t.Helper()
	c, err := w.f.Checksum(context.Background(), id, 0)
	require.NoError(w.t, err)
	return c
}

func (w *world) head(id string) int64 {
	w.t.Helper()
	tbl, err := w.f.LoadTable(context.Background(), id)
	require.NoError(w.t, err)
	if s := tbl.CurrentSnapshot(); s != nil {
		return s.SnapshotID
	}
	return 0
}

// proc is a worker process (this test binary running TestHelperWorker)
// or a coordinator process (TestHelperCoordinator).
type proc struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan struct{}
	once  sync.Once
}

// startWorker starts a worker process with the extra environment env.
func (w *world) startWorker(env ...string) *proc {
	w.t.Helper()
	p := w.start("TestHelperWorker", append([]string{envWorker + "=1", envDB + "=" + w.url}, env...))
	p.await("ready")
	return p
}

// startCoordinator starts a coordinator process that writes output from
// source in n slices on River through a Dispatcher, its connections
// named coordinatorApp; it prints "writing" before the write.
func (w *world) startCoordinator(output, source string, n int) *proc {
	w.t.Helper()
	url := w.url + "?application_name=" + coordinatorApp
	if strings.Contains(w.url, "?") {
		url = w.url + "&application_name=" + coordinatorApp
	}
	return w.start("TestHelperCoordinator", []string{envCoordinator + "=1", envDB + "=" + url,
		envWrite + "=" + fmt.Sprintf("%s %s %d", output, source, n)})
}

// start runs the test helper in a process of its own with the extra
// environment env.
func (w *world) start(helper string, env []string) *proc {
	w.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$", "-test.count=1", "-test.v=false")
	cmd.Env = append(os.Environ(), envWH+"="+w.warehouse)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(w.t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(w.t, err)
	require.NoError(w.t, cmd.Start())
	p := &proc{t: w.t, cmd: cmd, stdin: stdin, lines: make(chan string, 16), done: make(chan struct{})}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	go func() { _ = cmd.Wait(); close(p.done) }()
	w.t.Cleanup(p.stop)
	return p
}

// await waits for the process to print line.
func (p *proc) await(line string) {
	p.t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case l, ok := <-p.lines:
			require.True(p.t, ok, "process exited before printing %q", line)
			if l == line {
				return
			}
			p.t.Logf("process %d: %s", p.cmd.Process.Pid, l)
		case <-timeout:
			p.t.Fatalf("process did not print %q", line)
		}
	}
}

// stop stops the process: its River client stops when stdin closes; the
// process is killed if it does not exit.
func (p *proc) stop() {
	p.once.Do(func() {
		_ = p.stdin.Close()
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
}

// kill kills the process (SIGKILL) and waits for it.
func (p *proc) kill() {
	p.once.Do(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
}

// TestHelperWorker is not a test: it is the body of a worker process
// (startWorker), run when the environment says so. It runs a River
// client with the slice Worker until its stdin closes.
func TestHelperWorker(t *testing.T) {
	if os.Getenv(envWorker) != "1" {
		return
	}
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(os.Getenv(envDB))
	require.NoError(t, err)
	cfg.MaxConns = 12
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	cat, err := facade.NewPostgresCatalog(ctx, pool, facade.CatalogConfig{Warehouse: os.Getenv(envWH)})
	require.NoError(t, err)
	f, err := facade.New(cat, &facade.Config{Lifecycle: facade.Lifecycle{Disabled: true}})
	require.NoError(t, err)
	wcfg := sliceriver.WorkerConfig{Lake: f, DB: pool, Cursor: &cursor.Options{BatchSize: 512}}
	if path := os.Getenv(envHold); path != "" {
		wcfg.Wrap = func(index int, rows iter.Seq2[arrow.RecordBatch, error]) iter.Seq2[arrow.RecordBatch, error] {
			return func(yield func(arrow.RecordBatch, error) bool) {
				// The slice has imported the snapshot and not read a batch.
				fmt.Println("hold")
				for {
					if _, err := os.Stat(path); err == nil {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				for rec, err := range rows {
					if !yield(rec, err) {
						return
					}
				}
			}
		}
	}
	if h := os.Getenv(envHang); h != "" {
		hang, err := strconv.Atoi(h)
		require.NoError(t, err)
		wcfg.Wrap = func(index int, rows iter.Seq2[arrow.RecordBatch, error]) iter.Seq2[arrow.RecordBatch, error] {
			if index != hang {
				return rows
			}
			return func(yield func(arrow.RecordBatch, error) bool) {
				for rec, err := range rows {
					if !yield(rec, err) {
						return
					}
					fmt.Println("hang")
					select {} // until killed
				}
			}
		}
	}
	maxWorkers := 4
	if m := os.Getenv(envWorkers); m != "" {
		maxWorkers, err = strconv.Atoi(m)
		require.NoError(t, err)
	}
	workers := river.NewWorkers()
	rcfg := &river.Config{Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}}, Workers: workers,
		FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 200 * time.Millisecond, Logger: quiet(),
		LeaderElectionDisabled: os.Getenv(envLeader) == "0"}
	if r := os.Getenv(envRescue); r != "" {
		// Jobs are stuck after both the worker's timeout and
		// RescueStuckJobsAfter (which must be at least JobTimeout).
		d, err := time.ParseDuration(r)
		require.NoError(t, err)
		wcfg.Timeout, rcfg.RescueStuckJobsAfter, rcfg.JobTimeout = d, d, d
	}
	wk, err := sliceriver.NewWorker(wcfg)
	require.NoError(t, err)
	river.AddWorker(workers, wk)
	client, err := river.NewClient(riverpgxv5.New(pool), rcfg)
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	require.NoError(t, client.Stop(sctx))
}

// TestHelperCoordinator is not a test: it is the body of a coordinator
// process (startCoordinator), run when the environment says so. It
// writes through a Dispatcher whose slices run on River, and prints the
// outcome.
func TestHelperCoordinator(t *testing.T) {
	if os.Getenv(envCoordinator) != "1" {
		return
	}
	w := newWorldOn(t, os.Getenv(envDB), os.Getenv(envWH))
	var (
		out, src string
		n        int
	)
	_, err := fmt.Sscan(os.Getenv(envWrite), &out, &src, &n)
	require.NoError(t, err)
	fmt.Println("writing")
	res, err := w.write(context.Background(), transform(out, src), n, true)
	fmt.Println("written", res.Slices, err)
}

// requireNoGoroutines fails unless, within 10 seconds, no goroutine of
// lakewrite or River (but the test's own) is left running.
func requireNoGoroutines(t *testing.T) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		left := ours()
		if len(left) == 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("goroutines left running:\n%s", strings.Join(left, "\n\n"))
		}
	}
}

type tableRow = slicetest.Row

func (w *world) seedRowStore(id string, n int) { slicetest.SeedRowStore(w.t, w.pool, w.l, id, n) }

func (w *world) seedTable(id, table string, n int) { slicetest.SeedTable(w.t, w.pool, id, table, n) }

func transform(out, src string) writestrategy.Transform { return slicetest.Transform(out, src) }

// table reads a dataset's rows in __row_index order.
func (w *world) table(id string) []tableRow { return slicetest.Table(w.t, w.f, id) }

func (w *world) requireSameRows(a, b []tableRow, sameIdentity bool) {
	w.t.Helper()
	slicetest.RequireSameRows(w.t, a, b, sameIdentity)
}

func (w *world) dataFiles() []string { return slicetest.DataFiles(w.t, w.warehouse) }
