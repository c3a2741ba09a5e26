package facade_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/apache/arrow-go/v18/arrow"
	"io/fs"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/internal/contract"
	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// TestMain gives the Examples a database in DATABASE_URL.
func TestMain(m *testing.M) { pgtest.MainWithDatabase(m, "DATABASE_URL") }

// faultCatalog wraps a real catalog and fails CommitTable on demand.
type faultCatalog struct {
	catalog.Catalog
	mu    sync.Mutex
	kind  map[string]error
	n     map[string]int
	land  map[string]bool // commit for real, then report unknown
	calls int
}

func (c *faultCatalog) fail(table string, kind error, n int, land bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kind[table], c.n[table], c.land[table] = kind, n, land
}

func (c *faultCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	name := ident[len(ident)-1]
	c.mu.Lock()
	c.calls++
	kind, n, land := c.kind[name], c.n[name], c.land[name]
	if n > 0 {
		c.n[name] = n - 1
	}
	c.mu.Unlock()
	if n <= 0 {
		return c.Catalog.CommitTable(ctx, ident, reqs, updates)
	}
	if errors.Is(kind, facade.ErrCommitConflict) {
		return nil, "", fmt.Errorf("%w: injected conflict", table.ErrCommitFailed)
	}
	if land {
		if _, _, err := c.Catalog.CommitTable(ctx, ident, reqs, updates); err != nil {
			return nil, "", err
		}
	}
	return nil, "", errors.New("injected: connection reset by peer")
}

type icebergEnv struct {
	f         *facade.Facade
	cat       *faultCatalog
	warehouse string
	mem       *memory.CheckedAllocator
}

func newIcebergEnv(t *testing.T, tune ...func(*facade.Config)) *icebergEnv {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	wh := t.TempDir()
	sqlcat, err := facade.OpenSQLCatalog(context.Background(), facade.CatalogConfig{DatabaseURL: pgtest.URL(t), Warehouse: wh})
	require.NoError(t, err)
	t.Cleanup(func() { sqlcat.Close() })
	fc := &faultCatalog{Catalog: sqlcat, kind: map[string]error{}, n: map[string]int{}, land: map[string]bool{}}
	cfg := &facade.Config{Allocator: mem, RetryMinWait: time.Millisecond, RetryMaxWait: 20 * time.Millisecond, CommitRetries: 6}
	for _, f := range tune {
		f(cfg)
	}
	f, err := facade.New(fc, cfg)
	require.NoError(t, err)
	return &icebergEnv{f: f, cat: fc, warehouse: wh, mem: mem}
}

func TestContract(t *testing.T) { contract.Run(t, contractEnv()) }

// TestContractParallelWriters runs the contract with three parallel file
// writers taking turns of 64 rows, so every contract case with more than
// one batch spreads its rows over several files.
func TestContractParallelWriters(t *testing.T) {
	contract.Run(t, contractEnv(func(c *facade.Config) { c.WriteWorkers, c.RowGroupRows = 3, 64 }))
}

func contractEnv(tune ...func(*facade.Config)) func(t *testing.T) *contract.Env {
	return func(t *testing.T) *contract.Env {
		pols := &contract.Policies{}
		e := newIcebergEnv(t, append(tune, func(c *facade.Config) { c.SchemaPolicyFor = pols.For })...)
		return &contract.Env{
			LH:       e.f,
			Mem:      e.mem,
			Policies: pols,
			FailCommits: func(id string, kind error, n int) {
				e.cat.fail(id, kind, n, false)
			},
		}
	}
}

