package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/embedded"
	"github.com/lakewrite/lakewrite/ledger"

	"github.com/lakewrite/lakewrite/sink"
)

const (
	sourceTable = "bench_source"
	datasetID   = "bench_output"
	naiveTable  = "bench_naive" // the naive phase's table, outside the ledger
	writerID    = "pipeline.output"
	// seedMark is stored as the source table's comment, so a later run on
	// the same database reuses a table of the same shape and size.
	seedMark = "lakewrite-bench v1 rows="
	// query is the measured query of every phase.
	query = `SELECT id, name, amount, ts, flag, attrs, category FROM ` + sourceTable
)

// Phase names, in the order "all" runs them.
const (
	phaseCopy    = "copy"
	phaseCursor  = "cursor"
	phaseE2E     = "e2e"
	phaseParquet = "parquet"
	phaseNaive   = "naive"
	phaseCopy2   = "copy-again"
)

// Targets of the end-to-end write against COPY, at 5M rows.
const (
	targetVsNaive = 1.25
	targetRSSByte = 160 << 20
)

// config is what the flags set.
type config struct {
	Rows         int64
	DatabaseURL  string
	TCP          bool // the throwaway cluster is reached over TCP loopback
	Warehouse    string
	Batch        int    // cursor.Options.BatchSize; 0 = cursor default
	Only         string // copy|cursor|e2e|parquet|naive|all
	RowGroupRows int    // facade.Config.RowGroupRows and the plain Parquet writer's; 0 = facade default
	WriteQueue   int    // facade.Config.WriteQueue; 0 = facade default
	// WarmBackends is how many pool connections scan the source table
	// before the phases (see warmBackends); 0 = none.
	WarmBackends int
	WriteWorkers int    // facade.Config.WriteWorkers; 0 = facade default
	Compression  string // facade.Config.Compression and the plain Parquet writer's; "" = zstd
	// CompressionLevel is the codec level of the output table
	// (write.parquet.compression-level) and of the plain Parquet writer;
	// 0 = the codec's default.
	CompressionLevel int
	// TableProps are extra table properties of the e2e output table
	// (facade.Config.TableProperties), e.g. write.parquet.page-size-bytes.
	TableProps map[string]string
	Reseed     bool // seed even when a table of the right size exists
	// Replaces is how many more times the e2e phase's output is replaced
	// after the e2e phase (phases replace-1 .. replace-N); 0 = none.
	Replaces int
	// NoEncodingBefore skips phase e2e-bss (see rowIndexEncodingBefore).
	NoEncodingBefore bool
	CPUProfile       string
	MemProfile       string
	Log              io.Writer // progress lines; nil = discard
}

func (c *config) phases() ([]string, error) {
	switch c.Only {
	case "", "all":
		return []string{phaseCopy, phaseCursor, phaseE2E, phaseParquet, phaseNaive, phaseCopy2}, nil
	}
	var out []string
	for p := range strings.SplitSeq(c.Only, ",") {
		switch p {
		case phaseCopy, phaseCursor, phaseE2E, phaseParquet, phaseNaive:
			out = append(out, p)
		default:
			return nil, fmt.Errorf("-only %q: want copy, cursor, e2e, parquet, naive (comma-separated) or all", c.Only)
		}
	}
	return out, nil
}

// tuning describes the tuning flags (defaults spelled out).
func (c *config) tuning() string {
	def := func(v int, d string) string {
		if v == 0 {
			return d
		}
		return strconv.Itoa(v)
	}
	comp := c.Compression
	if comp == "" {
		comp = "zstd"
	}
	out := fmt.Sprintf("batch=%s row-group-rows=%s write-queue=%s write-workers=%s compression=%s level=%s warm-backends=%d",
		def(c.Batch, "default"), def(c.RowGroupRows, "default"), def(c.WriteQueue, "default"), def(c.WriteWorkers, "default"),
		comp, def(c.CompressionLevel, "default"), c.WarmBackends)
	for _, k := range slices.Sorted(maps.Keys(c.TableProps)) {
		out += " " + k + "=" + c.TableProps[k]
	}
	return out
}

