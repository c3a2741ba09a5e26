package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestRun runs the whole program logic on a small table so it cannot rot.
// No timing assertions: the figures are for humans (see README.md).
func TestRun(t *testing.T) {
	const rows = 20_000
	url := pgtest.URL(t)
	warehouse := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	goroutines := runtime.NumGoroutine()

	cfg := config{Rows: rows, DatabaseURL: url, Warehouse: warehouse, Batch: 4096, Only: "all", WarmBackends: 2}
	rep, err := run(ctx, cfg)
	require.NoError(t, err)

	var names []string
	for _, p := range rep.Phases {
		names = append(names, p.Phase)
		assert.Equal(t, int64(rows), p.Rows, p.Phase)
		assert.Positive(t, p.RowsPerSec, p.Phase)
		assert.Positive(t, p.RatioVsCopy, p.Phase)
		assert.Positive(t, p.PeakHeap, p.Phase)
		assert.Positive(t, p.PeakRSS, p.Phase)
	}
	assert.Equal(t, []string{phaseCopy, phaseCursor, phaseE2E, phaseE2EBSS, phaseParquet, phaseNaive, phaseCopy2}, names)
	// bytes by column: the e2e output has the business and identity
	// columns, the naive one the business columns
	colNames := func(p *phaseResult) []string {
		var out []string
		for _, c := range p.Columns {
			assert.Positive(t, c.Bytes, c.Column)
			out = append(out, c.Column)
		}
		return out
	}
	business := []string{"id", "name", "amount", "ts", "flag", "attrs", "category"}
	assert.Equal(t, append(business, "__row_index", "__row_id", "__created_at"), colNames(rep.phase(phaseE2E)))
	assert.Equal(t, business, colNames(rep.phase(phaseNaive)))
	// e2e-bss wrote the same columns; its __row_index (BYTE_STREAM_SPLIT)
	// is smaller than the default PLAIN one.
	assert.Equal(t, colNames(rep.phase(phaseE2E)), colNames(rep.phase(phaseE2EBSS)))
	rowIndexBytes := func(p *phaseResult) int64 {
		for _, c := range p.Columns {
			if c.Column == "__row_index" {
				return c.Bytes
			}
		}
		return 0
	}
	assert.Less(t, rowIndexBytes(rep.phase(phaseE2EBSS)), rowIndexBytes(rep.phase(phaseE2E)))
	require.NotNil(t, rep.Seed, "a fresh database is seeded")
	require.NotNil(t, rep.E2E)
	assert.Equal(t, int64(rows), rep.E2E.Rows)
	assert.NotNil(t, rep.RatioTargetMet)
	// With the server on this machine its CPU is measured, and with it the
	// e2e CPU floor and the ceiling it allows.
	e2e, naive := rep.phase(phaseE2E), rep.phase(phaseNaive)
	if e2e.ServerCPU > 0 {
		assert.InDelta(t, (e2e.ClientCPU+e2e.ServerCPU)/float64(rep.Machine.CPUs), rep.E2EFloor, 1e-9)
		assert.InDelta(t, naive.Seconds/rep.E2EFloor, rep.E2ECeilingVsNaive, 1e-9)
		// and the context switches of both sides: streaming a result makes
		// the client wait for the server, and a backend waits for the
		// client's next statement between the write's round trips.
		require.NotNil(t, e2e.ServerSwitches)
		assert.Positive(t, e2e.ClientSwitches.Voluntary)
		assert.Positive(t, e2e.ServerSwitches.Voluntary)
	}

	var out bytes.Buffer
	printTable(&out, rep)
	assert.Contains(t, out.String(), "e2e")
	assert.Contains(t, out.String(), "COPY baseline")
	if rep.E2EFloor > 0 {
		assert.Contains(t, out.String(), "e2e CPU floor on")
		assert.Contains(t, out.String(), "e2e context switches per 1k rows: client ")
	}

	// The ledger committed the intent with the commit result.
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()

	// The seed left every page of the source table all-visible.
	var pages, visible int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT relpages, relallvisible FROM pg_class WHERE oid = $1::regclass`, sourceTable).Scan(&pages, &visible))
	assert.Positive(t, pages)
	assert.Equal(t, pages, visible, "all-visible pages of %s", sourceTable)
	led, err := ledger.New(pool, nil)
	require.NoError(t, err)
	txn, err := led.Get(ctx, rep.E2E.TxnID)
	require.NoError(t, err)
	assert.Equal(t, ledger.StatusCommitted, txn.Status)
	assert.Equal(t, int64(rows), txn.RowCount)
	assert.Equal(t, rep.E2E.SnapshotID, txn.SnapshotID)
	ds, err := led.Dataset(ctx, datasetID)
	require.NoError(t, err)
	assert.Equal(t, int64(rows), ds.RowCount)
	assert.Equal(t, "active", ds.Status)

	// The snapshot exists in the catalog, carries the txn id and the rows.
	cat, err := facade.OpenSQLCatalog(ctx, facade.CatalogConfig{DatabaseURL: url, Warehouse: warehouse})
	require.NoError(t, err)
	defer cat.Close()
	fac, err := facade.New(cat, nil)
	require.NoError(t, err)
	res, found, err := fac.FindTxn(ctx, datasetID, rep.E2E.TxnID)
	require.NoError(t, err)
	require.True(t, found, "snapshot of txn %s", rep.E2E.TxnID)
	assert.Equal(t, rep.E2E.SnapshotID, res.SnapshotID)
	assert.Equal(t, int64(rows), res.Rows)
	tbl, err := fac.LoadTable(ctx, datasetID)
	require.NoError(t, err)
	require.NotNil(t, tbl.CurrentSnapshot())
	assert.Equal(t, rep.E2E.SnapshotID, tbl.CurrentSnapshot().SnapshotID)
	var n int64
	for rec, err := range fac.Scan(ctx, datasetID, facade.ScanOptions{Columns: []string{"id"}}) {
		require.NoError(t, err)
		n += rec.NumRows()
	}
	assert.Equal(t, int64(rows), n)

	// A second run on the same database reuses the seeded table and writes
	// a new snapshot; -only selects one phase; -replaces replaces its
	// output again, here with files split into several scan tasks (a tiny
	// split size stands in for files over 128 MiB).
	cfg.Only, cfg.Replaces, cfg.RowGroupRows, cfg.NoEncodingBefore = phaseE2E, 2, 4096, true
	cfg.TableProps = map[string]string{"read.split.target-size": "1"}
	rep2, err := run(ctx, cfg)
	require.NoError(t, err)
	assert.Nil(t, rep2.Seed, "the seeded table is reused")
	require.Len(t, rep2.Phases, 3)
	assert.Equal(t, phaseE2E, rep2.Phases[0].Phase)
	assert.Equal(t, "replace-2", rep2.Phases[2].Phase)
	assert.Zero(t, rep2.Phases[0].RatioVsCopy, "no COPY phase, no ratio")
	assert.NotEqual(t, rep.E2E.TxnID, rep2.E2E.TxnID)
	require.NotNil(t, rep2.Replaces)
	assert.Greater(t, rep2.Replaces.ScanTasks, rep2.Replaces.DataFiles, "the files are split")

	// Nothing left running (the pool and catalog above are closed by defer;
	// allow for their goroutines and the pgtest cluster's).
	pool.Close()
	_ = cat.Close()
	// (testify's Eventually runs its condition in a goroutine of its own,
	// so poll by hand.)
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines: %d before, %d after:\n%s", goroutines, n, buf[:runtime.Stack(buf, true)])
	}
}

func TestBadFlags(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []config{
		{Rows: 0},
		{Rows: 10, Only: "nope"},
		{Rows: 10, Compression: "lzma"},
		{Rows: 10, Batch: -1},
		{Rows: 10, Replaces: -1},
	} {
		_, err := run(ctx, cfg)
		require.Error(t, err, "%+v", cfg)
		assert.False(t, strings.Contains(err.Error(), "connect"), "rejected before connecting: %v", err)
	}
}

// TestHistory runs the history mode on a few writes so it cannot rot.
func TestHistory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rs, err := runHistory(ctx, historyConfig{Writes: 6, Rows: 50, DatabaseURL: pgtest.URL(t), Warehouse: t.TempDir(),
		Modes: []string{"replace", "append"}})
	require.NoError(t, err)
	require.Len(t, rs, 2)
	assert.Equal(t, int64(50), rs[0].Rows)
	assert.Equal(t, int64(300), rs[1].Rows)
	for _, r := range rs {
		assert.Positive(t, r.FirstP50Ms)
		assert.Positive(t, r.Files)
		assert.Positive(t, r.MetadataBytes)
	}
	var out bytes.Buffer
	printHistory(&out, rs)
	assert.Contains(t, out.String(), "replace")
}

// TestDispatcherModes runs the small, incremental and delta modes (all on
// startArms) on a few rows so they cannot rot.
func TestDispatcherModes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t.Run("small", func(t *testing.T) {
		r, err := runSmall(ctx, smallConfig{Writes: 2, Rows: 20, DatabaseURL: pgtest.URL(t), Warehouse: t.TempDir()})
		require.NoError(t, err)
		require.Len(t, r.Arms, 2)
		for _, a := range r.Arms {
			assert.Equal(t, 2, a.Writes, a.Arm)
			assert.NotEmpty(t, a.Statements, a.Arm)
			assert.NotEmpty(t, a.Phases, a.Arm)
		}
	})
	t.Run("incremental", func(t *testing.T) {
		r, err := runIncremental(ctx, incConfig{Runs: 2, Rows: 300, Change: 10, DatabaseURL: pgtest.URL(t), Warehouse: t.TempDir()})
		require.NoError(t, err)
		require.Len(t, r.Arms, 5)
		require.Len(t, r.Floor, 3)
		for _, f := range r.Floor {
			assert.Positive(t, f.P50Seconds, f.Query)
		}
		for _, a := range r.Arms {
			assert.Positive(t, a.FullBytes, a.Mode+" "+a.Arm)
			assert.Positive(t, a.P50Bytes, a.Mode+" "+a.Arm)
			assert.NotEmpty(t, a.Phases, a.Mode+" "+a.Arm)
		}
	})
	t.Run("incremental-v3", func(t *testing.T) {
		_, err := runIncremental(ctx, incConfig{Runs: 1, Rows: 10, Change: 1, Format: 4})
		require.ErrorContains(t, err, "-incremental-format 4: want 2 or 3")
		wh := t.TempDir()
		r, err := runIncremental(ctx, incConfig{Runs: 1, Rows: 300, Change: 10, Format: 3, DatabaseURL: pgtest.URL(t), Warehouse: wh})
		require.NoError(t, err)
		assert.Equal(t, 3, r.Format)
		require.Len(t, r.Arms, 5)
		for _, a := range r.Arms {
			assert.Positive(t, a.P50Bytes, a.Mode+" "+a.Arm)
		}
		// A snapshot_replace run on a v3 table deletes by deletion vector
		// (Puffin), not by position delete file.
		var puffins int
		require.NoError(t, filepath.WalkDir(filepath.Join(wh, "lakewrite.db", "inc_snapshot_replace_iceberg"), func(p string, _ fs.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, ".puffin") {
				puffins++
			}
			return err
		}))
		assert.Positive(t, puffins)
	})
	t.Run("delta", func(t *testing.T) {
		rs, err := runDelta(ctx, deltaConfig{Runs: 2, Rows: []int{300}, Change: 10, DatabaseURL: pgtest.URL(t), Warehouse: t.TempDir()})
		require.NoError(t, err)
		require.Len(t, rs, 1)
		require.Len(t, rs[0].Arms, 3)
		for _, a := range rs[0].Arms {
			assert.Positive(t, a.P50Bytes, a.Arm)
			assert.Equal(t, int64(10), a.P50Rows, a.Arm)
			assert.NotEmpty(t, a.Phases, a.Arm)
		}
		assert.Equal(t, int64(10), rs[0].Arms[0].P50Read, "iceberg-delta reads the window's rows only")
		assert.Equal(t, int64(320), rs[0].Arms[1].P50Read, "iceberg-snapshot reads the whole upstream")
	})
}

// TestRefresh runs the refresh mode at a tiny size so it cannot rot: every
// line is printed, and the declared outputs refresh incrementally.
func TestRefresh(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := runRefresh(ctx, refreshConfig{Runs: 1, Rows: 2000, Change: 0, DimRows: 100, DimChange: 2, TrackRows: 100, TrackReps: 1})
	require.ErrorContains(t, err, "want at least 1 run")
	r, err := runRefresh(ctx, refreshConfig{Runs: 1, Warmup: 1, Rows: 2000, Change: 20, DimRows: 100, DimChange: 2, TrackRows: 500, TrackReps: 1,
		Crossover: true, Shares: []float64{0.5}, DatabaseURL: pgtest.URL(t), Warehouse: t.TempDir()})
	require.NoError(t, err)
	var out bytes.Buffer
	printRefresh(&out, r)
	text := out.String()
	t.Log("\n" + text)
	for _, shape := range refreshShapes {
		for _, src := range refreshSources {
			for _, changed := range []int{20, 0} {
				assert.Contains(t, text, fmt.Sprintf("REFRESH shape=%s source=%s rows=2000 changed=%d mode=", shape, src, changed))
			}
		}
	}
	for _, src := range refreshSources {
		assert.Contains(t, text, "REFRESH shape=join source="+src+" rows=2000 changed=2 mode=")
	}
	assert.Contains(t, text, "mode=incremental")
	// The warm-up run, apart from the measured one.
	assert.Regexp(t, `REFRESH shape=groupby source=relation rows=2000 changed=20 mode=\S+ run_ms=\S+ full_ms=\S+ pg_run_ms=\S+ first_ms=\d+\.\d pg_first_ms=\d+\.\d\n`, text)
	assert.Contains(t, text, "p50 of 1 runs after 1 warm-up run(s)")
	// Nothing changed: measured after a warm-up run too.
	assert.Regexp(t, `REFRESH shape=join source=rowstore rows=2000 changed=0 mode=\S+ run_ms=\S+ full_ms=\S+ pg_run_ms=\S+ first_ms=\d+\.\d pg_first_ms=\d+\.\d\n`, text)
	assert.Contains(t, text, "FLOOR shape=groupby source=iceberg rows=2000 changed=20 ")
	assert.Contains(t, text, "FLOOR shape=groupby source=relation rows=2000 changed=20 ")
	assert.Contains(t, text, "TRACKING insert_ratio=")
	for _, perRoundTrip := range []string{"1000", "1"} {
		assert.Regexp(t, `TRACKING insert_ratio=\S+ update_ratio=\S+ rows_per_statement=1 rows=500 statements_per_round_trip=`+perRoundTrip+` floor_insert_ratio=\d+\.\d+ floor_update_ratio=\d+\.\d+\n`, text)
	}
	assert.Regexp(t, `TRACKING insert_ratio=\S+ update_ratio=\S+ rows_per_statement=500 rows=500 statements_per_round_trip=1000\n`, text)
	assert.Contains(t, text, "(the least a trigger can record")
	assert.Contains(t, text, "CROSSOVER shape=groupby source=rowstore rows=2000 share=0.5 ")
	require.Len(t, r.Floor, 2)
	for _, f := range r.Floor {
		assert.Positive(t, f.GroupRows, f.Source)
		assert.LessOrEqual(t, f.GroupRows, int64(2000), f.Source)
	}
	assert.Positive(t, r.Floor[1].Pages)
	assert.LessOrEqual(t, r.Floor[1].Pages, r.Floor[1].TablePages)
	for _, l := range r.Lines {
		assert.Positive(t, l.RunMs, "%+v", l)
		assert.Positive(t, l.FullMs, "%+v", l)
		assert.Positive(t, l.PgRunMs, "%+v", l)
	}
}

// TestAutoSharedBuffers: a quarter of the memory, within 256MB and 4GB.
func TestAutoSharedBuffers(t *testing.T) {
	for _, c := range []struct {
		mem  int64
		want string
	}{{0, "256MB"}, {512 << 20, "256MB"}, {2 << 30, "512MB"}, {8 << 30, "2048MB"}, {24 << 30, "4096MB"}, {256 << 30, "4096MB"}} {
		assert.Equal(t, c.want, autoSharedBuffers(c.mem), "%d bytes", c.mem)
	}
	assert.Nil(t, refreshConfig{}.settings())
	assert.Equal(t, map[string]string{"shared_buffers": "1GB"}, refreshConfig{SharedBuffers: "1GB"}.settings())
	assert.Contains(t, refreshConfig{SharedBuffers: "auto"}.settings()["shared_buffers"], "MB")
}