// TestParallelWritersSameTable: the same rows written by one and by four
// writers make the same table contents (rows, identity, checksum); four
// writers make four files, and a write no larger than one turn makes one.
func TestParallelWritersSameTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc := contract.Schema()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	bs := contract.Batches(mem, sc, 0, 5000, 250, 5000)
	defer func() {
		for _, b := range bs {
			b.Release()
		}
	}()
	type result struct {
		files int
		sum   facade.Checksum
		rows  []string
	}
	write := func(workers, rowGroup int) result {
		e := newIcebergEnv(t, func(c *facade.Config) {
			c.Allocator, c.WriteWorkers, c.RowGroupRows = mem, workers, rowGroup
			facade.SetNow(c, func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) })
		})
		res, err := e.f.Write(ctx, facade.Target{DatasetID: "par"}, facade.WriteRequest{Mode: facade.Replace, Schema: sc, Rows: contract.Seq(bs)})
		require.NoError(t, err)
		require.EqualValues(t, 5000, res.Rows)
		sum, err := e.f.Checksum(ctx, "par", 0)
		require.NoError(t, err)
		require.Equal(t, res.Checksum, sum)
		var rows []string
		for rec, err := range e.f.Scan(ctx, "par", facade.ScanOptions{}) {
			require.NoError(t, err)
			for i := range int(rec.NumRows()) {
				var b strings.Builder
				for c := range int(rec.NumCols()) {
					fmt.Fprintf(&b, "%v|", rec.Column(c).GetOneForMarshal(i))
				}
				rows = append(rows, b.String())
			}
			rec.Release()
		}
		slices.Sort(rows)
		return result{files: len(res.DataFiles), sum: res.Checksum, rows: rows}
	}
	one := write(1, 1000)
	four := write(4, 1000)
	require.Equal(t, 1, one.files)
	require.Equal(t, 4, four.files)
	require.Equal(t, one.sum, four.sum)
	require.Equal(t, one.rows, four.rows)
	require.Len(t, four.rows, 5000)
	small := write(4, 5000)
	require.Equal(t, 1, small.files, "a write of one turn starts one writer")
}

// dataFiles lists the parquet files under the warehouse.
func dataFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".parquet") {
			out = append(out, p)
		}
		return nil
	}))
	return out
}

func referenced(t *testing.T, f *facade.Facade, dataset string) map[string]bool {
	t.Helper()
	tbl, err := f.LoadTable(context.Background(), dataset)
	require.NoError(t, err)
	out := map[string]bool{}
	if tbl.CurrentSnapshot() == nil {
		return out
	}
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	require.NoError(t, err)
	for _, task := range tasks {
		out[strings.TrimPrefix(task.File.FilePath(), "file://")] = true
	}
	return out
}

type arrowBatch = arrow.RecordBatch

func TestNoOrphansAfterFailures(t *testing.T) {
	t.Parallel()
	e := newIcebergEnv(t)
	defer e.mem.AssertSize(t, 0)
	ctx := context.Background()
	tgt := facade.Target{DatasetID: "orph"}
	bs := contract.Batches(e.mem, contract.Schema(), 0, 2000, 200, 2000)
	defer func() {
		for _, b := range bs {
			b.Release()
		}
	}()
	_, err := e.f.Write(ctx, tgt, facade.WriteRequest{Mode: facade.Replace, Schema: contract.Schema(), Rows: contract.Seq(bs)})
	require.NoError(t, err)
	// small files so a failure mid-stream has written complete files
	small, err := facade.New(e.cat, &facade.Config{Allocator: e.mem, TargetFileSize: 1, RowGroupRows: 100, CommitRetries: -1, WriteWorkers: 2})
	require.NoError(t, err)
	boom := errors.New("boom")
	failing := func(yield func(arrowBatch, error) bool) {
		for i, b := range bs {
			if i == 7 {
				yield(nil, boom)
				return
			}
			if !yield(b, nil) {
				return
			}
		}
	}
	_, err = small.Write(ctx, tgt, facade.WriteRequest{Mode: facade.Replace, Schema: contract.Schema(), Rows: failing})
	require.ErrorIs(t, err, boom)
	e.cat.fail("orph", facade.ErrCommitConflict, 1, false)
	_, err = small.Write(ctx, tgt, facade.WriteRequest{Mode: facade.Append, Schema: contract.Schema(), Rows: contract.Seq(bs)})
	require.ErrorIs(t, err, facade.ErrCommitConflict)
	ref := referenced(t, e.f, "orph")
	files := dataFiles(t, e.warehouse)
	require.NotEmpty(t, ref)
	for _, p := range files {
		require.True(t, ref[p], "orphan data file left behind: %s", p)
	}
	require.Len(t, files, len(ref))
}

