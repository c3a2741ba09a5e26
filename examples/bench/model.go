package main

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lakewrite/lakewrite/incremental/changelog"
	"github.com/lakewrite/lakewrite/incremental/model"
	"github.com/lakewrite/lakewrite/internal/embedded"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// modelConfig selects the model mode: a model output over a tracked table
// of Rows rows, written once in full, then Runs more times after Change
// of its rows changed each time, through the Dispatcher on the row store.
type modelConfig struct {
	Runs        int
	Rows        int
	Change      int
	DatabaseURL string
	Warehouse   string
	Log         io.Writer
}

// modelRun is one incremental run of the model mode.
type modelRun struct {
	Rows    int     `json:"rows"`
	Changed int     `json:"changed"`
	FirstMs float64 `json:"first_ms"`
	RunMs   float64 `json:"run_ms"`
	Calls   int64   `json:"calls"`
}

const modelWriter = "bench.model"

var modelSchema = arrow.NewSchema([]arrow.Field{{Name: "score", Type: arrow.PrimitiveTypes.Float64}}, nil)

// microModel costs about a microsecond per row (a spin on the clock), and
// counts the rows it is given.
func microModel(calls *atomic.Int64) model.Func {
	return func(ctx context.Context, in arrow.RecordBatch) (arrow.RecordBatch, error) {
		calls.Add(in.NumRows())
		keys := in.Column(0).(*array.String)
		ns := in.Column(1).(*array.Int32)
		b := array.NewRecordBuilder(memory.DefaultAllocator, model.OutputSchema(modelSchema))
		defer b.Release()
		for i := range keys.Len() {
			t0 := time.Now()
			x := float64(ns.Value(i))
			for time.Since(t0) < time.Microsecond {
				x = x*1.0000001 + 1
			}
			b.Field(0).(*array.StringBuilder).Append(keys.Value(i))
			b.Field(1).(*array.Float64Builder).Append(x)
		}
		return b.NewRecordBatch(), ctx.Err()
	}
}

// runModel runs the model mode.
func runModel(ctx context.Context, cfg modelConfig) ([]modelRun, error) {
	if cfg.Runs < 1 || cfg.Rows < cfg.Change || cfg.Change < 1 {
		return nil, fmt.Errorf("-model %d: want at least 1 run and -model-change between 1 and -model-rows", cfg.Runs)
	}
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	env, err := embedded.Start(ctx, embedded.Options{DatabaseURL: cfg.DatabaseURL, Warehouse: cfg.Warehouse})
	if err != nil {
		return nil, err
	}
	defer env.Close()
	fmt.Fprintf(logw, "model: seeding %d rows\n", cfg.Rows)
	for _, sql := range []string{
		`DROP TABLE IF EXISTS bench_model_src`,
		`CREATE TABLE bench_model_src (id bigint PRIMARY KEY, n integer NOT NULL)`,
		`INSERT INTO bench_model_src SELECT g, (g % 1000)::int FROM generate_series(1, ` + fmt.Sprint(cfg.Rows) + `) g`,
		`VACUUM ANALYZE bench_model_src`,
	} {
		if _, err := env.Pool.Exec(ctx, sql); err != nil {
			return nil, err
		}
	}
	if _, err := writestrategy.RegisterRelation(ctx, env.Pool, nil, "bench_model_src", "bench_model_src"); err != nil {
		return nil, err
	}
	if err := changelog.New("").Track(ctx, env.Pool, "bench_model_src", "bench_model_src", []string{"id", "n"}); err != nil {
		return nil, err
	}
	if _, err := env.Ledger.EnsureDataset(ctx, "bench_model_out", "bench_model_out", nil); err != nil {
		return nil, err
	}
	if err := env.Flags.SetWriter(ctx, sink.WriterFlags{WriterID: modelWriter, Default: sink.Postgres, Max: sink.Postgres}); err != nil {
		return nil, err
	}
	env.Resolver.Invalidate()
	var calls atomic.Int64
	m := writestrategy.Model{Output: "bench_model_out", Source: "bench_model_src", Key: []string{"id"}, Columns: []string{"n"},
		Schema: modelSchema, Func: microModel(&calls)}
	write := func() (float64, error) {
		calls.Store(0)
		t0 := time.Now()
		_, err := env.Dispatcher.Write(ctx, writestrategy.Request{WriterID: modelWriter, Strategy: m})
		return float64(time.Since(t0).Microseconds()) / 1000, err
	}
	first, err := write()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logw, "model: first run %.0f ms, %d calls\n", first, calls.Load())
	var out []modelRun
	for r := range cfg.Runs {
		// Change rows spread over the table: ids r+1, r+1+step, ...
		step := cfg.Rows / cfg.Change
		if _, err := env.Pool.Exec(ctx, `UPDATE bench_model_src SET n = n + 1 WHERE id IN (SELECT $1::bigint + g * $2::bigint FROM generate_series(0, $3::int - 1) g)`,
			r+1, step, cfg.Change); err != nil {
			return nil, err
		}
		ms, err := write()
		if err != nil {
			return nil, err
		}
		out = append(out, modelRun{Rows: cfg.Rows, Changed: cfg.Change, FirstMs: first, RunMs: ms, Calls: calls.Load()})
	}
	return out, nil
}

func printModel(w io.Writer, rs []modelRun) {
	for _, r := range rs {
		fmt.Fprintf(w, "MODEL rows=%d changed=%d first_ms=%.0f run_ms=%.0f calls=%d\n", r.Rows, r.Changed, r.FirstMs, r.RunMs, r.Calls)
	}
}
