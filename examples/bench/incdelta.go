package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// deltaConfig selects the delta-read mode: per row count, an upstream of
// that many rows grown by Change appended rows per run, and an append_new
// pipeline over it read in delta mode, on each arm.
type deltaConfig struct {
	Runs        int
	Rows        []int
	Change      int
	Arms        []string // the arms to run; nil: all
	DatabaseURL string
	Warehouse   string
	Log         io.Writer
}

// deltaArm is one arm at one row count.
type deltaArm struct {
	Arm         string             `json:"arm"`
	FullSeconds float64            `json:"full_write_seconds"` // the output's first write: a full rebuild
	FullBytes   int64              `json:"full_write_bytes"`
	P50Seconds  float64            `json:"run_p50_seconds"`
	P50Bytes    int64              `json:"run_p50_bytes"`
	P50Rows     int64              `json:"run_p50_rows_written"`
	P50Read     int64              `json:"run_p50_source_rows_read"`
	Phases      map[string]float64 `json:"run_phase_p50_seconds"`
	order       []string
}

// deltaReport is the delta-read mode's output at one row count.
type deltaReport struct {
	Rows   int        `json:"rows"`
	Change int        `json:"change"`
	Runs   int        `json:"runs"`
	Arms   []deltaArm `json:"arms"`
}

// The arms: the upstream and the output on Iceberg, the output read in
// delta mode (iceberg-delta) or whole (iceberg-snapshot, what every
// Iceberg write did before delta reads); both on Postgres, in delta mode
// over the row store (postgres).
const (
	armIceDelta = "iceberg-delta"
	armIceSnap  = "iceberg-snapshot"
	armPG       = "postgres"
)

// runDelta runs the delta-read mode on the embedded default, one row count
// after the other in the same cluster.
func runDelta(ctx context.Context, cfg deltaConfig) ([]*deltaReport, error) {
	if cfg.Runs < 1 || cfg.Change < 1 || len(cfg.Rows) == 0 {
		return nil, fmt.Errorf("-incremental-delta %d -incremental-change %d: want at least 1 of each", cfg.Runs, cfg.Change)
	}
	logw := logTo(cfg.Log)
	env, err := startArms(ctx, cfg.DatabaseURL, cfg.Warehouse, false, 0, nil)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	const rowsSQL = `SELECT g::bigint AS id, 'name ' || g AS name, round((g % 10000) / 100.0, 2)::numeric(12,2) AS amount,
		timestamptz '2026-01-01 00:00:00+00' + g * interval '1 second' AS ts FROM generate_series($1::bigint, $2::bigint) g`
	var out []*deltaReport
	for _, n := range cfg.Rows {
		type armState struct {
			deltaArm
			writer, up, target string
			mode               incremental.ReadMode
			low                time.Time // the upstream's watermark
			lat                []time.Duration
			bytes, rows, read  []int64
			phases             map[string][]time.Duration
		}
		arms := []*armState{
			{deltaArm: deltaArm{Arm: armIceDelta}, writer: smallWriterIceberg, up: fmt.Sprintf("dl_up_ice_%d", n), mode: incremental.ReadDelta},
			{deltaArm: deltaArm{Arm: armIceSnap}, writer: smallWriterIceberg, up: fmt.Sprintf("dl_up_ice_%d", n), mode: incremental.ReadSnapshot},
			{deltaArm: deltaArm{Arm: armPG}, writer: smallWriterPG, up: fmt.Sprintf("dl_up_pg_%d", n), mode: incremental.ReadDelta},
		}
		ups := map[string]string{arms[0].up: smallWriterIceberg, arms[2].up: smallWriterPG}
		if cfg.Arms != nil {
			arms = slices.DeleteFunc(arms, func(a *armState) bool { return !slices.Contains(cfg.Arms, a.Arm) })
		}
		for _, a := range arms {
			a.target, a.phases = fmt.Sprintf("dl_%s_%d", a.Arm, n), map[string][]time.Duration{}
		}
		// The upstreams, one per sink: n rows appended in one write.
		var upIDs []string
		for _, a := range arms {
			if !slices.Contains(upIDs, a.up) {
				upIDs = append(upIDs, a.up)
			}
		}
		load := func(up string, lo, hi int64) (writestrategy.WriteResult, error) {
			if _, err := env.Ledger.EnsureDataset(ctx, up, up, nil); err != nil {
				return writestrategy.WriteResult{}, err
			}
			return env.disp.Load(ctx, writestrategy.LoadRequest{WriterID: ups[up], DatasetID: up, Mode: facade.Append, SQL: rowsSQL, Args: []any{lo, hi}})
		}
		for _, up := range upIDs {
			t0 := time.Now()
			if _, err := load(up, 1, int64(n)); err != nil {
				return nil, fmt.Errorf("seed %s: %w", up, err)
			}
			fmt.Fprintf(logw, "bench: delta: seeded %s (%d rows) in %.1fs\n", up, n, time.Since(t0).Seconds())
		}
		// bytes written: the warehouse's growth for the Iceberg arms, the
		// WAL written for the Postgres arm.
		write := func(a *armState) (timedWrite, error) {
			high, err := env.Ledger.Now(ctx)
			if err != nil {
				return timedWrite{}, err
			}
			txns, err := env.Ledger.Committed(ctx, a.up, a.low, high)
			if err != nil {
				return timedWrite{}, err
			}
			ids := make([]string, len(txns))
			for i, t := range txns {
				ids[i] = t.ID
			}
			tw, err := env.write(ctx, a.target, env.meter(ctx, a.Arm != armPG), writestrategy.Request{WriterID: a.writer, ReadMode: a.mode,
				Delta:    map[string][]string{a.up: ids},
				Strategy: writestrategy.Deploy{Mode: writestrategy.KindAppendNew, Source: a.up, Target: a.target, Key: []string{"id"}}})
			if err != nil {
				return timedWrite{}, err
			}
			a.low = high
			return tw, nil
		}
		for _, a := range arms {
			tw, err := write(a)
			if err != nil {
				return nil, fmt.Errorf("%s full write: %w", a.Arm, err)
			}
			a.FullSeconds, a.FullBytes = tw.took.Seconds(), tw.bytes
			fmt.Fprintf(logw, "bench: delta: %d rows: %s full write %.2fs\n", n, a.Arm, tw.took.Seconds())
		}
		// Current statistics, as autovacuum keeps them: the row store's
		// plans depend on them (a stale estimate of the target picks a
		// nested-loop anti-join).
		if _, err := env.Pool.Exec(ctx, `ANALYZE `+env.Ledger.Schema()+`.dataset_rows`); err != nil {
			return nil, err
		}
		next := int64(n) + 1
		for r := 0; r < cfg.Runs; r++ {
			for _, up := range upIDs {
				if _, err := load(up, next, next+int64(cfg.Change)-1); err != nil {
					return nil, fmt.Errorf("run %d: append to %s: %w", r+1, up, err)
				}
			}
			next += int64(cfg.Change)
			for _, a := range arms {
				tw, err := write(a)
				if err != nil {
					return nil, fmt.Errorf("%s run %d: %w", a.Arm, r+1, err)
				}
				res := tw.results[0]
				a.lat, a.bytes = append(a.lat, tw.took), append(a.bytes, tw.bytes)
				a.rows, a.read = append(a.rows, res.Rows), append(a.read, res.Rows+res.Skipped)
				a.order = addPhases(a.order, a.phases, tw)
			}
			fmt.Fprintf(logw, "bench: delta: %d rows: run %d done\n", n, r+1)
		}
		rep := &deltaReport{Rows: n, Change: cfg.Change, Runs: cfg.Runs}
		mid := func(xs []int64) int64 {
			s := slices.Clone(xs)
			slices.Sort(s)
			return s[len(s)/2]
		}
		for _, a := range arms {
			a.P50Seconds = p50ms(a.lat) / 1000
			a.P50Bytes, a.P50Rows, a.P50Read = mid(a.bytes), mid(a.rows), mid(a.read)
			a.Phases = map[string]float64{}
			for p, ds := range a.phases {
				a.Phases[p] = p50ms(ds) / 1000
			}
			rep.Arms = append(rep.Arms, a.deltaArm)
		}
		out = append(out, rep)
		if cfg.Log != nil {
			printDelta(cfg.Log, []*deltaReport{rep}) // as soon as measured
		}
	}
	return out, nil
}