func TestUnknownCommitThatLandedIsReconciled(t *testing.T) {
	t.Parallel()
	e := newIcebergEnv(t)
	defer e.mem.AssertSize(t, 0)
	ctx := context.Background()
	bs := contract.Batches(e.mem, contract.Schema(), 0, 100, 100, 100)
	defer bs[0].Release()
	e.cat.fail("landed", facade.ErrCommitStateUnknown, 1, true)
	res, err := e.f.Write(ctx, facade.Target{DatasetID: "landed"}, facade.WriteRequest{Mode: facade.Replace, Schema: contract.Schema(), Rows: contract.Seq(bs), TxnID: "t1"})
	require.NoError(t, err, "the write-id in the summary proves the commit landed")
	got, found, err := e.f.FindTxn(ctx, "landed", "t1")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, res.SnapshotID, got.SnapshotID)
}

func TestRetryOnConflictLands(t *testing.T) {
	t.Parallel()
	e := newIcebergEnv(t)
	defer e.mem.AssertSize(t, 0)
	ctx := context.Background()
	bs := contract.Batches(e.mem, contract.Schema(), 0, 100, 100, 100)
	defer bs[0].Release()
	_, err := e.f.Write(ctx, facade.Target{DatasetID: "retry"}, facade.WriteRequest{Mode: facade.Replace, Schema: contract.Schema(), Rows: contract.Seq(bs)})
	require.NoError(t, err)
	e.cat.fail("retry", facade.ErrCommitConflict, 2, false)
	res, err := e.f.Write(ctx, facade.Target{DatasetID: "retry"}, facade.WriteRequest{Mode: facade.Append, Schema: contract.Schema(), Rows: contract.Seq(bs)})
	require.NoError(t, err)
	require.EqualValues(t, 100, res.Rows)
	c, err := e.f.Checksum(ctx, "retry", 0)
	require.NoError(t, err)
	require.EqualValues(t, 200, c.Rows)
}

// TestWriteLeavesNoGoroutine: after Write returns (success, failing stream,
// cancelled context), no writer goroutine of the facade or of iceberg-go is
// left. Not parallel: it reads every goroutine's stack.
func TestWriteLeavesNoGoroutine(t *testing.T) {
	e := newIcebergEnv(t, func(c *facade.Config) { c.WriteWorkers, c.RowGroupRows = 3, 100 })
	defer e.mem.AssertSize(t, 0)
	sc := contract.Schema()
	bs := contract.Batches(e.mem, sc, 0, 1000, 100, 1000)
	defer func() {
		for _, b := range bs {
			b.Release()
		}
	}()
	writerStacks := func() string {
		buf := make([]byte, 1<<20)
		var found []string
		for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "lakewrite/facade.(*fileWorker)") || strings.Contains(g, "iceberg-go/table.") {
				found = append(found, g)
			}
		}
		return strings.Join(found, "\n\n")
	}
	settled := func(what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for writerStacks() != "" && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		require.Empty(t, writerStacks(), "writer goroutines left after %s", what)
	}
	ctx := context.Background()
	tgt := facade.Target{DatasetID: "goroutines"}
	seen := ""
	_, err := e.f.Write(ctx, tgt, facade.WriteRequest{Mode: facade.Replace, Schema: sc, Rows: func(yield func(arrowBatch, error) bool) {
		for i, b := range bs {
			if i == 5 {
				seen = writerStacks() // the detector sees the writers at work
			}
			if !yield(b, nil) {
				return
			}
		}
	}})
	require.NoError(t, err)
	require.Contains(t, seen, "(*fileWorker)")
	settled("a write")

	boom := errors.New("boom")
	_, err = e.f.Write(ctx, tgt, facade.WriteRequest{Mode: facade.Replace, Schema: sc, Rows: func(yield func(arrowBatch, error) bool) {
		for _, b := range bs[:5] {
			if !yield(b, nil) {
				return
			}
		}
		yield(nil, boom)
	}})
	require.ErrorIs(t, err, boom)
	settled("a failing stream")

	cctx, cancel := context.WithCancel(ctx)
	_, err = e.f.Write(cctx, tgt, facade.WriteRequest{Mode: facade.Replace, Schema: sc, Rows: func(yield func(arrowBatch, error) bool) {
		for i, b := range bs {
			if i == 4 {
				cancel()
			}
			if !yield(b, nil) {
				return
			}
		}
	}})
	require.ErrorIs(t, err, context.Canceled)
	settled("a cancelled write")
}
