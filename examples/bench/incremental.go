package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"time"

	"github.com/lakewrite/lakewrite/writestrategy"
)

// incConfig selects the incremental mode: a target of Rows rows, then Runs
// runs per deploy mode that each change (snapshot_replace) or add
// (append_new) Change rows, both arms through the Dispatcher.
type incConfig struct {
	Runs   int
	Rows   int
	Change int
	// Format is the Iceberg format version of the Iceberg targets, 2 or
	// 3 (0: 2). With 3, a snapshot_replace run writes one deletion vector
	// per touched data file instead of position delete files.
	Format      int
	DatabaseURL string
	Warehouse   string
	Log         io.Writer
}

// incArm is one arm of one deploy mode.
type incArm struct {
	Mode        string             `json:"mode"`
	Arm         string             `json:"arm"`
	FullSeconds float64            `json:"full_write_seconds"` // the first write: the whole table
	FullBytes   int64              `json:"full_write_bytes"`
	FullCPU     float64            `json:"full_write_cpu_seconds"` // the bench process's CPU time (all threads; not the server's)
	P50Seconds  float64            `json:"run_p50_seconds"`
	P50CPU      float64            `json:"run_cpu_p50_seconds"`
	P50Bytes    int64              `json:"run_p50_bytes"`
	Phases      map[string]float64 `json:"run_phase_p50_seconds"`
	order       []string
}

// incReport is the incremental mode's output.
type incReport struct {
	Rows   int        `json:"rows"`
	Change int        `json:"change"`
	Runs   int        `json:"runs"`
	Format int        `json:"format_version"`
	Arms   []incArm   `json:"arms"`
	Floor  []incFloor `json:"floor"`
}

// incFloor is a read of the snapshot_replace source in the server alone
// (COPY of a query TO STDOUT in binary, discarded), timed in each run:
// what any snapshot_replace that reads the whole source pays at least.
type incFloor struct {
	Query      string  `json:"query"`
	P50Seconds float64 `json:"run_p50_seconds"`
	// XFull is P50Seconds over the full write of the snapshot_replace
	// Iceberg arm (the same table).
	XFull float64 `json:"x_full_write"`
	sql   string
	lat   []time.Duration
}

// incFloors are the reads the floor arm times: the deduplicating SELECT
// of a snapshot_replace over a source that needs it (a row_number()
// window by key, then the source's order), a plain scan, and a read of
// the key column alone (what any run that must learn which keys the
// source holds reads at least, however the rest is found).
func incFloors() []*incFloor {
	return []*incFloor{
		{Query: "dedup", sql: `SELECT "id", "name", "amount", "ts" FROM (SELECT s.*, row_number() OVER (PARTITION BY "id" ORDER BY s."__ord") AS "__dup"
			FROM (SELECT r."id", r."name", r."amount", r."ts", row_number() OVER () AS "__ord" FROM public.inc_src_sr r) s) s
			WHERE s."__dup" = 1 ORDER BY s."__ord"`},
		{Query: "scan", sql: `SELECT * FROM public.inc_src_sr`},
		{Query: "keys", sql: `SELECT "id" FROM public.inc_src_sr`},
	}
}

