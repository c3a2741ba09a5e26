package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/embedded"
	"github.com/lakewrite/lakewrite/internal/scanfiles"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// historyConfig selects the history mode: one dataset written Writes times
// through the Dispatcher on the embedded default, with default settings.
type historyConfig struct {
	Writes      int
	Rows        int // rows per write
	DatabaseURL string
	Warehouse   string
	Modes       []string // "replace", "append"
	// FileGrace overrides facade.Lifecycle.FileGrace (0: the default).
	FileGrace time.Duration
	Log       io.Writer
}

// historyResult is what the history mode measured for one write mode.
type historyResult struct {
	Mode          string  `json:"mode"`
	Writes        int     `json:"writes"`
	FirstP50Ms    float64 `json:"first_p50_ms"` // writes 1..window
	LastP50Ms     float64 `json:"last_p50_ms"`  // the last window writes
	Ratio         float64 `json:"ratio"`        // LastP50Ms / FirstP50Ms
	Window        int     `json:"window"`
	Snapshots     int     `json:"snapshots"`
	MetadataBytes int64   `json:"metadata_json_bytes"` // the current metadata.json
	MetadataFiles int     `json:"metadata_json_files"`
	Manifests     int     `json:"live_manifests"` // entries of the head's manifest list
	DataFiles     int     `json:"live_data_files"`
	Files         int     `json:"files"` // every file under the table's location
	Bytes         int64   `json:"bytes"`
	Rows          int64   `json:"rows"`
}

const historyWriter = "bench.history"

// runHistory writes one dataset per mode cfg.Writes times and reports the
// p50 latency of the first and the last window of writes in the same run,
// and the table's footprint at the end.
func runHistory(ctx context.Context, cfg historyConfig) ([]historyResult, error) {
	if cfg.Writes < 2 || cfg.Rows <= 0 {
		return nil, fmt.Errorf("-history %d -history-rows %d: want at least 2 writes of at least 1 row", cfg.Writes, cfg.Rows)
	}
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	env, err := embedded.Start(ctx, embedded.Options{DatabaseURL: cfg.DatabaseURL, Warehouse: cfg.Warehouse,
		Facade: &facade.Config{Lifecycle: facade.Lifecycle{FileGrace: cfg.FileGrace}}})
	if err != nil {
		return nil, err
	}
	defer env.Close()
	if err := env.Flags.SetWriter(ctx, sink.WriterFlags{WriterID: historyWriter, Default: sink.Iceberg, Max: sink.Iceberg}); err != nil {
		return nil, err
	}
	env.Resolver.Invalidate()
	src := fmt.Sprintf("history_src_%d", cfg.Rows)
	if err := seedHistorySource(ctx, env, src, cfg.Rows); err != nil {
		return nil, err
	}
	window := min(100, cfg.Writes/2)
	var out []historyResult
	for _, mode := range cfg.Modes {
		ds := fmt.Sprintf("history_%s_%d", mode, time.Now().UnixNano())
		if _, err := env.Ledger.EnsureDataset(ctx, ds, ds, nil); err != nil {
			return nil, err
		}
		var s writestrategy.WriteStrategy
		switch mode {
		case "replace":
			s = writestrategy.Transform{Output: ds, Source: src}
		case "append":
			s = writestrategy.Deploy{Mode: writestrategy.KindAppendAlways, Source: src, Target: ds}
		default:
			return nil, fmt.Errorf("-history-modes: unknown mode %q (want replace, append)", mode)
		}
		lat := make([]time.Duration, 0, cfg.Writes)
		for i := range cfg.Writes {
			t0 := time.Now()
			if _, err := env.Dispatcher.Write(ctx, writestrategy.Request{WriterID: historyWriter, Strategy: s}); err != nil {
				return nil, fmt.Errorf("%s write %d: %w", mode, i+1, err)
			}
			lat = append(lat, time.Since(t0))
			if (i+1)%100 == 0 {
				fmt.Fprintf(logw, "bench: history %s: %d writes, last p50 %.1f ms\n", mode, i+1, p50ms(lat[len(lat)-min(100, len(lat)):]))
			}
		}
		r := historyResult{Mode: mode, Writes: cfg.Writes, Window: window,
			FirstP50Ms: p50ms(lat[:window]), LastP50Ms: p50ms(lat[len(lat)-window:])}
		r.Ratio = r.LastP50Ms / r.FirstP50Ms
		if err := footprint(ctx, env, ds, &r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func p50ms(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2]) / float64(time.Millisecond)
}

// seedHistorySource puts n rows into the row store as dataset id (once).
func seedHistorySource(ctx context.Context, env *embedded.Env, id string, n int) error {
	ds, err := env.Ledger.EnsureDataset(ctx, id, id, nil)
	if err != nil {
		return err
	}
	if ds.Status == "active" {
		return nil
	}
	schema := writestrategy.Schema{Columns: []writestrategy.Column{
		{Name: "id", Type: "bigint"}, {Name: "name", Type: "text"}, {Name: "amount", Type: "numeric(12,2)"},
		{Name: "ts", Type: "timestamp with time zone"}}}
	_, err = env.Ledger.With(ctx, ledger.OpenParams{DatasetID: id, WriterID: "bench.seed", Sink: sink.Postgres, WriteMode: facade.Replace},
		func(ctx context.Context, in *ledger.Intent) (ledger.Outcome, error) {
			var o ledger.Outcome
			err := pgx.BeginFunc(ctx, env.Pool, func(tx pgx.Tx) error {
				rows, _, err := writestrategy.RowStoreInsert(ctx, tx, nil, id, in.ID,
					`SELECT g::bigint AS id, 'name ' || g AS name, round((g % 10000) / 100.0, 2)::numeric(12,2) AS amount,
					        timestamptz '2026-01-01 00:00:00+00' + g * interval '1 minute' AS ts
					 FROM generate_series(1, $1::int) g ORDER BY g`, n)
				if err != nil {
					return err
				}
				if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&o.CommittedAt); err != nil {
					return err
				}
				o.RowCount, o.Schema = rows, schema.JSON()
				return nil
			})
			return o, err
		})
	return err
}