// phaseResult is one measured phase.
type phaseResult struct {
	Phase      string  `json:"phase"`
	Rows       int64   `json:"rows"`
	Seconds    float64 `json:"seconds"`
	RowsPerSec float64 `json:"rows_per_sec"`
	// RatioVsCopy is RowsPerSec over the COPY baseline of the same run
	// (0 when no COPY phase ran).
	RatioVsCopy float64 `json:"ratio_vs_copy,omitempty"`
	// PeakRSS is VmHWM after the phase. PeakRSSScope is "phase" when the
	// peak was reset before the phase (so it is this phase's own), else
	// "process" (the peak of the process so far).
	PeakRSS      int64  `json:"peak_rss_bytes"`
	PeakRSSScope string `json:"peak_rss_scope"`
	// PeakHeap is the highest Go heap (live and unswept objects) sampled
	// every 10 ms during the phase.
	PeakHeap uint64 `json:"peak_heap_bytes"`
	// OutBytes is what the phase wrote: data file bytes (e2e), Parquet bytes
	// (parquet), COPY bytes are not counted.
	OutBytes int64 `json:"out_bytes,omitempty"`
	// ClientCPU is this process's user+system CPU seconds during the phase.
	// ServerCPU is the CPU seconds of the database's backends during the
	// phase (0 when the server is not on this machine). On a shared machine
	// these are steadier than rows/s.
	ClientCPU float64 `json:"client_cpu_seconds"`
	ServerCPU float64 `json:"server_cpu_seconds,omitempty"`
	// Idle is the share of the machine's CPU time (all CPUs, /proc/stat)
	// that was idle during the phase: with client and server on the same
	// cores, CPU left unused by a pipeline that waits on itself.
	Idle float64 `json:"machine_idle_share"`
	// Stages is the client CPU by stage (decode, stamp/hash, encode, ...)
	// from an in-process CPU profile of the phase; empty with -cpuprofile.
	Stages []stageCPU `json:"cpu_by_stage,omitempty"`
	// ClientSwitches and ServerSwitches are the context switches of this
	// process and of the database's backends during the phase (server: nil
	// when it is not on this machine). Each is a thread that stopped: to
	// wait (voluntary) or because another took its CPU (involuntary).
	ClientSwitches ctxSwitches  `json:"client_context_switches"`
	ServerSwitches *ctxSwitches `json:"server_context_switches,omitempty"`
	// Columns is the compressed bytes per column of what the phase wrote
	// (e2e and naive: the Iceberg column sizes of the snapshot's files).
	Columns []columnBytes `json:"bytes_by_column,omitempty"`
}

// e2eResult identifies what the end-to-end phase committed.
type e2eResult struct {
	DatasetID  string    `json:"dataset_id"`
	TxnID      string    `json:"txn_id"`
	SnapshotID int64     `json:"snapshot_id"`
	Rows       int64     `json:"rows"`
	DataFiles  int       `json:"data_files"`
	Bytes      int64     `json:"data_file_bytes"`
	Committed  time.Time `json:"committed_at"`
}

// report is the outcome of a run (the -json output).
type report struct {
	Rows    int64         `json:"rows"`
	Config  string        `json:"config"` // the tuning flags in effect
	Machine machine       `json:"machine"`
	Seed    *phaseResult  `json:"seed,omitempty"`
	Phases  []phaseResult `json:"phases"`
	// CopyBaseline is the COPY rows/s the ratios divide by: all COPY rows
	// over all COPY seconds of this run (both COPY phases under "all").
	CopyBaseline   float64    `json:"copy_baseline_rows_per_sec,omitempty"`
	ProcessPeakRSS int64      `json:"process_peak_rss_bytes"`
	E2E            *e2eResult `json:"e2e,omitempty"`
	// E2EVsNaive is the e2e phase's rows/s over the naive phase's (0 when
	// either did not run).
	E2EVsNaive float64 `json:"e2e_vs_naive,omitempty"`
	// E2EFloor is the fewest seconds the e2e phase could have taken on this
	// machine at the CPU it spent: (client + server CPU) / CPUs, the work of
	// a pipeline that kept every CPU busy. E2ECeilingVsNaive is naive's
	// seconds over that floor: the highest e2e/naive ratio this machine
	// allows without cutting CPU per row. Both are 0 when the server's CPU
	// was not measured (a server on another host).
	E2EFloor          float64 `json:"e2e_cpu_floor_seconds,omitempty"`
	E2ECeilingVsNaive float64 `json:"e2e_ceiling_vs_naive,omitempty"`
	// Targets: nil when not measured in this run. The ratio target is e2e
	// rows/s against naive's; CPUTargetMet, e2e client CPU below naive's.
	RatioTargetMet *bool `json:"ratio_target_met,omitempty"`
	CPUTargetMet   *bool `json:"cpu_target_met,omitempty"`
	RSSTargetMet   *bool `json:"rss_target_met,omitempty"`
	// Replaces: what -replaces found after its last replace.
	Replaces *replaceResult `json:"replaces,omitempty"`
}

