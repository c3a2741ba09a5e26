// Command bench measures lakewrite's Iceberg arm end to end against what
// the machine allows.
//
//	go run ./examples/bench -rows 5000000
//
// It seeds N rows of (id bigint, name text, amount numeric(12,2), ts
// timestamptz, flag bool, attrs jsonb ~60 bytes, category text, 4 values)
// into a plain table (INSERT ... SELECT generate_series, VACUUM FREEZE
// ANALYZE; reused by later runs on the same database), then measures in one
// process, in this order:
//
//  1. copy: COPY (query) TO STDOUT (FORMAT binary) read by pgx CopyTo and
//     discarded: the baseline.
//  2. cursor: cursor.Batches (direct mode) decoded into Arrow and dropped.
//  3. e2e: the Iceberg arm: ledger Open -> cursor.Batches -> facade.Write
//     (Replace, TxnID) -> ledger Commit with the commit result.
//  4. parquet: the same cursor batches encoded by pqarrow (iceberg-go's
//     Parquet settings, zstd) to a discarding writer.
//  5. copy-again: COPY once more. The baseline is both COPY runs together
//     (all COPY rows over all COPY seconds), so a phase's ratio is not
//     flattered or penalised by load that came and went.
//
// For each phase it prints rows/s, the ratio to the COPY baseline, the peak
// RSS of the phase (VmHWM, reset before each phase through
// /proc/self/clear_refs after returning free heap to the OS) and the peak Go
// heap (runtime/metrics, sampled every 10 ms). See README.md for figures.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	os.Exit(mainCode())
}