// footprint measures the table of dataset ds at the end of a run.
func footprint(ctx context.Context, env *embedded.Env, ds string, r *historyResult) error {
	tbl, err := env.Facade.LoadTable(ctx, ds)
	if err != nil {
		return err
	}
	r.Snapshots = len(tbl.Metadata().Snapshots())
	if snap := tbl.CurrentSnapshot(); snap != nil {
		fsys, err := tbl.FS(ctx)
		if err != nil {
			return err
		}
		mfs, err := snap.Manifests(fsys)
		if err != nil {
			return err
		}
		r.Manifests = len(mfs)
		tasks, err := scanfiles.Plan(ctx, tbl.Scan())
		if err != nil {
			return err
		}
		r.DataFiles = len(tasks)
		for _, t := range tasks {
			r.Rows += t.File.Count()
		}
	}
	loc := strings.TrimPrefix(tbl.Location(), "file://")
	if st, err := os.Stat(strings.TrimPrefix(tbl.MetadataLocation(), "file://")); err == nil {
		r.MetadataBytes = st.Size()
	}
	err = filepath.WalkDir(loc, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		r.Files++
		r.Bytes += info.Size()
		if strings.HasSuffix(p, ".metadata.json") {
			r.MetadataFiles++
		}
		return nil
	})
	return err
}

func printHistory(w io.Writer, rs []historyResult) {
	fmt.Fprintf(w, "%-8s %7s %14s %14s %6s %6s %12s %6s %9s %10s %7s %10s %9s\n",
		"mode", "writes", "p50 first ms", "p50 last ms", "ratio", "snaps", "metadata", "mjson", "manifests", "datafiles", "files", "bytes", "rows")
	for _, r := range rs {
		fmt.Fprintf(w, "%-8s %7d %14.1f %14.1f %6.2f %6d %12d %6d %9d %10d %7d %10d %9d\n",
			r.Mode, r.Writes, r.FirstP50Ms, r.LastP50Ms, r.Ratio, r.Snapshots, r.MetadataBytes, r.MetadataFiles,
			r.Manifests, r.DataFiles, r.Files, r.Bytes, r.Rows)
	}
	if len(rs) > 0 {
		fmt.Fprintf(w, "p50 first = writes 1-%d, p50 last = the last %d writes, same run; target ratio <= 1.2\n", rs[0].Window, rs[0].Window)
	}
}