// timeFloor times one COPY of f's query, discarded, with JIT off as in
// the compute transaction.
func timeFloor(ctx context.Context, env *armEnv, f *incFloor) error {
	conn, err := env.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET jit = off`); err != nil {
		return err
	}
	defer func() { _, _ = conn.Exec(ctx, `RESET jit`) }() // best effort: the session goes back to the pool
	t0 := time.Now()
	if _, err := conn.Conn().PgConn().CopyTo(ctx, io.Discard, "COPY ("+f.sql+") TO STDOUT (FORMAT binary)"); err != nil {
		return fmt.Errorf("floor %s: %w", f.Query, err)
	}
	f.lat = append(f.lat, time.Since(t0))
	return nil
}

// dirBytes is the size of the files under dir.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// runIncremental runs the incremental mode on the embedded default.
func runIncremental(ctx context.Context, cfg incConfig) (*incReport, error) {
	if cfg.Runs < 1 || cfg.Rows < 1 || cfg.Change < 1 {
		return nil, fmt.Errorf("-incremental %d -incremental-rows %d -incremental-change %d: want at least 1 of each", cfg.Runs, cfg.Rows, cfg.Change)
	}
	if cfg.Format == 0 {
		cfg.Format = 2
	}
	if cfg.Format != 2 && cfg.Format != 3 {
		return nil, fmt.Errorf("-incremental-format %d: want 2 or 3", cfg.Format)
	}
	logw := logTo(cfg.Log)
	env, err := startArms(ctx, cfg.DatabaseURL, cfg.Warehouse, false, cfg.Format, nil)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	// One source table per mode: snapshot_replace sees Change updated
	// rows per run, append_new Change new keys.
	for _, t := range []string{"inc_src_sr", "inc_src_an"} {
		t0 := time.Now()
		for _, q := range []string{`DROP TABLE IF EXISTS ` + t, fmt.Sprintf(`CREATE TABLE %s AS
			SELECT g::bigint AS id, 'name ' || g AS name, round((g %% 10000) / 100.0, 2)::numeric(12,2) AS amount,
			       timestamptz '2026-01-01 00:00:00+00' + g * interval '1 second' AS ts
			FROM generate_series(1, %d) g`, t, cfg.Rows), `ALTER TABLE ` + t + ` ADD PRIMARY KEY (id)`, `ANALYZE ` + t} {
			if _, err := env.Pool.Exec(ctx, q); err != nil {
				return nil, err
			}
		}
		if _, err := writestrategy.RegisterRelation(ctx, env.Pool, nil, t, t); err != nil {
			return nil, err
		}
		fmt.Fprintf(logw, "bench: incremental: seeded %s (%d rows) in %.1fs\n", t, cfg.Rows, time.Since(t0).Seconds())
	}
	// The same rows through a view, which has no unique index: the
	// iceberg-window arm deduplicates them with the row_number() window.
	if _, err := env.Pool.Exec(ctx, `CREATE OR REPLACE VIEW inc_src_sr_view AS SELECT * FROM inc_src_sr`); err != nil {
		return nil, err
	}
	if _, err := writestrategy.RegisterRelation(ctx, env.Pool, nil, "inc_src_sr_view", "inc_src_sr_view"); err != nil {
		return nil, err
	}
	type armState struct {
		incArm
		writer, target, source string
		kind                   writestrategy.Kind
		lat, cpu               []time.Duration
		bytes                  []int64
		phases                 map[string][]time.Duration
	}
	var arms []*armState
	for _, m := range []struct {
		kind writestrategy.Kind
		src  string
	}{{writestrategy.KindSnapshotReplace, "inc_src_sr"}, {writestrategy.KindAppendNew, "inc_src_an"}} {
		for _, a := range []struct{ name, writer string }{{"iceberg", smallWriterIceberg}, {"postgres", smallWriterPG}} {
			arms = append(arms, &armState{incArm: incArm{Mode: string(m.kind), Arm: a.name}, writer: a.writer,
				target: fmt.Sprintf("inc_%s_%s", m.kind, a.name), source: m.src, kind: m.kind, phases: map[string][]time.Duration{}})
		}
		if m.kind == writestrategy.KindSnapshotReplace {
			// Its source's key is not provably unique: deduplicated by
			// the window, as every source was before unique keys were
			// read from the catalog.
			arms = append(arms, &armState{incArm: incArm{Mode: string(m.kind), Arm: "iceberg-window"}, writer: smallWriterIceberg,
				target: "inc_snapshot_replace_iceberg_window", source: "inc_src_sr_view", kind: m.kind, phases: map[string][]time.Duration{}})
		}
	}
	floors := incFloors()
	// bytes written: the growth of the table's directory for an Iceberg
	// arm (not the whole warehouse's, which the maintenance of another
	// table may shrink meanwhile), the WAL generated for the Postgres arm.
	write := func(a *armState) (timedWrite, error) {
		meter := env.meter(ctx, false)
		if a.Arm != "postgres" {
			dir := filepath.Join(env.Warehouse, "lakewrite.db", a.target)
			meter = func() int64 { return dirBytes(dir) }
		}
		return env.write(ctx, a.target, meter, writestrategy.Request{WriterID: a.writer,
			Strategy: writestrategy.Deploy{Mode: a.kind, Source: a.source, Target: a.target, Key: []string{"id"}}})
	}
	for _, a := range arms {
		tw, err := write(a)
		if err != nil {
			return nil, fmt.Errorf("%s %s full write: %w", a.Mode, a.Arm, err)
		}
		a.FullSeconds, a.FullBytes, a.FullCPU = tw.took.Seconds(), tw.bytes, tw.cpu.Seconds()
		fmt.Fprintf(logw, "bench: incremental: %s %s full write %.2fs\n", a.Mode, a.Arm, tw.took.Seconds())
	}
	var next int64 = int64(cfg.Rows) + 1
	for r := 0; r < cfg.Runs; r++ {
		if _, err := env.Pool.Exec(ctx, `UPDATE inc_src_sr SET name = name || '+', amount = amount + 1
			WHERE id IN (SELECT (random() * ($1::bigint - 1))::bigint + 1 FROM generate_series(1, $2::int))`, cfg.Rows, cfg.Change); err != nil {
			return nil, err
		}
		if _, err := env.Pool.Exec(ctx, `INSERT INTO inc_src_an SELECT g, 'name ' || g, 1.00, timestamptz '2026-01-01 00:00:00+00'
			FROM generate_series($1::bigint, $2::bigint) g`, next, next+int64(cfg.Change)-1); err != nil {
			return nil, err
		}
		next += int64(cfg.Change)
		for _, f := range floors {
			if err := timeFloor(ctx, env, f); err != nil {
				return nil, err
			}
		}
		for _, a := range arms {
			tw, err := write(a)
			if err != nil {
				return nil, fmt.Errorf("%s %s run %d: %w", a.Mode, a.Arm, r+1, err)
			}
			a.lat, a.cpu, a.bytes = append(a.lat, tw.took), append(a.cpu, tw.cpu), append(a.bytes, tw.bytes)
			a.order = addPhases(a.order, a.phases, tw)
		}
		fmt.Fprintf(logw, "bench: incremental: run %d done\n", r+1)
	}
	rep := &incReport{Rows: cfg.Rows, Change: cfg.Change, Runs: cfg.Runs, Format: cfg.Format}
	for _, a := range arms {
		a.P50Seconds = p50ms(a.lat) / 1000
		a.P50CPU = p50ms(a.cpu) / 1000
		bs := slices.Clone(a.bytes)
		slices.Sort(bs)
		a.P50Bytes = bs[len(bs)/2]
		a.Phases = map[string]float64{}
		for p, ds := range a.phases {
			a.Phases[p] = p50ms(ds) / 1000
		}
		rep.Arms = append(rep.Arms, a.incArm)
	}
	for _, f := range floors {
		f.P50Seconds = p50ms(f.lat) / 1000
		f.XFull = f.P50Seconds / arms[0].FullSeconds
		rep.Floor = append(rep.Floor, *f)
	}
	return rep, nil
}

func printIncremental(w io.Writer, r *incReport) {
	fmt.Fprintf(w, "incremental: target of %d rows, %d rows changed (snapshot_replace) or added (append_new) per run, %d runs, through the Dispatcher, Iceberg format v%d\n",
		r.Rows, r.Change, r.Runs, r.Format)
	fmt.Fprintf(w, "%-17s %-14s %8s %8s %10s %8s %8s %10s %7s   run phase p50 s\n",
		"mode", "arm", "full s", "full cpu", "full bytes", "run p50", "run cpu", "run bytes", "x full")
	for i, a := range r.Arms {
		ratio := a.P50Seconds / a.FullSeconds
		fmt.Fprintf(w, "%-17s %-14s %8.2f %8.2f %10s %8.3f %8.3f %10s %7.3f  ", a.Mode, a.Arm, a.FullSeconds, a.FullCPU, mib(a.FullBytes),
			a.P50Seconds, a.P50CPU, kibs(a.P50Bytes), ratio)
		for _, p := range a.order {
			if p == string(writestrategy.PhaseWrite) {
				continue
			}
			fmt.Fprintf(w, " %s=%.3f", p, a.Phases[p])
		}
		fmt.Fprintln(w)
		if a.Arm == "postgres" && i > 0 && r.Arms[i-1].Mode == a.Mode {
			fmt.Fprintf(w, "%-17s iceberg run p50 / postgres run p50: %.2f\n", a.Mode, r.Arms[i-1].P50Seconds/a.P50Seconds)
		}
	}
	for _, f := range r.Floor {
		fmt.Fprintf(w, "floor: snapshot_replace source read in the server (COPY %s TO STDOUT binary, discarded): run p50 %.3f s, %.3f x the iceberg full write\n",
			f.Query, f.P50Seconds, f.XFull)
	}
}

func kibs(b int64) string { return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10)) }