func printDelta(w io.Writer, rs []*deltaReport) {
	for _, r := range rs {
		fmt.Fprintf(w, "delta reads: upstream of %d rows (key id), %d rows appended per run, append_new in delta mode over it, %d runs, through the Dispatcher\n",
			r.Rows, r.Change, r.Runs)
		fmt.Fprintf(w, "%-17s %8s %10s %8s %10s %8s %9s %7s   run phase p50 s\n", "arm", "full s", "full bytes", "run p50", "run bytes", "written", "read", "x full")
		var ice, pg float64
		for _, a := range r.Arms {
			fmt.Fprintf(w, "%-17s %8.2f %10s %8.3f %10s %8d %9d %7.3f  ", a.Arm, a.FullSeconds, mib(a.FullBytes), a.P50Seconds, kibs(a.P50Bytes),
				a.P50Rows, a.P50Read, a.P50Seconds/a.FullSeconds)
			for _, p := range a.order {
				if p != string(writestrategy.PhaseWrite) {
					fmt.Fprintf(w, " %s=%.3f", p, a.Phases[p])
				}
			}
			fmt.Fprintln(w)
			switch a.Arm {
			case armIceDelta:
				ice = a.P50Seconds
			case armPG:
				pg = a.P50Seconds
			}
		}
		if ice > 0 && pg > 0 {
			fmt.Fprintf(w, "iceberg-delta run p50 / postgres run p50: %.3f\n", ice/pg)
		}
	}
	if len(rs) > 1 {
		first, last := rs[0], rs[len(rs)-1]
		fmt.Fprintf(w, "iceberg-delta run p50 at %d rows / at %d rows: %.2f\n", last.Rows, first.Rows, last.Arms[0].P50Seconds/first.Arms[0].P50Seconds)
	}
}
