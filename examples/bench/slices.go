package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/embedded"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// slicesConfig selects the slices mode: for each row count, a Transform
// over a registered table of the bench shape written through the
// Dispatcher with Request.Slices = each of Slices (1: one stream), over
// TCP loopback to the throwaway cluster unless DatabaseURL is set.
type slicesConfig struct {
	Slices      []int
	Rows        []int
	Rounds      int
	DatabaseURL string
	Warehouse   string
	Log         io.Writer
}

// slicesRow is what the slices mode measured for one row count and N.
type slicesRow struct {
	Rows    int     `json:"rows"`
	N       int     `json:"n"`
	Slices  int     `json:"slices"` // readers the write used
	WallS   float64 `json:"wall_p50_s"`
	RowsPS  float64 `json:"rows_per_s"`
	Speedup float64 `json:"speedup_vs_first"`
	// Client and server (the database's backends) CPU seconds of the p50 write.
	ClientCPU float64 `json:"client_cpu_s"`
	ServerCPU float64 `json:"server_cpu_s"`
	CPUs      int     `json:"cpus"`
}

func parseSlices(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-slices %q: want positive reader counts, comma-separated", s)
		}
		out = append(out, n)
	}
	return out, nil
}

const slicesWriter = "bench.slices"

// runSlices runs the slices mode.
func runSlices(ctx context.Context, cfg slicesConfig) ([]slicesRow, error) {
	logw := logTo(cfg.Log)
	maxN := 1
	for _, n := range cfg.Slices {
		maxN = max(maxN, n)
	}
	env, err := embedded.Start(ctx, embedded.Options{DatabaseURL: cfg.DatabaseURL, Warehouse: cfg.Warehouse,
		Facade: &facade.Config{Lifecycle: facade.Lifecycle{Disabled: true}}, TCP: true, MaxConns: int32(maxN + 6)})
	if err != nil {
		return nil, err
	}
	defer env.Close()
	disp, err := writestrategy.NewDispatcher(env.Pool, &writestrategy.DispatchConfig{
		Ledger: env.Ledger, Resolver: env.Resolver, Lakehouse: env.Facade, Workspace: "bench"})
	if err != nil {
		return nil, err
	}
	if err := env.Flags.SetWriter(ctx, sink.WriterFlags{WriterID: slicesWriter, Default: sink.Iceberg, Max: sink.Iceberg}); err != nil {
		return nil, err
	}
	env.Resolver.Invalidate()
	b := &bench{env: env}
	var out []slicesRow
	for _, rows := range cfg.Rows {
		src := fmt.Sprintf("slices_src_%d", rows)
		if err := seedSlicesSource(ctx, env, src, rows); err != nil {
			return nil, err
		}
		fmt.Fprintf(logw, "bench: slices: %d rows seeded\n", rows)
		var first float64
		for i, n := range cfg.Slices {
			output := fmt.Sprintf("slices_out_%d_%d", rows, n)
			if _, err := env.Ledger.EnsureDataset(ctx, output, output, nil); err != nil {
				return nil, err
			}
			req := writestrategy.Request{WriterID: slicesWriter, Slices: n,
				Strategy: writestrategy.Transform{Output: output, Source: src}}
			var runs []slicesRow
			// A warm-up write (creates the table), not counted.
			for r := -1; r < cfg.Rounds; r++ {
				runtime.GC()
				srv0 := b.serverProcs(ctx)
				cpu0, _ := processUsage()
				t0 := time.Now()
				res, err := disp.Write(ctx, req)
				wall := time.Since(t0)
				cpu1, _ := processUsage()
				if err != nil {
					return nil, fmt.Errorf("slices %d, %d rows: %w", n, rows, err)
				}
				if r < 0 {
					continue
				}
				row := slicesRow{Rows: rows, N: n, Slices: res[0].Slices, WallS: wall.Seconds(),
					RowsPS: float64(res[0].Rows) / wall.Seconds(), ClientCPU: (cpu1 - cpu0).Seconds(), CPUs: runtime.NumCPU()}
				if srv1 := b.serverProcs(ctx); srv0 != nil && srv1 != nil {
					var d time.Duration
					for pid, p := range srv1 {
						d += p.cpu - srv0[pid].cpu
					}
					row.ServerCPU = d.Seconds()
				}
				runs = append(runs, row)
			}
			// The p50 write: the round of the median wall time.
			slices.SortFunc(runs, func(a, b slicesRow) int { return cmp.Compare(a.WallS, b.WallS) })
			best := &runs[len(runs)/2]
			if i == 0 {
				first = best.RowsPS
			}
			best.Speedup = best.RowsPS / first
			fmt.Fprintf(logw, "bench: slices: %d rows, N=%d done\n", rows, n)
			out = append(out, *best)
		}
	}
	return out, nil
}

// seedSlicesSource creates a table of the bench shape with n rows and
// registers it as dataset id (once).
func seedSlicesSource(ctx context.Context, env *embedded.Env, id string, n int) error {
	ds, err := env.Ledger.EnsureDataset(ctx, id, id, nil)
	if err != nil {
		return err
	}
	if ds.Status == "active" || ds.Sink == sink.Relation {
		return nil
	}
	table := "bench_" + id
	if _, err := env.Pool.Exec(ctx, `DROP TABLE IF EXISTS `+table+`; CREATE TABLE `+table+` AS
		SELECT g::bigint AS id, 'name ' || g AS name, round((g % 10000) / 100.0, 2)::numeric(12,2) AS amount,
		       timestamptz '2026-01-01 00:00:00+00' + g * interval '1 second' AS ts, g % 3 = 0 AS flag,
		       jsonb_build_object('k', g % 97, 'tag', 'value ' || (g % 1000), 'n', g) AS attrs,
		       (ARRAY['a', 'b', 'c', 'd'])[1 + g % 4] AS category
		FROM generate_series(1, `+strconv.Itoa(n)+`) g`); err != nil {
		return err
	}
	if _, err := env.Pool.Exec(ctx, `VACUUM (FREEZE, ANALYZE) `+table); err != nil {
		return err
	}
	_, err = writestrategy.RegisterRelation(ctx, env.Pool, nil, id, table)
	return err
}

func printSlices(w io.Writer, rs []slicesRow) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "slices: a Transform over a registered table written by N readers under one snapshot, one commit, over TCP; %d CPUs (shared: other load counts)\n", rs[0].CPUs)
	fmt.Fprintf(w, "%10s %4s %7s %9s %12s %8s %10s %11s %10s %11s\n", "rows", "N", "slices", "wall s", "rows/s", "x N=1st", "cli CPU s", "cli µs/row", "srv CPU s", "srv µs/row")
	for _, r := range rs {
		fmt.Fprintf(w, "%10d %4d %7d %9.2f %12.0f %8.2f %10.2f %11.2f %10.2f %11.2f\n", r.Rows, r.N, r.Slices, r.WallS, r.RowsPS, r.Speedup,
			r.ClientCPU, r.ClientCPU*1e6/float64(r.Rows), r.ServerCPU, r.ServerCPU*1e6/float64(r.Rows))
	}
}

// runSlicesFlags runs the slices mode from its flags.
func runSlicesFlags(ctx context.Context, sl slicesConfig, n, rows string, cfg config) ([]slicesRow, error) {
	var err error
	if sl.Slices, err = parseSlices(n); err != nil {
		return nil, err
	}
	if sl.Rows, err = parseRowList(rows); err != nil {
		return nil, err
	}
	sl.DatabaseURL, sl.Warehouse, sl.Log = cfg.DatabaseURL, cfg.Warehouse, cfg.Log
	return runSlices(ctx, sl)
}