type machine struct {
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPUModel   string `json:"cpu_model,omitempty"`
	MemTotal   int64  `json:"mem_total_bytes,omitempty"`
	Go         string `json:"go"`
	Postgres   string `json:"postgres"`
	Embedded   bool   `json:"embedded_cluster"`
}

func (r *report) phase(name string) *phaseResult {
	for i := range r.Phases {
		if r.Phases[i].Phase == name {
			return &r.Phases[i]
		}
	}
	return nil
}

// bench holds a run's environment.
type bench struct {
	cfg config
	fc  *facade.Config // the facade's config
	env *embedded.Env
	log io.Writer
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.log, "bench: "+format+"\n", args...)
}

// run seeds the source table and measures the selected phases. It starts
// the embedded default (throwaway cluster when cfg.DatabaseURL is empty) and
// closes it before returning.
func run(ctx context.Context, cfg config) (_ *report, err error) {
	if cfg.Rows <= 0 {
		return nil, fmt.Errorf("-rows %d: want > 0", cfg.Rows)
	}
	if cfg.Batch < 0 || cfg.RowGroupRows < 0 || cfg.WriteQueue < 0 || cfg.WriteWorkers < 0 || cfg.WarmBackends < 0 || cfg.Replaces < 0 {
		return nil, errors.New("-batch, -row-group-rows, -write-queue, -write-workers, -warm-backends and -replaces must not be negative")
	}
	if _, err := codec(cfg.Compression); err != nil {
		return nil, err
	}
	phases, err := cfg.phases()
	if err != nil {
		return nil, err
	}
	b := &bench{cfg: cfg, log: cfg.Log}
	if b.log == nil {
		b.log = io.Discard
	}
	b.logf("starting the embedded default (DATABASE_URL set: %t)", cfg.DatabaseURL != "")
	fc := &facade.Config{
		RowGroupRows: cfg.RowGroupRows,
		WriteQueue:   cfg.WriteQueue,
		WriteWorkers: cfg.WriteWorkers,
		Compression:  cfg.Compression,
	}
	fc.TableProperties = iceberg.Properties{}
	maps.Copy(fc.TableProperties, cfg.TableProps)
	if cfg.CompressionLevel != 0 {
		fc.TableProperties[table.ParquetCompressionLevelKey] = strconv.Itoa(cfg.CompressionLevel)
	}
	b.fc = fc
	b.env, err = embedded.Start(ctx, embedded.Options{
		DatabaseURL: cfg.DatabaseURL,
		Warehouse:   cfg.Warehouse,
		Facade:      fc,
		TCP:         cfg.TCP,
	})
	if err != nil {
		return nil, err
	}
	defer b.env.Close()

	rep := &report{Rows: cfg.Rows, Config: cfg.tuning(), Machine: describeMachine()}
	rep.Machine.Embedded = b.env.Started
	if err := b.env.Pool.QueryRow(ctx, `SHOW server_version`).Scan(&rep.Machine.Postgres); err != nil {
		return nil, err
	}
	if rep.Seed, err = b.seed(ctx); err != nil {
		return nil, err
	}
	if err := b.warmBackends(ctx, cfg.WarmBackends); err != nil {
		return nil, err
	}

	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
		defer pprof.StopCPUProfile()
	}

	for _, name := range phases {
		if err := context.Cause(ctx); err != nil {
			return nil, err
		}
		b.logf("phase %s", name)
		var fn func(context.Context) (int64, int64, error)
		switch name {
		case phaseCopy, phaseCopy2:
			fn = b.copyBinary
		case phaseCursor:
			fn = b.cursorOnly
		case phaseE2E:
			fn = func(ctx context.Context) (int64, int64, error) {
				res, err := b.endToEnd(ctx)
				if err != nil {
					return 0, 0, err
				}
				rep.E2E = res
				return res.Rows, res.Bytes, nil
			}
			if err := b.prepareDataset(ctx); err != nil {
				return nil, err
			}
		case phaseParquet:
			fn = b.plainParquet
		case phaseNaive:
			fn = b.naiveIceberg
		}
		pr, err := b.measure(ctx, name, fn)
		if err != nil {
			return nil, fmt.Errorf("phase %s: %w", name, err)
		}
		if pr.Rows != cfg.Rows {
			return nil, fmt.Errorf("phase %s: %d rows, want %d", name, pr.Rows, cfg.Rows)
		}
		var ident table.Identifier
		switch name {
		case phaseE2E:
			ident, err = b.env.Facade.TableIdentifier(datasetID)
		case phaseNaive:
			ident = table.Identifier{"lakewrite", naiveTable}
		}
		if err != nil {
			return nil, err
		}
		if ident != nil {
			if pr.Columns, err = tableColumnBytes(ctx, b.env.Catalog, ident); err != nil {
				return nil, fmt.Errorf("phase %s: column sizes: %w", name, err)
			}
		}
		rep.Phases = append(rep.Phases, pr)
		b.logf("phase %s: %.0f rows/s", name, pr.RowsPerSec)
		if name == phaseE2E && cfg.Replaces > 0 {
			if err := b.replaceAgain(ctx, cfg.Replaces, rep); err != nil {
				return nil, err
			}
		}
		if name == phaseE2E && !cfg.NoEncodingBefore {
			if err := b.rowIndexEncodingBefore(ctx, rep); err != nil {
				return nil, err
			}
		}
	}
	var copyRows int64
	var copySecs float64
	for _, p := range rep.Phases {
		if p.Phase == phaseCopy || p.Phase == phaseCopy2 {
			copyRows += p.Rows
			copySecs += p.Seconds
		}
	}
	if copySecs > 0 {
		rep.CopyBaseline = float64(copyRows) / copySecs
		for i := range rep.Phases {
			rep.Phases[i].RatioVsCopy = rep.Phases[i].RowsPerSec / rep.CopyBaseline
		}
	}
	if e, n := rep.phase(phaseE2E), rep.phase(phaseNaive); e != nil && n != nil && n.RowsPerSec > 0 {
		rep.E2EVsNaive = e.RowsPerSec / n.RowsPerSec
		ok, cpu := rep.E2EVsNaive >= targetVsNaive, e.ClientCPU < n.ClientCPU
		rep.RatioTargetMet, rep.CPUTargetMet = &ok, &cpu
		if e.ServerCPU > 0 && rep.Machine.CPUs > 0 {
			rep.E2EFloor = (e.ClientCPU + e.ServerCPU) / float64(rep.Machine.CPUs)
			rep.E2ECeilingVsNaive = n.Seconds / rep.E2EFloor
		}
	}
	if p := rep.phase(phaseE2E); p != nil && p.PeakRSSScope == "phase" {
		ok := p.PeakRSS <= targetRSSByte
		rep.RSSTargetMet = &ok
	}
	// The per-phase resets lower VmHWM: the process peak is the highest
	// phase peak (seeding is server-side and not counted).
	rep.ProcessPeakRSS = procStatusKB("VmHWM")
	for _, p := range rep.Phases {
		rep.ProcessPeakRSS = max(rep.ProcessPeakRSS, p.PeakRSS)
	}
	if cfg.MemProfile != "" {
		if err := writeMemProfile(cfg.MemProfile); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

func writeMemProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	runtime.GC()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}

