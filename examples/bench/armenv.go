package main

import (
	"context"
	"io"
	"slices"
	"time"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/embedded"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// armEnv is what the Dispatcher modes (small, incremental, delta) measure
// on: the embedded default, a Dispatcher whose Observer records each
// write's phases, and the writers of the two arms with their flags pinned
// to their sink (smallWriterPG to the row store, smallWriterIceberg to
// Iceberg).
type armEnv struct {
	*embedded.Env
	disp *writestrategy.Dispatcher
	obs  *phaseTimes
}

// startArms starts the embedded default on databaseURL (empty: a
// throwaway cluster) and warehouse (empty: a temporary directory). With
// statements, the observer also records the SQL statements of the pool.
// A format version of 3 makes every Iceberg table of the arms format v3
// (facade.Config.FormatVersionFor); 0 leaves the facade default. Each
// tune adjusts the facade's configuration; settings are extra server
// settings of the throwaway cluster.
func startArms(ctx context.Context, databaseURL, warehouse string, statements bool, format int, settings map[string]string, tune ...func(*facade.Config)) (_ *armEnv, err error) {
	obs := &phaseTimes{cur: map[string]time.Duration{}}
	fc := &facade.Config{}
	if format != 0 {
		fc.FormatVersionFor = func(string) (int, bool) { return format, true }
	}
	for _, fn := range tune {
		fn(fc)
	}
	opts := embedded.Options{DatabaseURL: databaseURL, Warehouse: warehouse, Facade: fc, Settings: settings}
	if statements {
		opts.Tracer = obs
	}
	env, err := embedded.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			env.Close()
		}
	}()
	disp, err := writestrategy.NewDispatcher(env.Pool, &writestrategy.DispatchConfig{
		Ledger: env.Ledger, Resolver: env.Resolver, Lakehouse: env.Facade, Workspace: "bench", Observer: obs})
	if err != nil {
		return nil, err
	}
	for _, w := range []sink.WriterFlags{
		{WriterID: smallWriterPG, Default: sink.Postgres, Max: sink.Postgres},
		{WriterID: smallWriterIceberg, Default: sink.Iceberg, Max: sink.Iceberg},
	} {
		if err := env.Flags.SetWriter(ctx, w); err != nil {
			return nil, err
		}
	}
	env.Resolver.Invalidate()
	return &armEnv{Env: env, disp: disp, obs: obs}, nil
}

// meter returns how the bytes an arm writes are counted: the warehouse's
// growth for an Iceberg arm, the WAL a Postgres one generates (its insert
// position: the throwaway cluster commits asynchronously, so the write
// position lags and may not have moved when the write returns).
func (e *armEnv) meter(ctx context.Context, iceberg bool) func() int64 {
	if iceberg {
		return func() int64 { return dirBytes(e.Warehouse) }
	}
	return func() int64 {
		var n int64
		_ = e.Pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint`).Scan(&n)
		return n
	}
}

// timedWrite is one measured write.
type timedWrite struct {
	took    time.Duration
	cpu     time.Duration            // this process's CPU time (all threads) over the write
	bytes   int64                    // by the meter; 0 without one
	phases  map[string]time.Duration // the Observer's phases of this write
	seq     []string                 // their names, first seen first
	stmts   []string                 // its SQL statements (startArms with statements)
	results []writestrategy.WriteResult
}

// write ensures the target dataset, then runs req through the Dispatcher
// and returns its wall time, what it wrote by meter (nil: not counted) and
// its phases. The meter and the dataset are read outside the timing.
func (e *armEnv) write(ctx context.Context, target string, meter func() int64, req writestrategy.Request) (timedWrite, error) {
	if _, err := e.Ledger.EnsureDataset(ctx, target, target, nil); err != nil {
		return timedWrite{}, err
	}
	var before int64
	if meter != nil {
		before = meter()
	}
	_, _, _ = e.obs.take()
	cpu0, _ := processUsage()
	t0 := time.Now()
	res, err := e.disp.Write(ctx, req)
	tw := timedWrite{took: time.Since(t0), results: res}
	cpu1, _ := processUsage()
	tw.cpu = cpu1 - cpu0
	tw.phases, tw.seq, tw.stmts = e.obs.take()
	if meter != nil {
		tw.bytes = meter() - before
	}
	return tw, err
}

// addPhases appends the phases of one write to an arm's series (phases,
// by name; order, the names first seen first) and returns the order.
func addPhases(order []string, phases map[string][]time.Duration, tw timedWrite) []string {
	for _, p := range tw.seq {
		if !slices.Contains(order, p) {
			order = append(order, p)
		}
		phases[p] = append(phases[p], tw.phases[p])
	}
	return order
}

// logTo is w, or io.Discard when w is nil.
func logTo(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
