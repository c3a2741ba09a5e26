package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/embedded"
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