// measure runs fn as one phase: peak RSS reset, heap sampled, wall time,
// client and server CPU. fn returns the rows it read and the bytes it wrote.
func (b *bench) measure(ctx context.Context, name string, fn func(context.Context) (int64, int64, error)) (phaseResult, error) {
	scope := "process"
	if resetPeakRSS() {
		scope = "phase"
	}
	srv0 := b.serverProcs(ctx)
	hs := startHeapSampler(10 * time.Millisecond)
	var sp stageProfile
	if b.cfg.CPUProfile == "" && name != phaseCopy && name != phaseCopy2 {
		if err := sp.start(); err != nil {
			return phaseResult{}, fmt.Errorf("stage profile: %w", err)
		}
	}
	cpu0, cs0 := processUsage()
	idle0, all0 := machineIdle()
	start := time.Now()
	rows, out, err := fn(ctx)
	secs := time.Since(start).Seconds()
	cpu1, cs1 := processUsage()
	cpu, cs := cpu1-cpu0, cs1.sub(cs0)
	idle1, all1 := machineIdle()
	heap := hs.stop()
	stages, perr := sp.stop()
	if err != nil {
		return phaseResult{}, err
	}
	if perr != nil {
		return phaseResult{}, fmt.Errorf("stage profile: %w", perr)
	}
	pr := phaseResult{
		Phase: name, Rows: rows, Seconds: secs, RowsPerSec: float64(rows) / secs,
		PeakRSS: procStatusKB("VmHWM"), PeakRSSScope: scope, PeakHeap: heap, OutBytes: out,
		ClientCPU: cpu.Seconds(), Stages: stages, ClientSwitches: cs,
	}
	if all1 > all0 {
		pr.Idle = float64(idle1-idle0) / float64(all1-all0)
	}
	if srv0 != nil {
		if srv1 := b.serverProcs(ctx); srv1 != nil {
			var (
				d  time.Duration
				sw ctxSwitches
			)
			for pid, p := range srv1 {
				// A backend started during the phase counts from 0.
				d += p.cpu - srv0[pid].cpu
				sw = sw.add(p.switches.sub(srv0[pid].switches))
			}
			pr.ServerCPU, pr.ServerSwitches = d.Seconds(), &sw
		}
	}
	return pr, nil
}

