package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/writestrategy"
)

// smallConfig selects the small-write mode: Writes rounds of one small
// write per arm (Postgres row store, Iceberg), each to a fresh dataset,
// through the Dispatcher of the embedded default.
type smallConfig struct {
	Writes      int
	Rows        int
	DatabaseURL string
	Warehouse   string
	Verbose     bool   // list each arm's statements
	CPUProfile  string // profile the measured writes to this file
	Log         io.Writer
}

// Writer ids of the two arms; their flags pin the sink.
const (
	smallWriterPG      = "bench.small.pg"
	smallWriterIceberg = "bench.small.iceberg"
)

// smallArm is what the small-write mode measured for one arm.
type smallArm struct {
	Arm    string             `json:"arm"`
	Writes int                `json:"writes"`
	P50Ms  float64            `json:"p50_ms"`
	P90Ms  float64            `json:"p90_ms"`
	Phases map[string]float64 `json:"phase_p50_ms"` // p50 per phase
	// Statements are the SQL statements of the arm's last write, in order.
	Statements []string `json:"statements"`
	order      []string
}

// smallReport is the small-write mode's output.
type smallReport struct {
	Rows int        `json:"rows"`
	Arms []smallArm `json:"arms"`
	// Ratio is the Iceberg arm's p50 over the Postgres arm's.
	Ratio float64 `json:"iceberg_over_postgres_p50"`
}

// phaseTimes is an Observer recording the duration of each phase of the
// current write.
type phaseTimes struct {
	mu    sync.Mutex
	cur   map[string]time.Duration
	seq   []string
	stmts []string // the SQL statements since the last take
}

// TraceQueryStart records a statement (pgx.QueryTracer).
func (p *phaseTimes) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stmts = append(p.stmts, d.SQL)
	return ctx
}

// TraceQueryEnd is part of pgx.QueryTracer.
func (p *phaseTimes) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart is part of pgx.BatchTracer: the statements of a batch
// (one round trip) are recorded one by one, marked "(batch)".
func (p *phaseTimes) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery records a statement of a batch (pgx.BatchTracer).
func (p *phaseTimes) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stmts = append(p.stmts, "(batch) "+d.SQL)
}

// TraceBatchEnd is part of pgx.BatchTracer.
func (p *phaseTimes) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (p *phaseTimes) PhaseStart(ctx context.Context, _ writestrategy.PhaseEvent) context.Context {
	return ctx
}

func (p *phaseTimes) PhaseEnd(_ context.Context, ev writestrategy.PhaseEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	name := string(ev.Phase)
	if _, ok := p.cur[name]; !ok {
		p.seq = append(p.seq, name)
	}
	p.cur[name] += ev.Duration
}

func (p *phaseTimes) take() (map[string]time.Duration, []string, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cur, seq, stmts := p.cur, p.seq, p.stmts
	p.cur, p.seq, p.stmts = map[string]time.Duration{}, nil, nil
	return cur, seq, stmts
}

// runSmall runs the small-write mode.
func runSmall(ctx context.Context, cfg smallConfig) (*smallReport, error) {
	if cfg.Writes < 1 || cfg.Rows <= 0 {
		return nil, fmt.Errorf("-small %d -small-rows %d: want at least 1 write of at least 1 row", cfg.Writes, cfg.Rows)
	}
	logw := logTo(cfg.Log)
	env, err := startArms(ctx, cfg.DatabaseURL, cfg.Warehouse, true, 0, nil)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	src := fmt.Sprintf("small_src_%d", cfg.Rows)
	if err := seedHistorySource(ctx, env.Env, src, cfg.Rows); err != nil {
		return nil, err
	}
	type arm struct {
		name, writer string
		lat          []time.Duration
		phases       map[string][]time.Duration
		order        []string
		stmts        []string // the statements of the last write
	}
	arms := []*arm{
		{name: "postgres", writer: smallWriterPG, phases: map[string][]time.Duration{}},
		{name: "iceberg", writer: smallWriterIceberg, phases: map[string][]time.Duration{}},
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
	// One warm-up write per arm (connections, caches), not counted.
	for i := -1; i < cfg.Writes; i++ {
		for j := range arms {
			a := arms[(i+j+2)%2] // alternate which arm goes first
			ds := fmt.Sprintf("small_%s_%d", a.name, time.Now().UnixNano())
			tw, err := env.write(ctx, ds, nil, writestrategy.Request{WriterID: a.writer,
				Strategy: writestrategy.Transform{Output: ds, Source: src}})
			if err != nil {
				return nil, fmt.Errorf("%s write %d: %w", a.name, i+1, err)
			}
			if i < 0 {
				continue
			}
			a.lat, a.stmts = append(a.lat, tw.took), tw.stmts
			a.order = addPhases(a.order, a.phases, tw)
		}
		if i >= 0 && (i+1)%10 == 0 {
			fmt.Fprintf(logw, "bench: small: %d rounds\n", i+1)
		}
	}
	rep := &smallReport{Rows: cfg.Rows}
	for _, a := range arms {
		r := smallArm{Arm: a.name, Writes: len(a.lat), P50Ms: p50ms(a.lat), P90Ms: pctMs(a.lat, 0.9),
			Phases: map[string]float64{}, order: a.order, Statements: a.stmts}
		for p, ds := range a.phases {
			r.Phases[p] = p50ms(ds)
		}
		rep.Arms = append(rep.Arms, r)
	}
	rep.Ratio = rep.Arms[1].P50Ms / rep.Arms[0].P50Ms
	return rep, nil
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}

func pctMs(ds []time.Duration, q float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(float64(len(s))*q))]) / float64(time.Millisecond)
}

func printSmall(w io.Writer, r *smallReport, verbose bool) {
	fmt.Fprintf(w, "small write: %d rows to a fresh dataset through the Dispatcher, %d rounds (arms alternating)\n",
		r.Rows, r.Arms[0].Writes)
	fmt.Fprintf(w, "%-9s %9s %9s   phase p50 ms\n", "arm", "p50 ms", "p90 ms")
	for _, a := range r.Arms {
		fmt.Fprintf(w, "%-9s %9.2f %9.2f  ", a.Arm, a.P50Ms, a.P90Ms)
		for _, p := range a.order {
			if p == string(writestrategy.PhaseWrite) {
				continue
			}
			fmt.Fprintf(w, " %s=%.2f", p, a.Phases[p])
		}
		fmt.Fprintf(w, " statements=%d\n", len(a.Statements))
	}
	if verbose {
		for _, a := range r.Arms {
			fmt.Fprintf(w, "\n%s: statements of the last write\n", a.Arm)
			for i, s := range a.Statements {
				fmt.Fprintf(w, "  %2d %s\n", i+1, oneLine(s, 110))
			}
		}
	}
	fmt.Fprintf(w, "iceberg p50 / postgres p50: %.2f (target <= 1.5)\n", r.Ratio)
}