func mainCode() int {
	var cfg config
	var asJSON bool
	flag.Int64Var(&cfg.Rows, "rows", 1_000_000, "rows to seed and stream")
	flag.StringVar(&cfg.DatabaseURL, "database-url", os.Getenv("DATABASE_URL"),
		"Postgres URL (default $DATABASE_URL); empty starts a throwaway cluster from the system binaries")
	flag.BoolVar(&cfg.TCP, "tcp", false, "connect to the throwaway cluster over TCP loopback (as to a server on another host) instead of its unix socket")
	flag.StringVar(&cfg.Warehouse, "warehouse", "", "Iceberg warehouse directory (default: a temporary directory, removed)")
	flag.IntVar(&cfg.Batch, "batch", 0, "cursor batch size in rows (0: cursor default)")
	flag.StringVar(&cfg.Only, "only", "all", "phases: copy, cursor, e2e, parquet, naive (comma-separated, in that order) or all")
	flag.IntVar(&cfg.RowGroupRows, "row-group-rows", 0, "Parquet row group rows (0: facade default)")
	flag.IntVar(&cfg.WriteQueue, "write-queue", 0, "batches queued ahead of the Parquet writer (0: facade default)")
	flag.IntVar(&cfg.WarmBackends, "warm-backends", 3, "pool connections that scan the source table before the phases, so every phase reads through a server process that has read it before (0: none)")
	flag.IntVar(&cfg.WriteWorkers, "write-workers", 0, "data files encoded in parallel by the e2e write (0: facade default)")
	flag.StringVar(&cfg.Compression, "compression", "zstd", "Parquet codec: zstd, snappy or uncompressed")
	flag.IntVar(&cfg.CompressionLevel, "compression-level", 0, "codec level (0: codec default; zstd 1 = fastest)")
	flag.Func("table-prop", "extra table property of the e2e output table, key=value (repeatable)", func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return fmt.Errorf("want key=value, got %q", v)
		}
		if cfg.TableProps == nil {
			cfg.TableProps = map[string]string{}
		}
		cfg.TableProps[k] = val
		return nil
	})
	flag.IntVar(&cfg.Replaces, "replaces", 0, "replace the e2e phase's output this many more times after it, each write measured as phase replace-N (e.g. -rows 5000000 -only e2e -replaces 3: files over the 128 MiB split size)")
	flag.BoolVar(&cfg.NoEncodingBefore, "no-e2e-bss", false, "skip phase e2e-bss (after e2e: the same write with __row_index BYTE_STREAM_SPLIT, the layout before PLAIN, for bytes and client CPU side by side)")
	flag.BoolVar(&cfg.Reseed, "reseed", false, "seed even when a source table of the right size exists")
	flag.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of the measured phases to this file (refresh mode: of each incremental run on Iceberg, to FILE.<shape>.<source>.<run>)")
	flag.StringVar(&cfg.MemProfile, "memprofile", "", "write an allocation profile at the end to this file")
	flag.BoolVar(&asJSON, "json", false, "print the report as JSON")
	var hist historyConfig
	var histModes string
	flag.IntVar(&hist.Writes, "history", 0, "history mode: write one dataset this many times per mode through the Dispatcher (default settings) and compare the p50 latency of the first and last 100 writes")
	flag.IntVar(&hist.Rows, "history-rows", 1000, "history mode: rows per write")
	flag.StringVar(&histModes, "history-modes", "replace,append", "history mode: write modes, comma-separated")
	flag.DurationVar(&hist.FileGrace, "history-file-grace", 0, "history mode: facade.Lifecycle.FileGrace (0: the default, 1m; -1ns: none)")
	var small smallConfig
	flag.IntVar(&small.Writes, "small", 0, "small-write mode: this many rounds of one small write per arm (Postgres row store, Iceberg), each to a fresh dataset, through the Dispatcher; prints p50 latency and phase p50s per arm")
	flag.IntVar(&small.Rows, "small-rows", 1000, "small-write mode: rows per write")
	flag.BoolVar(&small.Verbose, "small-statements", false, "small-write mode: list the SQL statements of each arm's last write")
	var inc incConfig
	flag.IntVar(&inc.Runs, "incremental", 0, "incremental mode: this many runs per deploy mode (snapshot_replace, append_new) on a target of -incremental-rows rows, each changing or adding -incremental-change rows, both arms (Iceberg, Postgres row store) through the Dispatcher; prints time and bytes written per run against a full write")
	flag.IntVar(&inc.Rows, "incremental-rows", 1_000_000, "incremental mode: rows of the target")
	flag.IntVar(&inc.Change, "incremental-change", 1000, "incremental mode: rows changed or added per run")
	flag.IntVar(&inc.Format, "incremental-format", 2, "incremental mode: Iceberg format version of the Iceberg targets, 2 (position delete files) or 3 (deletion vectors)")
	var dl deltaConfig
	var dlRows string
	flag.IntVar(&dl.Runs, "incremental-delta", 0, "delta-read mode: this many runs per row count of an append_new pipeline in delta mode over an upstream grown by -incremental-change appended rows per run: Iceberg (delta, and whole as before delta reads) and Postgres arms through the Dispatcher; prints time, bytes written and source rows read per run against a full write")
	flag.StringVar(&dlRows, "incremental-delta-rows", "1000000,5000000", "delta-read mode: upstream row counts, comma-separated")
	var dlArms string
	flag.StringVar(&dlArms, "incremental-delta-arms", "", "delta-read mode: arms to run, comma-separated (iceberg-delta, iceberg-snapshot, postgres); empty: all")
	var rf refreshConfig
	var rfShares string
	flag.IntVar(&rf.Runs, "refresh", 0, "refresh mode: this many runs of each shape (rowwise, groupby, join) over each source kind (row store, tracked relation, Iceberg upstream written by merges), -refresh-change fact rows changed per run, outputs declared (incremental) on both arms and undeclared (full) on Iceberg; prints REFRESH, FLOOR and TRACKING lines")
	flag.IntVar(&rf.Rows, "refresh-rows", 1_000_000, "refresh mode: rows of each fact table")
	flag.IntVar(&rf.Change, "refresh-change", 1000, "refresh mode: fact rows changed per run")
	flag.IntVar(&rf.DimRows, "refresh-dim-rows", 10_000, "refresh mode: rows of the join's dimension table")
	flag.Int64Var(&rf.ScopeIndexBytes, "refresh-scope-index", 1<<30, "refresh mode: bytes of the outputs' scope indexes the facade keeps between runs (facade.Config.ScopeIndexBytes; 0: none, every run reads the output files its keys may be in)")
	flag.StringVar(&rf.SharedBuffers, "refresh-shared-buffers", "auto", "refresh mode: shared_buffers of the throwaway cluster (e.g. 256MB, 4GB; auto: a quarter of the machine's memory, at most 4GB and at least 256MB, as a server is usually sized; ignored with -database-url)")
	flag.IntVar(&rf.DimChange, "refresh-dim-change", 10, "refresh mode: dimension rows changed by the dimension run")
	flag.BoolVar(&rf.Crossover, "refresh-crossover", false, "refresh mode: also measure the crossover: rowwise and groupby over the row store at each -refresh-shares share of changed rows, incremental forced, against a full run")
	flag.StringVar(&rfShares, "refresh-shares", "0.001,0.01,0.05,0.1,0.2,0.5", "refresh mode: change shares of -refresh-crossover, comma-separated")
	var rfShapes, rfSources string
	flag.StringVar(&rfShapes, "refresh-shapes", "", "refresh mode: shapes to run, comma-separated (rowwise, groupby, join); empty: all")
	flag.StringVar(&rfSources, "refresh-sources", "", "refresh mode: source kinds to run, comma-separated (rowstore, relation, iceberg); empty: all")
	flag.IntVar(&rf.TrackRows, "refresh-track-rows", 100_000, "refresh mode: rows inserted and updated per TRACKING measurement")
	flag.IntVar(&rf.TrackReps, "refresh-track-reps", 3, "refresh mode: TRACKING measurements per table (p50)")
	flag.IntVar(&rf.Warmup, "refresh-warmup", 1, "refresh mode: incremental runs of each case after its full run and before the measured ones, reported apart as first_ms (the first builds the output's scope index in the process and reads a source the full run's scan left out of shared buffers); 0: none")
	flag.Uint64Var(&rf.Seed, "refresh-seed", 1, "refresh mode: seed of the changes")
	var shadow shadowConfig
	var shadowRows string
	flag.IntVar(&shadow.Rounds, "shadow", 0, "shadow mode: this many rounds of one replace with shadow off and on (same output size, arms alternating) per row count; prints wall time and client CPU p50 per arm")
	flag.StringVar(&shadowRows, "shadow-rows", "1000,1000000", "shadow mode: row counts, comma-separated")
	var sl slicesConfig
	var slN, slRows string
	flag.StringVar(&slN, "slices", "", "slices mode: reader counts N, comma-separated (e.g. 1,2,4): one Transform over a registered table written through the Dispatcher with Request.Slices = N, over TCP; prints rows/s and client and server CPU per N")
	flag.StringVar(&slRows, "slices-rows", "1000000", "slices mode: source row counts, comma-separated")
	flag.IntVar(&sl.Rounds, "slices-rounds", 1, "slices mode: measured writes per N (the p50 is printed), after one warm-up")
	var mdl modelConfig
	flag.IntVar(&mdl.Runs, "model", 0, "model mode: a model output (a Go function of ~1 us per row) over a tracked table of -model-rows rows, written in full once, then this many more times after -model-change rows changed each time, on the row store; prints one MODEL line per run (calls: rows passed to the function)")
	flag.IntVar(&mdl.Rows, "model-rows", 1_000_000, "model mode: source rows")
	flag.IntVar(&mdl.Change, "model-change", 1000, "model mode: source rows changed before each run")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "bench: unexpected arguments %q\n", flag.Args())
		flag.Usage()
		return 2
	}
	cfg.Log = os.Stderr

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if mdl.Runs > 0 {
		mdl.DatabaseURL, mdl.Warehouse, mdl.Log = cfg.DatabaseURL, cfg.Warehouse, os.Stderr
		r, err := runModel(ctx, mdl)
		return output(r, err, asJSON, func() { printModel(os.Stdout, r) })
	}
	if inc.Runs > 0 {
		inc.DatabaseURL, inc.Warehouse, inc.Log = cfg.DatabaseURL, cfg.Warehouse, os.Stderr
		r, err := runIncremental(ctx, inc)
		return output(r, err, asJSON, func() { printIncremental(os.Stdout, r) })
	}
	if rf.Runs > 0 {
		shares, err := parseShares(rfShares)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			return 2
		}
		if rfShapes != "" {
			rf.Shapes = strings.Split(rfShapes, ",")
		}
		if rfSources != "" {
			rf.Sources = strings.Split(rfSources, ",")
		}
		rf.Shares, rf.DatabaseURL, rf.Warehouse, rf.Log, rf.CPUProfile = shares, cfg.DatabaseURL, cfg.Warehouse, os.Stderr, cfg.CPUProfile
		r, err := runRefresh(ctx, rf)
		return output(r, err, asJSON, func() { printRefresh(os.Stdout, r) })
	}
	if dl.Runs > 0 {
		rows, err := parseRowList(dlRows)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			return 2
		}
		if dlArms != "" {
			dl.Arms = strings.Split(dlArms, ",")
		}
		dl.Rows, dl.Change, dl.DatabaseURL, dl.Warehouse, dl.Log = rows, inc.Change, cfg.DatabaseURL, cfg.Warehouse, os.Stderr
		r, err := runDelta(ctx, dl)
		return output(r, err, asJSON, func() { printDelta(os.Stdout, r) })
	}
	if slN != "" {
		r, err := runSlicesFlags(ctx, sl, slN, slRows, cfg)
		return output(r, err, asJSON, func() { printSlices(os.Stdout, r) })
	}
	if small.Writes > 0 {
		small.DatabaseURL, small.Warehouse, small.Log = cfg.DatabaseURL, cfg.Warehouse, os.Stderr
		small.CPUProfile = cfg.CPUProfile
		r, err := runSmall(ctx, small)
		return output(r, err, asJSON, func() { printSmall(os.Stdout, r, small.Verbose) })
	}
	if shadow.Rounds > 0 {
		rows, err := parseRowList(shadowRows)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			return 2
		}
		shadow.Rows, shadow.DatabaseURL, shadow.Warehouse, shadow.Log = rows, cfg.DatabaseURL, cfg.Warehouse, os.Stderr
		rs, err := runShadow(ctx, shadow)
		return output(rs, err, asJSON, func() { printShadow(os.Stdout, rs) })
	}
	if hist.Writes > 0 {
		hist.DatabaseURL, hist.Warehouse, hist.Log = cfg.DatabaseURL, cfg.Warehouse, os.Stderr
		hist.Modes = strings.Split(histModes, ",")
		rs, err := runHistory(ctx, hist)
		return output(rs, err, asJSON, func() { printHistory(os.Stdout, rs) })
	}
	rep, err := run(ctx, cfg)
	return output(rep, err, asJSON, func() { printTable(os.Stdout, rep) })
}