// machineIdle returns the idle (idle + iowait) and total CPU ticks of the
// machine, all CPUs together, from /proc/stat (0, 0 where it is missing).
func machineIdle() (idle, all uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, 0
	}
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0
		}
		if i == 8 || i == 9 { // guest time is already counted in user time
			continue
		}
		all += n
		if i == 3 || i == 4 {
			idle += n
		}
	}
	return idle, all
}

// procCounters is what the bench reads of a server process.
type procCounters struct {
	cpu      time.Duration
	switches ctxSwitches
}

// serverProcs returns the CPU time and context switches of each client
// backend of the database when the server runs on this machine (nil
// otherwise): read from /proc/<pid>/ of the backends pg_stat_activity
// lists.
func (b *bench) serverProcs(ctx context.Context) map[int]procCounters {
	rows, err := b.env.Pool.Query(ctx, `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND backend_type = 'client backend'`)
	if err != nil {
		return nil
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil
	}
	out := map[int]procCounters{}
	for _, pid := range pids {
		cmd, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/cmdline")
		if err != nil || !strings.HasPrefix(string(cmd), "postgres") {
			continue // not local, or gone
		}
		t, ok1 := pidCPU(int(pid))
		sw, ok2 := pidCtxSwitches(int(pid))
		if ok1 && ok2 {
			out[int(pid)] = procCounters{t, sw}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// seed creates and fills the source table unless a table of the same shape
// and size is already there.
func (b *bench) seed(ctx context.Context) (*phaseResult, error) {
	pool := b.env.Pool
	mark := seedMark + strconv.FormatInt(b.cfg.Rows, 10)
	var have *string
	if err := pool.QueryRow(ctx, `SELECT obj_description(to_regclass($1), 'pg_class')`, sourceTable).Scan(&have); err != nil {
		return nil, fmt.Errorf("look for %s: %w", sourceTable, err)
	}
	if have != nil && *have == mark && !b.cfg.Reseed {
		b.logf("reusing %s (%d rows); warming the cache", sourceTable, b.cfg.Rows)
		if _, err := pool.Exec(ctx, `SELECT count(*) FROM `+sourceTable); err != nil {
			return nil, err
		}
		return nil, b.checkAllVisible(ctx)
	}
	b.logf("seeding %d rows into %s", b.cfg.Rows, sourceTable)
	start := time.Now()
	stmts := []string{
		`DROP TABLE IF EXISTS ` + sourceTable,
		`CREATE TABLE ` + sourceTable + ` (
			id bigint, name text, amount numeric(12,2), ts timestamptz,
			flag bool, attrs jsonb, category text)`,
		// attrs is ~60 bytes of jsonb text; category has 4 values.
		`INSERT INTO ` + sourceTable + `
		SELECT g, 'name-' || g, ((g % 1000000) / 100.0)::numeric(12,2),
		       timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second',
		       g % 3 = 0,
		       jsonb_build_object('k', g, 'tag', 'abcdefghij', 'v', g % 7, 'note', 'xyzxyzxyz'),
		       (ARRAY['red', 'green', 'blue', 'black'])[g % 4 + 1]
		FROM generate_series(1, ` + strconv.FormatInt(b.cfg.Rows, 10) + `) g`,
		`VACUUM (FREEZE, ANALYZE) ` + sourceTable,
		`COMMENT ON TABLE ` + sourceTable + ` IS '` + mark + `'`,
		`RESET synchronous_commit`,
	}
	// The insert commits synchronously (the embedded cluster commits
	// asynchronously): VACUUM marks a page all-visible only once the
	// inserting commit is flushed, so otherwise the table's state, and with
	// it the server's cost per row in every phase, would depend on the WAL
	// writer's timing.
	stmts = append([]string{`SET synchronous_commit TO on`}, stmts...)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return nil, fmt.Errorf("seed: %w", err)
		}
	}
	if err := b.checkAllVisible(ctx); err != nil {
		return nil, err
	}
	secs := time.Since(start).Seconds()
	return &phaseResult{Phase: "seed", Rows: b.cfg.Rows, Seconds: secs, RowsPerSec: float64(b.cfg.Rows) / secs}, nil
}

// warmBackends scans the source table once on each of n distinct pool
// connections, so that every phase reads through a server process that
// has read the table before, as the connections of a long-lived pool have.
// A backend's first pass over the table costs it much more server CPU than
// its later ones (on the machines we measured, ~0.5 s more per million rows,
// spent on the first load of each tuple's header in shared memory), and
// only the phases that hold two connections at once (e2e: the ledger's hold
// and the cursor's) would otherwise get a fresh backend.
func (b *bench) warmBackends(ctx context.Context, n int) error {
	var conns []*pgxpool.Conn
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := b.env.Pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("warm the pool: %w", err)
		}
		conns = append(conns, c)
		// The phases' statement, as COPY: the backend itself (no parallel
		// workers) reads and sends every value; the client drops the bytes.
		if _, err := copyDiscard(ctx, c); err != nil {
			return fmt.Errorf("warm the pool: %w", err)
		}
	}
	return nil
}

