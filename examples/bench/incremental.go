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
	Runs        int
	Rows        int
	Change      int
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
	P50Seconds  float64            `json:"run_p50_seconds"`
	P50Bytes    int64              `json:"run_p50_bytes"`
	Phases      map[string]float64 `json:"run_phase_p50_seconds"`
	order       []string
}

// incReport is the incremental mode's output.
type incReport struct {
	Rows   int      `json:"rows"`
	Change int      `json:"change"`
	Runs   int      `json:"runs"`
	Arms   []incArm `json:"arms"`
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
	logw := logTo(cfg.Log)
	env, err := startArms(ctx, cfg.DatabaseURL, cfg.Warehouse, false)
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
	type armState struct {
		incArm
		writer, target, source string
		kind                   writestrategy.Kind
		lat                    []time.Duration
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
	}
	// bytes written: the warehouse's growth for the Iceberg arm, the WAL
	// written for the Postgres arm.
	write := func(a *armState) (timedWrite, error) {
		return env.write(ctx, a.target, env.meter(ctx, a.Arm == "iceberg"), writestrategy.Request{WriterID: a.writer,
			Strategy: writestrategy.Deploy{Mode: a.kind, Source: a.source, Target: a.target, Key: []string{"id"}}})
	}
	for _, a := range arms {
		tw, err := write(a)
		if err != nil {
			return nil, fmt.Errorf("%s %s full write: %w", a.Mode, a.Arm, err)
		}
		a.FullSeconds, a.FullBytes = tw.took.Seconds(), tw.bytes
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
		for _, a := range arms {
			tw, err := write(a)
			if err != nil {
				return nil, fmt.Errorf("%s %s run %d: %w", a.Mode, a.Arm, r+1, err)
			}
			a.lat, a.bytes = append(a.lat, tw.took), append(a.bytes, tw.bytes)
			a.order = addPhases(a.order, a.phases, tw)
		}
		fmt.Fprintf(logw, "bench: incremental: run %d done\n", r+1)
	}
	rep := &incReport{Rows: cfg.Rows, Change: cfg.Change, Runs: cfg.Runs}
	for _, a := range arms {
		a.P50Seconds = p50ms(a.lat) / 1000
		bs := slices.Clone(a.bytes)
		slices.Sort(bs)
		a.P50Bytes = bs[len(bs)/2]
		a.Phases = map[string]float64{}
		for p, ds := range a.phases {
			a.Phases[p] = p50ms(ds) / 1000
		}
		rep.Arms = append(rep.Arms, a.incArm)
	}
	return rep, nil
}

func printIncremental(w io.Writer, r *incReport) {
	fmt.Fprintf(w, "incremental: target of %d rows, %d rows changed (snapshot_replace) or added (append_new) per run, %d runs, through the Dispatcher\n",
		r.Rows, r.Change, r.Runs)
	fmt.Fprintf(w, "%-17s %-9s %8s %10s %8s %10s %7s   run phase p50 s\n", "mode", "arm", "full s", "full bytes", "run p50", "run bytes", "x full")
	for i, a := range r.Arms {
		ratio := a.P50Seconds / a.FullSeconds
		fmt.Fprintf(w, "%-17s %-9s %8.2f %10s %8.3f %10s %7.3f  ", a.Mode, a.Arm, a.FullSeconds, mib(a.FullBytes), a.P50Seconds, kibs(a.P50Bytes), ratio)
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
}

func kibs(b int64) string { return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10)) }