// output prints a run's report (as JSON, or with print) or its error, and
// returns the exit code.
func output(rep any, err error, asJSON bool, print func()) int {
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	if !asJSON {
		print()
		return 0
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	return 0
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func printTable(w io.Writer, r *report) {
	m := r.Machine
	fmt.Fprintf(w, "lakewrite bench: %d rows, %s/%s, %d CPUs (%s), %s RAM, %s, PostgreSQL %s",
		r.Rows, m.GOOS, m.GOARCH, m.CPUs, m.CPUModel, mib(m.MemTotal), m.Go, m.Postgres)
	if m.Embedded {
		fmt.Fprint(w, " (throwaway cluster)")
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "config: %s\n", r.Config)
	if r.Seed != nil {
		fmt.Fprintf(w, "seeded in %.1fs\n", r.Seed.Seconds)
	}
	fmt.Fprintf(w, "\n%-11s %10s %8s %12s %8s %12s %12s %11s %9s %9s %6s\n",
		"phase", "rows", "seconds", "rows/s", "x COPY", "peak RSS", "peak heap", "written", "cli CPU", "srv CPU", "idle")
	for _, p := range r.Phases {
		ratio := "-"
		if p.RatioVsCopy > 0 {
			ratio = fmt.Sprintf("%.2f", p.RatioVsCopy)
		}
		rss := mib(p.PeakRSS)
		if p.PeakRSSScope != "phase" {
			rss += "*"
		}
		out := "-"
		if p.OutBytes > 0 {
			out = mib(p.OutBytes)
		}
		srv := "-"
		if p.ServerCPU > 0 {
			srv = fmt.Sprintf("%.2fs", p.ServerCPU)
		}
		fmt.Fprintf(w, "%-11s %10d %8.2f %12.0f %8s %12s %12s %11s %9s %9s %5.0f%%\n",
			p.Phase, p.Rows, p.Seconds, p.RowsPerSec, ratio, rss, mib(int64(p.PeakHeap)), out,
			fmt.Sprintf("%.2fs", p.ClientCPU), srv, 100*p.Idle)
	}
	printStages(w, r.Phases)
	printColumns(w, r.Phases)
	if r.CopyBaseline > 0 {
		fmt.Fprintf(w, "\nCOPY baseline (all COPY phases): %.0f rows/s\n", r.CopyBaseline)
	}
	fmt.Fprintf(w, "process peak RSS: %s", mib(r.ProcessPeakRSS))
	for _, p := range r.Phases {
		if p.PeakRSSScope != "phase" {
			fmt.Fprint(w, "  (* peak of the process so far: /proc/self/clear_refs unavailable)")
			break
		}
	}
	fmt.Fprintln(w)
	printReplaces(w, r.Replaces)
	printEncodings(w, r)
	if e := r.E2E; e != nil {
		fmt.Fprintf(w, "e2e: dataset %s, txn %s committed, snapshot %d, %d rows in %d data file(s)\n",
			e.DatasetID, e.TxnID, e.SnapshotID, e.Rows, e.DataFiles)
	}
	if r.RatioTargetMet != nil {
		fmt.Fprintf(w, "e2e / naive: %.2fx rows/s (target >= %.2fx: %s); e2e client CPU below naive's: %s\n",
			r.E2EVsNaive, targetVsNaive, metStr(*r.RatioTargetMet), metStr(*r.CPUTargetMet))
		if e := r.phase(phaseE2E); e != nil && r.E2EFloor > 0 {
			fmt.Fprintf(w, "e2e CPU floor on %d CPUs: (client %.2fs + server %.2fs) / %d = %.2fs, so at most %.2fx naive at this CPU per row (e2e kept %.0f%% of the CPUs busy)\n",
				r.Machine.CPUs, e.ClientCPU, e.ServerCPU, r.Machine.CPUs, r.E2EFloor, r.E2ECeilingVsNaive, 100*r.E2EFloor/e.Seconds)
		}
	}
	for _, name := range []string{phaseE2E, phaseNaive} {
		if p := r.phase(name); p != nil && p.ServerSwitches != nil {
			fmt.Fprintf(w, "%s context switches per 1k rows: client %.1f waits + %.1f preempted, server %.1f waits + %.1f preempted\n",
				name, perK(p.ClientSwitches.Voluntary, p.Rows), perK(p.ClientSwitches.Involuntary, p.Rows),
				perK(p.ServerSwitches.Voluntary, p.Rows), perK(p.ServerSwitches.Involuntary, p.Rows))
		}
	}
	if r.RSSTargetMet != nil {
		fmt.Fprintf(w, "target e2e peak RSS <= %s: %s\n", mib(targetRSSByte), metStr(*r.RSSTargetMet))
	}
}

// perK is n per thousand rows.
func perK(n, rows int64) float64 {
	if rows <= 0 {
		return 0
	}
	return float64(n) * 1000 / float64(rows)
}

func metStr(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// printStages prints the client CPU by stage of the phases that have one,
// one column per phase.
func printStages(w io.Writer, phases []phaseResult) {
	var cols []phaseResult
	for _, p := range phases {
		if len(p.Stages) > 0 {
			cols = append(cols, p)
		}
	}
	if len(cols) == 0 {
		return
	}
	fmt.Fprintf(w, "\nclient CPU by stage, seconds (in-process CPU profile of each phase)\n%-16s", "stage")
	for _, p := range cols {
		fmt.Fprintf(w, " %10s", p.Phase)
	}
	fmt.Fprintln(w)
	names := []string{}
	for _, s := range stages {
		names = append(names, s.Name)
	}
	names = append(names, "other", "total")
	for _, n := range names {
		row := fmt.Sprintf("%-16s", n)
		any := false
		for _, p := range cols {
			var v float64
			for _, s := range p.Stages {
				if s.Stage == n || n == "total" {
					v += s.Seconds
				}
			}
			if v > 0 {
				any = true
				row += fmt.Sprintf(" %10.2f", v)
			} else {
				row += fmt.Sprintf(" %10s", "-")
			}
		}
		if any {
			fmt.Fprintln(w, row)
		}
	}
}

// printColumns prints the compressed bytes per column of the phases that
// report them.
func printColumns(w io.Writer, phases []phaseResult) {
	for _, p := range phases {
		if len(p.Columns) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s: bytes by column (compressed)\n", p.Phase)
		for _, c := range p.Columns {
			fmt.Fprintf(w, "  %-16s %10s\n", c.Column, mib(c.Bytes))
		}
	}
}