// checkAllVisible reports a source table whose pages are not all marked
// all-visible: every phase then checks each row's visibility on the server
// (and the first sets hint bits, writing pages out), so phases would not
// read the same table. A table seeded by an older bench gets VACUUM FREEZE;
// when that cannot mark every page either, the run goes on with a warning.
func (b *bench) checkAllVisible(ctx context.Context) error {
	var pages, visible int64
	q := `SELECT relpages, relallvisible FROM pg_catalog.pg_class WHERE oid = pg_catalog.to_regclass($1)`
	if err := b.env.Pool.QueryRow(ctx, q, sourceTable).Scan(&pages, &visible); err != nil {
		return fmt.Errorf("inspect %s: %w", sourceTable, err)
	}
	if visible >= pages {
		return nil
	}
	b.logf("%s: %d of %d pages all-visible; VACUUM (FREEZE)", sourceTable, visible, pages)
	if _, err := b.env.Pool.Exec(ctx, `VACUUM (FREEZE, ANALYZE) `+sourceTable); err != nil {
		return err
	}
	if err := b.env.Pool.QueryRow(ctx, q, sourceTable).Scan(&pages, &visible); err != nil {
		return fmt.Errorf("inspect %s: %w", sourceTable, err)
	}
	if visible < pages {
		b.logf("warning: %s: only %d of %d pages all-visible after VACUUM (FREEZE) (a transaction open elsewhere holds them back); the server's cost per row may differ between phases",
			sourceTable, visible, pages)
	}
	return nil
}

// copyBinary is the baseline: COPY (query) TO STDOUT (FORMAT binary) read
// by pgx and discarded.
func (b *bench) copyBinary(ctx context.Context) (int64, int64, error) {
	conn, err := b.env.Pool.Acquire(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Release()
	n, err := copyDiscard(ctx, conn)
	return n, 0, err
}

// copyDiscard runs the phases' statement on conn as COPY ... TO STDOUT
// (FORMAT binary), dropping the bytes, and returns the rows sent.
func copyDiscard(ctx context.Context, conn *pgxpool.Conn) (int64, error) {
	tag, err := conn.Conn().PgConn().CopyTo(ctx, io.Discard, `COPY (`+query+`) TO STDOUT (FORMAT binary)`)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (b *bench) cursorOptions() *cursor.Options {
	return &cursor.Options{Mode: cursor.Direct, BatchSize: b.cfg.Batch}
}

// cursorOnly reads the query as Arrow batches and drops them: the decode
// alone, to attribute the end-to-end time.
func (b *bench) cursorOnly(ctx context.Context) (int64, int64, error) {
	s, err := cursor.Batches(ctx, b.env.Pool, query, nil, b.cursorOptions())
	if err != nil {
		return 0, 0, err
	}
	var n int64
	for rec, err := range s.All() {
		if err != nil {
			return n, 0, err
		}
		n += rec.NumRows()
		rec.Release()
	}
	return n, 0, nil
}

// owned adapts cursor's ownership (the consumer releases each batch) to the
// facade's (batches are borrowed for the duration of the yield).
func owned(seq iter.Seq2[arrow.RecordBatch, error]) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for rec, err := range seq {
			ok := yield(rec, err)
			if rec != nil {
				rec.Release()
			}
			if !ok {
				return
			}
		}
	}
}

