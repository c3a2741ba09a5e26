package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/embedded"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// shadowConfig selects the shadow mode: for each row count, Rounds rounds
// of one replace of the same output written with shadow off (Postgres
// only) and with shadow on (Postgres, then the Iceberg shadow and its
// parity check), alternating, through the Dispatcher of the embedded
// default.
type shadowConfig struct {
	Rounds      int
	Rows        []int
	DatabaseURL string
	Warehouse   string
	Log         io.Writer
}

// Writer ids of the two arms; their flags pin the mode.
const (
	shadowWriterOff = "bench.shadow.off"
	shadowWriterOn  = "bench.shadow.on"
)

// shadowRow is what the shadow mode measured for one row count.
type shadowRow struct {
	Rows   int `json:"rows"`
	Rounds int `json:"rounds"`
	// Wall and client CPU medians of one write, shadow off and on.
	OffMs    float64 `json:"off_p50_ms"`
	OnMs     float64 `json:"on_p50_ms"`
	OffCPUMs float64 `json:"off_cpu_p50_ms"`
	OnCPUMs  float64 `json:"on_cpu_p50_ms"`
	// Ratios of on over off.
	WallRatio float64 `json:"wall_on_over_off"`
	CPURatio  float64 `json:"cpu_on_over_off"`
}

func parseRowList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-shadow-rows %q: want positive row counts, comma-separated", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// runShadow runs the shadow mode.
func runShadow(ctx context.Context, cfg shadowConfig) ([]shadowRow, error) {
	if cfg.Rounds < 1 || len(cfg.Rows) == 0 {
		return nil, fmt.Errorf("-shadow %d: want at least 1 round", cfg.Rounds)
	}
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	env, err := embedded.Start(ctx, embedded.Options{DatabaseURL: cfg.DatabaseURL, Warehouse: cfg.Warehouse, Facade: &facade.Config{}})
	if err != nil {
		return nil, err
	}
	defer env.Close()
	disp, err := writestrategy.NewDispatcher(env.Pool, &writestrategy.DispatchConfig{
		Ledger: env.Ledger, Resolver: env.Resolver, Lakehouse: env.Facade, Workspace: "bench"})
	if err != nil {
		return nil, err
	}
	for _, w := range []sink.WriterFlags{
		{WriterID: shadowWriterOff, Default: sink.Postgres, Max: sink.Postgres},
		{WriterID: shadowWriterOn, Default: sink.Shadow, Max: sink.Shadow},
	} {
		if err := env.Flags.SetWriter(ctx, w); err != nil {
			return nil, err
		}
	}
	env.Resolver.Invalidate()
	var out []shadowRow
	for _, rows := range cfg.Rows {
		src := fmt.Sprintf("shadow_src_%d", rows)
		if err := seedHistorySource(ctx, env, src, rows); err != nil {
			return nil, err
		}
		arms := []struct {
			writer, output string
			wall, cpu      []time.Duration
		}{
			{writer: shadowWriterOff, output: fmt.Sprintf("shadow_off_%d", rows)},
			{writer: shadowWriterOn, output: fmt.Sprintf("shadow_on_%d", rows)},
		}
		for i := range arms {
			if _, err := env.Ledger.EnsureDataset(ctx, arms[i].output, arms[i].output, nil); err != nil {
				return nil, err
			}
		}
		// One warm-up write per arm (the first shadow creates the table), not counted.
		for r := -1; r < cfg.Rounds; r++ {
			for j := range arms {
				a := &arms[(r+j+2)%2] // alternate which arm goes first
				cpu0, _ := processUsage()
				t0 := time.Now()
				res, err := disp.Write(ctx, writestrategy.Request{WriterID: a.writer,
					Strategy: writestrategy.Transform{Output: a.output, Source: src}})
				if err != nil {
					return nil, fmt.Errorf("%s write %d: %w", a.writer, r+1, err)
				}
				wall := time.Since(t0)
				cpu1, _ := processUsage()
				if a.writer == shadowWriterOn {
					st, err := disp.ShadowStatus(ctx, a.output)
					if err != nil {
						return nil, err
					}
					if st.Last == nil || st.Last.TxnID != res[0].TxnID || st.Last.Status != "matched" {
						return nil, fmt.Errorf("shadow write %d of %d rows did not match: %+v", r+1, rows, st.Last)
					}
				}
				if r >= 0 {
					a.wall, a.cpu = append(a.wall, wall), append(a.cpu, cpu1-cpu0)
				}
			}
		}
		row := shadowRow{Rows: rows, Rounds: cfg.Rounds, OffMs: p50ms(arms[0].wall), OnMs: p50ms(arms[1].wall),
			OffCPUMs: p50ms(arms[0].cpu), OnCPUMs: p50ms(arms[1].cpu)}
		row.WallRatio, row.CPURatio = row.OnMs/row.OffMs, row.OnCPUMs/row.OffCPUMs
		fmt.Fprintf(logw, "bench: shadow: %d rows done\n", rows)
		out = append(out, row)
	}
	return out, nil
}

func printShadow(w io.Writer, rs []shadowRow) {
	fmt.Fprintf(w, "shadow: one replace of a Transform through the Dispatcher, shadow off vs on (arms alternating), p50 of %d rounds\n", rs[0].Rounds)
	fmt.Fprintf(w, "%10s %12s %12s %7s %14s %14s %7s\n", "rows", "off wall ms", "on wall ms", "x", "off cli CPU ms", "on cli CPU ms", "x")
	for _, r := range rs {
		fmt.Fprintf(w, "%10d %12.1f %12.1f %7.2f %14.1f %14.1f %7.2f\n", r.Rows, r.OffMs, r.OnMs, r.WallRatio, r.OffCPUMs, r.OnCPUMs, r.CPURatio)
	}
}