// endToEnd is the Iceberg arm as a pipeline runs it: ledger intent ->
// cursor -> facade replace (one snapshot carrying the txn id) -> ledger
// commit with the commit result.
func (b *bench) endToEnd(ctx context.Context) (*e2eResult, error) {
	return b.writeOutput(ctx, b.env.Facade, datasetID)
}

// writeOutput is endToEnd into dataset id through fac.
func (b *bench) writeOutput(ctx context.Context, fac *facade.Facade, id string) (_ *e2eResult, err error) {
	env := b.env
	in, err := env.Ledger.Open(ctx, ledger.OpenParams{
		DatasetID: id, WriterID: writerID, Sink: sink.Iceberg, WriteMode: facade.Replace,
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if aerr := env.Ledger.Abort(actx, in, err); aerr != nil {
				err = errors.Join(err, fmt.Errorf("abort intent %s: %w", in.ID, aerr))
			}
		}
	}()
	s, err := cursor.Batches(ctx, env.Pool, query, nil, b.cursorOptions())
	if err != nil {
		return nil, err
	}
	res, err := fac.Write(ctx,
		facade.Target{DatasetID: id, WriterID: writerID, Workspace: "bench"},
		facade.WriteRequest{
			Mode: facade.Replace, Schema: s.Schema(), Rows: owned(s.All()),
			SourceRefs: []string{sourceTable}, TxnID: in.ID,
		})
	if err != nil {
		return nil, err
	}
	if err := env.Ledger.Commit(ctx, in, ledger.Outcome{
		RowCount: res.Rows, SnapshotID: res.SnapshotID, CommittedAt: res.CommittedAt,
	}); err != nil {
		return nil, err
	}
	out := &e2eResult{
		DatasetID: id, TxnID: in.ID, SnapshotID: res.SnapshotID, Rows: res.Rows,
		DataFiles: len(res.DataFiles), Committed: res.CommittedAt,
	}
	for _, df := range res.DataFiles {
		out.Bytes += df.SizeBytes
	}
	return out, nil
}

// prepareDataset registers the output dataset in the ledger and drops its
// Iceberg table if a previous run left one (its files may live in a
// warehouse that run removed), so every run measures the same write.
func (b *bench) prepareDataset(ctx context.Context) error {
	return b.prepareDatasetID(ctx, datasetID)
}

func (b *bench) prepareDatasetID(ctx context.Context, id string) error {
	if _, err := b.env.Ledger.EnsureDataset(ctx, id, "lakewrite bench output", nil); err != nil {
		return err
	}
	ident, err := b.env.Facade.TableIdentifier(id)
	if err != nil {
		return err
	}
	if err := b.dropTable(ctx, ident); err != nil {
		return fmt.Errorf("drop the previous output table: %w", err)
	}
	return nil
}

// dropTable purges a table left by an earlier run, or forgets its catalog
// entry when its metadata is unreadable (a run on the same database with
// another warehouse).
func (b *bench) dropTable(ctx context.Context, ident table.Identifier) error {
	if err := b.env.Catalog.PurgeTable(ctx, ident); err == nil || errors.Is(err, catalog.ErrNoSuchTable) ||
		errors.Is(err, catalog.ErrNoSuchNamespace) {
		return nil
	}
	if err := b.env.Catalog.DropTable(ctx, ident); err != nil && !errors.Is(err, catalog.ErrNoSuchTable) {
		return err
	}
	return nil
}

// countingDiscard counts and drops what the Parquet writer writes.
type countingDiscard struct{ n atomic.Int64 }

func (c *countingDiscard) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return len(p), nil
}

func codec(name string) (compress.Compression, error) {
	switch strings.ToLower(name) {
	case "", "zstd":
		return compress.Codecs.Zstd, nil
	case "snappy":
		return compress.Codecs.Snappy, nil
	case "uncompressed":
		return compress.Codecs.Uncompressed, nil
	}
	return compress.Codecs.Uncompressed, fmt.Errorf("-compression %q: want zstd, snappy or uncompressed", name)
}

// plainParquet encodes the cursor's batches with pqarrow to a discarding
// writer, with the Parquet settings iceberg-go's writer uses (its defaults
// plus the facade's row group size and codec): the encode without stamping,
// Iceberg metadata or a file system.
func (b *bench) plainParquet(ctx context.Context) (int64, int64, error) {
	s, err := cursor.Batches(ctx, b.env.Pool, query, nil, b.cursorOptions())
	if err != nil {
		return 0, 0, err
	}
	cc, _ := codec(b.cfg.Compression)
	rg := b.cfg.RowGroupRows
	if rg == 0 {
		rg = 256 << 10 // facade.Config.RowGroupRows default
	}
	props := []parquet.WriterProperty{
		parquet.WithMaxRowGroupLength(int64(rg)),
		parquet.WithDataPageSize(1 << 20),
		parquet.WithDataPageVersion(parquet.DataPageV2),
		parquet.WithBatchSize(20000),
		parquet.WithDictionaryPageSizeLimit(2 << 20),
		parquet.WithCompression(cc),
	}
	if b.cfg.CompressionLevel != 0 {
		props = append(props, parquet.WithCompressionLevel(b.cfg.CompressionLevel))
	}
	for _, f := range s.Schema().Fields() {
		props = append(props, parquet.WithDictionaryCostFallbackFor(f.Name, true))
	}
	out := &countingDiscard{}
	w, err := pqarrow.NewFileWriter(s.Schema(), out, parquet.NewWriterProperties(props...),
		pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return 0, 0, err
	}
	// Decode and encode run in two goroutines with two batches between
	// them, as in iceberg-go's writer (WriteQueue 2), so the wall time is
	// comparable with the e2e phase.
	queue := make(chan arrow.RecordBatch, 2)
	quit := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		defer close(queue)
		for rec, err := range s.All() {
			if err != nil {
				done <- err
				return
			}
			select {
			case queue <- rec:
			case <-quit:
				rec.Release()
				done <- nil
				return
			}
		}
		done <- nil
	}()
	var n int64
	var werr error
	for rec := range queue {
		if werr == nil {
			n += rec.NumRows()
			if werr = w.WriteBuffered(rec); werr != nil {
				close(quit)
			}
		}
		rec.Release()
	}
	rerr := <-done
	cerr := w.Close()
	if err := errors.Join(rerr, werr); err != nil {
		return n, 0, err
	}
	if cerr != nil {
		return n, 0, cerr
	}
	return n, out.n.Load(), nil
}

// naiveIceberg is iceberg-go on its own, as a first try would use it:
// the cursor's RecordReader into Transaction.Append of a fresh
// table with iceberg-go's default table properties (zstd at its default
// level, dictionaries tried on every column, a 64-batch queue) and no
// stamping, ledger or bound on memory. A reference point, not a target.
func (b *bench) naiveIceberg(ctx context.Context) (int64, int64, error) {
	ident := table.Identifier{"lakewrite", naiveTable}
	if err := b.dropTable(ctx, ident); err != nil {
		return 0, 0, fmt.Errorf("drop %v: %w", ident, err)
	}
	s, err := cursor.Batches(ctx, b.env.Pool, query, nil, b.cursorOptions())
	if err != nil {
		return 0, 0, err
	}
	sc, err := table.ArrowSchemaToIcebergWithFreshIDs(s.Schema(), false)
	if err != nil {
		return 0, 0, err
	}
	// The namespace exists once the e2e phase has run; -only naive creates it.
	if err := b.env.Catalog.CreateNamespace(ctx, ident[:1], nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return 0, 0, err
	}
	tbl, err := b.env.Catalog.CreateTable(ctx, ident, sc)
	if err != nil {
		return 0, 0, err
	}
	rdr := s.RecordReader()
	defer rdr.Release()
	txn := tbl.NewTransaction()
	if err := txn.Append(ctx, rdr, nil); err != nil {
		return 0, 0, err
	}
	tbl, err = txn.Commit(ctx)
	if err != nil {
		return 0, 0, err
	}
	sum := tbl.CurrentSnapshot().Summary.Properties
	rows, _ := strconv.ParseInt(sum["added-records"], 10, 64)
	size, _ := strconv.ParseInt(sum["added-files-size"], 10, 64)
	return rows, size, nil
}

func describeMachine() machine {
	m := machine{
		GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				m.MemTotal = kb << 10
				break
			}
		}
	}
	return m
}
