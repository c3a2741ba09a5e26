package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental/changelog"
	"github.com/lakewrite/lakewrite/internal/trackoverhead"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// refreshConfig selects the refresh mode: per shape (rowwise, groupby,
// join) and source kind (rowstore, relation, iceberg), an output over a
// fact table of Rows rows, refreshed Runs times after Change source rows
// changed each time, both arms through the Dispatcher.
type refreshConfig struct {
	Runs int
	// Warmup is the incremental runs of each case before the measured
	// ones, reported apart (first_ms): the first run after a full one
	// builds the output's scope index in the process and reads a source
	// table that the full run's scan (a ring of buffers, for a table
	// over a quarter of shared_buffers) left out of Postgres's cache.
	Warmup    int
	Rows      int
	Change    int // fact rows changed per run (updates, inserts, deletes)
	DimRows   int // rows of the join's dimension table
	DimChange int // dimension rows changed by the dimension run
	// Crossover adds the crossover runs: rowwise and groupby over the
	// row-store source at each share of Shares, incremental forced.
	Crossover bool
	Shares    []float64
	// Shapes and Sources restrict the cases (nil: all).
	Shapes, Sources []string
	// TrackRows and TrackReps size the TRACKING measurement: rows per
	// measured statement (and single-row statements per measurement), and
	// rounds per table.
	TrackRows int
	TrackReps int
	Seed      uint64
	// CPUProfile, when set, names the CPU profiles of the declared
	// outputs' incremental runs on Iceberg: one per run, in
	// CPUProfile.<shape>.<source>.<run>.
	CPUProfile string
	// ScopeIndexBytes is the facade's Config.ScopeIndexBytes (the outputs'
	// scope indexes kept between runs).
	ScopeIndexBytes int64
	// SharedBuffers, when set, is the throwaway cluster's shared_buffers
	// (e.g. 1GB: a server sized to hold the fact tables; empty: the
	// cluster's 256MB); "auto" sizes it as a server is usually sized, a
	// quarter of the machine's memory, at most 4GB (autoSharedBuffers).
	SharedBuffers string
	DatabaseURL   string
	Warehouse     string
	Log           io.Writer
}

// settings are the throwaway cluster's extra server settings.
func (c refreshConfig) settings() map[string]string {
	switch c.SharedBuffers {
	case "":
		return nil
	case "auto":
		return map[string]string{"shared_buffers": autoSharedBuffers(describeMachine().MemTotal)}
	}
	return map[string]string{"shared_buffers": c.SharedBuffers}
}

// autoSharedBuffers is the shared_buffers PostgreSQL's documentation
// suggests for a dedicated server of memTotal bytes: a quarter of it, here
// at most 4GB and at least the test clusters' 256MB (also when the memory
// is unknown).
func autoSharedBuffers(memTotal int64) string {
	mb := min(memTotal>>20/4, 4096)
	return fmt.Sprintf("%dMB", max(mb, 256))
}

// The shapes and source kinds, in the order they are printed.
var (
	refreshShapes  = []string{"rowwise", "groupby", "join"}
	refreshSources = []string{"rowstore", "relation", "iceberg"}
)

// refreshLine is one case: a shape over a source kind, its p50 run times.
type refreshLine struct {
	Shape   string `json:"shape"`
	Source  string `json:"source"`
	Rows    int    `json:"rows"`
	Changed int    `json:"changed"`
	// Side is "dim" for the run changing dimension rows, "" otherwise.
	Side string `json:"side,omitempty"`
	// Mode is the incremental run's mode on the Iceberg arm: the one of
	// every run, or "full" when any run went full.
	Mode    string   `json:"mode"`
	Reasons []string `json:"reasons,omitempty"` // why runs went full, distinct
	Keys    int64    `json:"keys_p50"`          // affected key values
	Scanned []string `json:"scanned,omitempty"` // sources read without an index on their key
	PgMode  string   `json:"pg_mode"`
	RunMs   float64  `json:"run_ms"`    // the incremental run, output on Iceberg
	FullMs  float64  `json:"full_ms"`   // a full run of the same output on Iceberg
	PgRunMs float64  `json:"pg_run_ms"` // the incremental run, output in the row store
	Runs    int      `json:"runs"`
	// FirstMs and PgFirstMs are the p50 of the warm-up runs (refreshConfig.Warmup)
	// on each arm, not in RunMs and PgRunMs; 0 without.
	FirstMs   float64 `json:"first_ms,omitempty"`
	PgFirstMs float64 `json:"pg_first_ms,omitempty"`
}

// refreshFloor is what a GROUP BY must read at least: every row of the
// affected groups. Over the Iceberg upstream they are read by a key-set
// scan (files pruned by the group column's bounds); over the tracked
// table by the query Postgres plans for them (through the group column's
// index, or a scan of the table when they lie on most of its pages).
type refreshFloor struct {
	Source     string  `json:"source"`
	Groups     int     `json:"groups_p50"`      // affected group values
	GroupRows  int64   `json:"group_rows_p50"`  // rows of those groups read
	ScanMs     float64 `json:"scan_ms"`         // reading them
	FullScanMs float64 `json:"full_scan_ms"`    // reading every row of the source
	FullMs     float64 `json:"full_ms"`         // the case's full run
	RunMs      float64 `json:"run_ms"`          // the case's incremental run
	XFull      float64 `json:"floor_over_full"` // ScanMs / FullMs
	// Pages (tracked table only): the heap pages holding a row of an
	// affected group, of TablePages.
	Pages      int64 `json:"pages_p50,omitempty"`
	TablePages int64 `json:"table_pages,omitempty"`
}

// refreshTracking is the write overhead of change tracking on a table:
// the same statements on an untracked and a tracked table.
type refreshTracking struct {
	RowsPerStatement int `json:"rows_per_statement"`
	// PerRoundTrip is the statements sent a round trip (one transaction).
	PerRoundTrip    int     `json:"statements_per_round_trip"`
	Rows            int     `json:"rows"`
	InsertMs        float64 `json:"untracked_insert_ms"`
	TrackedInsertMs float64 `json:"tracked_insert_ms"`
	UpdateMs        float64 `json:"untracked_update_ms"`
	TrackedUpdateMs float64 `json:"tracked_update_ms"`
	InsertRatio     float64 `json:"insert_ratio"`
	UpdateRatio     float64 `json:"update_ratio"`
	// FloorInsertRatio and FloorUpdateRatio (one row a statement only):
	// the same writes with a minimal row-level trigger that records one
	// change-log entry per row and nothing else, over the untracked time.
	FloorInsertRatio float64 `json:"floor_insert_ratio"`
	FloorUpdateRatio float64 `json:"floor_update_ratio"`
}

// refreshCross is one crossover measurement: a share of the source's rows
// changed, incremental forced.
type refreshCross struct {
	Shape   string  `json:"shape"`
	Source  string  `json:"source"`
	Share   float64 `json:"share"`
	Changed int     `json:"changed"`
	// Images are the change images of the changes (an update counts an
	// old and a new one), the measure of Dependency.MaxShare.
	Images int     `json:"images"`
	Mode   string  `json:"mode"`
	RunMs  float64 `json:"run_ms"`
	FullMs float64 `json:"full_ms"`
}

// refreshReport is the refresh mode's output.
type refreshReport struct {
	Rows    int       `json:"rows"`
	Change  int       `json:"change"`
	Runs    int       `json:"runs"`
	Warmup  int       `json:"warmup_runs"`
	DimRows int       `json:"dim_rows"`
	Load    [2]string `json:"load_average"` // before and after, /proc/loadavg
	// SharedBuffers is the server's shared_buffers.
	SharedBuffers string            `json:"shared_buffers"`
	Lines         []refreshLine     `json:"lines"`
	Floor         []*refreshFloor   `json:"groupby_floors,omitempty"`
	Tracking      []refreshTracking `json:"tracking"`
	Crossover     []refreshCross    `json:"crossover,omitempty"`
}

// rfSource is one source kind: the fact and dimension datasets the outputs
// read, and the plain tables the changes go to (the datasets themselves
// for a relation; for an upstream, tables deployed into it by
// snapshot_replace after each change, a merge).
type rfSource struct {
	kind                string
	fact, dim           string // dataset ids read by the outputs
	factTable, dimTable string // where the changes are made
	writer              string // the upstream's writer; "" for a relation
}

// rfCase is one shape over one source kind: its three outputs.
type rfCase struct {
	shape string
	src   *rfSource
	// inc: declared, on Iceberg; full: the same output undeclared, on
	// Iceberg; pg: declared, in the row store.
	inc, full, pg       string
	run, fullRun, pgRun []time.Duration
	first, pgFirst      []time.Duration // the warm-up runs
	modes, pgModes      []string
	reasons, scanned    []string
	keys                []int64
}

// rfOp is a batch of source changes, applied the same way to every fact
// table: updates (a group move where moveG is not -1), inserts, deletes.
type rfOps struct {
	updID, updG       []int64
	insID, insG, insD []int64
	delID             []int64
}

func (o *rfOps) count() int { return len(o.updID) + len(o.insID) + len(o.delID) }

// images is the change images of o: an update has an old and a new one.
func (o *rfOps) images() int { return 2*len(o.updID) + len(o.insID) + len(o.delID) }

// rfGen draws changes: the live ids and the next new one.
type rfGen struct {
	rng     *rand.Rand
	live    []int64
	next    int64
	groups  int64
	dimRows int64
}

// draw returns k changes: 60% updates (a tenth of them moving the row to
// another group), 20% inserts, 20% deletes, on distinct rows.
func (g *rfGen) draw(k int) rfOps {
	var o rfOps
	nIns := k / 5
	nDel := k / 5
	nUpd := k - nIns - nDel
	if nUpd+nDel > len(g.live) {
		nUpd, nDel = len(g.live)/2, len(g.live)/2
	}
	// Distinct live positions: the first nUpd+nDel of a partial shuffle.
	for i := 0; i < nUpd+nDel; i++ {
		j := i + g.rng.IntN(len(g.live)-i)
		g.live[i], g.live[j] = g.live[j], g.live[i]
	}
	for i := 0; i < nUpd; i++ {
		o.updID = append(o.updID, g.live[i])
		move := int64(-1)
		if g.rng.IntN(10) == 0 {
			move = g.rng.Int64N(g.groups)
		}
		o.updG = append(o.updG, move)
	}
	o.delID = append(o.delID, g.live[nUpd:nUpd+nDel]...)
	g.live = g.live[nUpd+nDel:]
	g.live = append(g.live, o.updID...)
	for i := 0; i < nIns; i++ {
		o.insID = append(o.insID, g.next)
		o.insG = append(o.insG, g.rng.Int64N(g.groups))
		o.insD = append(o.insD, 1+g.rng.Int64N(g.dimRows))
		g.live = append(g.live, g.next)
		g.next++
	}
	return o
}

// rfFactColumns are the fact table's columns; rfFactSQL creates one with
// n rows: g groups about 10 rows each, spread over the table (not
// clustered by id), d a dimension key.
const rfFactColumns = `id bigint PRIMARY KEY, g bigint NOT NULL, d integer NOT NULL, name text NOT NULL, amount numeric(12,2) NOT NULL, ts timestamptz NOT NULL`

func rfFactSeed(table string, n, groups, dims int) string {
	return fmt.Sprintf(`INSERT INTO %s SELECT s, (s * 104729) %% %d, 1 + (s * 7919) %% %d, 'name ' || s,
		round((s %% 10000) / 100.0, 2)::numeric(12,2), timestamptz '2026-01-01 00:00:00+00' + s * interval '1 second'
		FROM generate_series(1::bigint, %d) s`, table, groups, dims, n)
}

// apply makes the changes of o to a fact table in one transaction.
func (o *rfOps) apply(ctx context.Context, env *armEnv, table string) error {
	tx, err := env.Pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `UPDATE `+table+` t SET amount = t.amount + 1, name = t.name || '+',
		g = CASE WHEN u.g < 0 THEN t.g ELSE u.g END
		FROM unnest($1::bigint[], $2::bigint[]) AS u(id, g) WHERE t.id = u.id`, o.updID, o.updG); err != nil {
		return fmt.Errorf("update %s: %w", table, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+table+` SELECT u.id, u.g, u.d, 'name ' || u.id, 1.00, timestamptz '2026-06-01 00:00:00+00'
		FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS u(id, g, d)`, o.insID, o.insG, o.insD); err != nil {
		return fmt.Errorf("insert into %s: %w", table, err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE id = ANY($1::bigint[])`, o.delID); err != nil {
		return fmt.Errorf("delete from %s: %w", table, err)
	}
	return tx.Commit(ctx)
}

// rfStrategy is the output of shape over src, declared (a Dependency with
// maxShare) or not.
func rfStrategy(shape string, src *rfSource, output string, declared bool, maxShare float64) writestrategy.WriteStrategy {
	var dep *dependency
	if declared {
		key := "id"
		if shape == "groupby" {
			key = "g"
		}
		dep = &dependency{Key: []string{key}, Sources: map[string][]string{src.fact: {key}}, MaxShare: maxShare}
	}
	switch shape {
	case "rowwise":
		return declareTransform(writestrategy.Transform{Output: output, Source: src.fact, Steps: []writestrategy.Step{{Name: "out",
			SQL: `SELECT id, g, d, upper(name) AS name, amount * 2 AS amount2, ts + interval '1 day' AS ts FROM source`}}}, dep)
	case "groupby":
		return declareTransform(writestrategy.Transform{Output: output, Source: src.fact, Steps: []writestrategy.Step{{Name: "out",
			SQL: `SELECT g, count(*) AS n, sum(amount) AS total, max(ts) AS last_ts FROM source GROUP BY g`}}}, dep)
	default:
		return declareJoin(writestrategy.Join{Output: output, Left: src.fact, Right: src.dim, On: []writestrategy.JoinOn{{Left: "d", Right: "d"}},
			Columns: []writestrategy.JoinColumn{{Side: "left", Name: "id"}, {Side: "left", Name: "g"}, {Side: "left", Name: "d"},
				{Side: "left", Name: "name"}, {Side: "left", Name: "amount"}, {Side: "right", Name: "dname"}, {Side: "right", Name: "region"}}}, dep)
	}
}

// loadAvg is /proc/loadavg's first three fields.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// runRefresh runs the refresh mode on the embedded default.
func runRefresh(ctx context.Context, cfg refreshConfig) (*refreshReport, error) {
	if cfg.Runs < 1 || cfg.Warmup < 0 || cfg.Rows < 10 || cfg.Change < 5 || cfg.DimRows < 1 || cfg.DimChange < 1 || cfg.DimChange > cfg.DimRows {
		return nil, fmt.Errorf("-refresh %d -refresh-rows %d -refresh-change %d -refresh-dim-rows %d -refresh-dim-change %d: want at least 1 run, 10 rows, 5 changed rows, 1 dimension row changed, no more than the dimension's rows",
			cfg.Runs, cfg.Rows, cfg.Change, cfg.DimRows, cfg.DimChange)
	}
	for _, s := range cfg.Shares {
		if s <= 0 || s > 1 {
			return nil, fmt.Errorf("-refresh-shares: share %g not in (0, 1]", s)
		}
	}
	if cfg.TrackRows < 1 || cfg.TrackReps < 1 {
		return nil, fmt.Errorf("-refresh-track-rows %d -refresh-track-reps %d: want at least 1 of each", cfg.TrackRows, cfg.TrackReps)
	}
	kinds, shapes := refreshSources, refreshShapes
	if cfg.Sources != nil {
		kinds = cfg.Sources
	}
	if cfg.Shapes != nil {
		shapes = cfg.Shapes
	}
	for _, k := range kinds {
		if !slices.Contains(refreshSources, k) {
			return nil, fmt.Errorf("-refresh-sources: %q is none of %s", k, strings.Join(refreshSources, ", "))
		}
	}
	for _, sh := range shapes {
		if !slices.Contains(refreshShapes, sh) {
			return nil, fmt.Errorf("-refresh-shapes: %q is none of %s", sh, strings.Join(refreshShapes, ", "))
		}
	}
	if cfg.Crossover && !slices.Contains(kinds, "rowstore") {
		return nil, fmt.Errorf("-refresh-crossover runs over the rowstore source: keep it in -refresh-sources")
	}
	logw := logTo(cfg.Log)
	env, err := startArms(ctx, cfg.DatabaseURL, cfg.Warehouse, false, 0, cfg.settings(), func(c *facade.Config) { c.ScopeIndexBytes = cfg.ScopeIndexBytes })
	if err != nil {
		return nil, err
	}
	defer env.Close()
	rep := &refreshReport{Rows: cfg.Rows, Change: cfg.Change, Runs: cfg.Runs, Warmup: cfg.Warmup, DimRows: cfg.DimRows}
	rep.Load[0] = loadAvg()
	if err := env.Pool.QueryRow(ctx, `SHOW shared_buffers`).Scan(&rep.SharedBuffers); err != nil {
		return nil, err
	}
	groups := max(int64(cfg.Rows)/10, 1)

	// The sources: a fact table and a dimension table per kind, with the
	// same rows.
	srcs := map[string]*rfSource{}
	for _, kind := range kinds {
		s := &rfSource{kind: kind, fact: "rf_" + kind + "_fact", dim: "rf_" + kind + "_dim"}
		s.factTable, s.dimTable = s.fact, s.dim
		switch kind {
		case "rowstore":
			s.writer = smallWriterPG
		case "iceberg":
			s.writer = smallWriterIceberg
		}
		if s.writer != "" {
			s.factTable, s.dimTable = s.fact+"_src", s.dim+"_src"
		}
		srcs[kind] = s
		t0 := time.Now()
		for _, q := range []string{
			`DROP TABLE IF EXISTS ` + s.factTable + `, ` + s.dimTable,
			`CREATE TABLE ` + s.factTable + ` (` + rfFactColumns + `)`,
			rfFactSeed(s.factTable, cfg.Rows, int(groups), cfg.DimRows),
			`CREATE TABLE ` + s.dimTable + ` (d integer PRIMARY KEY, dname text NOT NULL, region text NOT NULL)`,
			fmt.Sprintf(`INSERT INTO %s SELECT s, 'dim ' || s, 'region ' || (s %% 17) FROM generate_series(1, %d) s`, s.dimTable, cfg.DimRows),
		} {
			if _, err := env.Pool.Exec(ctx, q); err != nil {
				return nil, fmt.Errorf("seed %s: %w", kind, err)
			}
		}
		if kind == "relation" {
			// The keys the outputs declare, indexed on the relation.
			for _, q := range []string{`CREATE INDEX ON ` + s.factTable + ` (g)`, `CREATE INDEX ON ` + s.factTable + ` (d)`} {
				if _, err := env.Pool.Exec(ctx, q); err != nil {
					return nil, err
				}
			}
		}
		for _, t := range []string{s.factTable, s.dimTable} {
			if _, err := env.Pool.Exec(ctx, `VACUUM (FREEZE, ANALYZE) `+t); err != nil {
				return nil, err
			}
			if _, err := writestrategy.RegisterRelation(ctx, env.Pool, nil, t, t); err != nil {
				return nil, err
			}
		}
		if kind == "relation" {
			if err := env.track(ctx, s.fact, "id", "g"); err != nil {
				return nil, fmt.Errorf("track %s: %w", s.fact, err)
			}
			if err := env.track(ctx, s.dim, "d"); err != nil {
				return nil, fmt.Errorf("track %s: %w", s.dim, err)
			}
		}
		if s.writer != "" {
			for _, ds := range [][2]string{{s.factTable, s.fact}, {s.dimTable, s.dim}} {
				key := "id"
				if ds[1] == s.dim {
					key = "d"
				}
				if _, err := env.write(ctx, ds[1], nil, writestrategy.Request{WriterID: s.writer,
					Strategy: writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: ds[0], Target: ds[1], Key: []string{key}}}); err != nil {
					return nil, fmt.Errorf("seed upstream %s: %w", ds[1], err)
				}
			}
		}
		fmt.Fprintf(logw, "bench: refresh: seeded %s source (%d fact rows, %d dimension rows) in %.1fs\n", kind, cfg.Rows, cfg.DimRows, time.Since(t0).Seconds())
	}
	// sync merges the plain tables' changes into the upstreams of kinds.
	sync := func(dim bool, kinds ...string) error {
		for _, kind := range kinds {
			s := srcs[kind]
			if s.writer == "" {
				continue
			}
			from, to, key := s.factTable, s.fact, "id"
			if dim {
				from, to, key = s.dimTable, s.dim, "d"
			}
			tw, err := env.write(ctx, to, nil, writestrategy.Request{WriterID: s.writer,
				Strategy: writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: from, Target: to, Key: []string{key}}})
			if err != nil {
				return fmt.Errorf("merge into upstream %s: %w", to, err)
			}
			fmt.Fprintf(logw, "bench: refresh: merged the changes into %s in %.2fs\n", to, tw.took.Seconds())
		}
		return nil
	}

	var cases []*rfCase
	for _, shape := range shapes {
		for _, kind := range kinds {
			base := "rf_" + shape + "_" + kind
			cases = append(cases, &rfCase{shape: shape, src: srcs[kind], inc: base + "_inc", full: base + "_full", pg: base + "_pg"})
		}
	}
	write := func(c *rfCase, output, writer string, declared bool, maxShare float64) (rfRun, error) {
		tw, err := env.write(ctx, output, nil, writestrategy.Request{WriterID: writer, Strategy: rfStrategy(c.shape, c.src, output, declared, maxShare)})
		if err != nil {
			return rfRun{}, fmt.Errorf("%s: %w", output, err)
		}
		rr := rfRun{took: tw.took}
		for _, ph := range tw.seq {
			rr.phases = append(rr.phases, fmt.Sprintf("%s=%.0f", ph, ms(tw.phases[ph])))
		}
		if len(tw.results) > 0 {
			rr.mode, rr.reason, rr.keys, rr.scan = refreshOf(tw.results[0])
		}
		return rr, nil
	}
	// The first write of every output: a full one.
	for _, c := range cases {
		var took []string
		for _, a := range []struct {
			out, writer string
			declared    bool
		}{{c.inc, smallWriterIceberg, true}, {c.full, smallWriterIceberg, false}, {c.pg, smallWriterPG, true}} {
			rr, err := write(c, a.out, a.writer, a.declared, 0)
			if err != nil {
				return nil, fmt.Errorf("first write: %w", err)
			}
			took = append(took, fmt.Sprintf("%.1fs", rr.took.Seconds()))
		}
		fmt.Fprintf(logw, "bench: refresh: %s over %s: first writes of the declared, undeclared and Postgres outputs in %s\n", c.shape, c.src.kind, strings.Join(took, ", "))
	}
	if _, err := env.Pool.Exec(ctx, `ANALYZE `+env.Ledger.Schema()+`.dataset_rows`); err != nil {
		return nil, err
	}
	// runCases refreshes every case of cs once: the declared Iceberg
	// output, the declared row-store output, then (withFull) the undeclared
	// Iceberg output.
	runCases := func(cs []*rfCase, withFull bool) error {
		for _, c := range cs {
			var pf *os.File
			if cfg.CPUProfile != "" {
				if pf, err = os.Create(fmt.Sprintf("%s.%s.%s.%d", cfg.CPUProfile, c.shape, c.src.kind, len(c.first)+len(c.run))); err != nil {
					return err
				}
				if err = pprof.StartCPUProfile(pf); err != nil {
					pf.Close()
					return err
				}
			}
			inc, err := write(c, c.inc, smallWriterIceberg, true, 0)
			if pf != nil {
				pprof.StopCPUProfile()
				pf.Close()
			}
			if err != nil {
				return err
			}
			pg, err := write(c, c.pg, smallWriterPG, true, 0)
			if err != nil {
				return err
			}
			c.run, c.pgRun = append(c.run, inc.took), append(c.pgRun, pg.took)
			c.modes, c.pgModes, c.keys = append(c.modes, inc.mode), append(c.pgModes, pg.mode), append(c.keys, inc.keys)
			if inc.reason != "" && !slices.Contains(c.reasons, inc.reason) {
				c.reasons = append(c.reasons, inc.reason)
			}
			for _, s := range inc.scan {
				if !slices.Contains(c.scanned, s) {
					c.scanned = append(c.scanned, s)
				}
			}
			if withFull {
				full, err := write(c, c.full, smallWriterIceberg, false, 0)
				if err != nil {
					return err
				}
				c.fullRun = append(c.fullRun, full.took)
			}
			fmt.Fprintf(logw, "bench: refresh: %s over %s: run %.1f ms (%s; %s), pg %.1f ms (%s)\n",
				c.shape, c.src.kind, ms(inc.took), inc.mode, strings.Join(inc.phases, " "), ms(pg.took), pg.mode)
		}
		return nil
	}
	line := func(c *rfCase, changed int, side string, fullMs float64) refreshLine {
		l := refreshLine{Shape: c.shape, Source: c.src.kind, Rows: cfg.Rows, Changed: changed, Side: side, Reasons: c.reasons, Scanned: c.scanned,
			Mode: oneMode(c.modes), PgMode: oneMode(c.pgModes), RunMs: p50ms(c.run), PgRunMs: p50ms(c.pgRun), Runs: len(c.run), FullMs: fullMs}
		if len(c.fullRun) > 0 {
			l.FullMs = p50ms(c.fullRun)
		}
		if len(c.first) > 0 {
			l.FirstMs, l.PgFirstMs = p50ms(c.first), p50ms(c.pgFirst)
		}
		ks := slices.Clone(c.keys)
		slices.Sort(ks)
		l.Keys = ks[len(ks)/2]
		return l
	}
	reset := func(cs []*rfCase) {
		for _, c := range cs {
			c.run, c.fullRun, c.pgRun, c.modes, c.pgModes, c.reasons, c.scanned, c.keys = nil, nil, nil, nil, nil, nil, nil, nil
			c.first, c.pgFirst = nil, nil
		}
	}

	gen := &rfGen{rng: rand.New(rand.NewPCG(cfg.Seed, 45)), next: int64(cfg.Rows) + 1, groups: groups, dimRows: int64(cfg.DimRows)}
	gen.live = make([]int64, cfg.Rows)
	for i := range gen.live {
		gen.live[i] = int64(i + 1)
	}
	ice, rel := srcs["iceberg"], srcs["relation"] // nil when not run
	floor := slices.Contains(shapes, "groupby") && (ice != nil || rel != nil)
	floors := map[string][]floorRun{}
	for r := -cfg.Warmup; r < cfg.Runs; r++ {
		ops := gen.draw(cfg.Change)
		// The groups the changes touch, old and new: what a GROUP BY
		// refresh must read whole (the same in every source's table).
		var affected []int64
		if floor {
			var err error
			if affected, err = affectedGroups(ctx, env, srcs[kinds[0]].factTable, &ops); err != nil {
				return nil, err
			}
		}
		for _, kind := range kinds {
			if err := ops.apply(ctx, env, srcs[kind].factTable); err != nil {
				return nil, err
			}
		}
		if err := sync(false, kinds...); err != nil {
			return nil, err
		}
		if r < 0 {
			// A warm-up run: its times go to first_ms, without a full run.
			if err := runCases(cases, false); err != nil {
				return nil, fmt.Errorf("warm-up run: %w", err)
			}
			for _, c := range cases {
				c.first, c.pgFirst = append(c.first, c.run...), append(c.pgFirst, c.pgRun...)
				c.run, c.pgRun, c.modes, c.pgModes, c.keys = nil, nil, nil, nil, nil
			}
			fmt.Fprintf(logw, "bench: refresh: warm-up run done (%d changes)\n", ops.count())
			continue
		}
		if err := runCases(cases, true); err != nil {
			return nil, fmt.Errorf("run %d: %w", r+1, err)
		}
		if floor && ice != nil {
			fr, err := measureFloor(ctx, env, ice.fact, affected)
			if err != nil {
				return nil, err
			}
			floors["iceberg"] = append(floors["iceberg"], fr)
		}
		if floor && rel != nil {
			fr, err := measureRelationFloor(ctx, env, rel.factTable, affected)
			if err != nil {
				return nil, err
			}
			floors["relation"] = append(floors["relation"], fr)
		}
		fmt.Fprintf(logw, "bench: refresh: run %d done (%d changes)\n", r+1, ops.count())
	}
	fullMs := map[*rfCase]float64{}
	for _, c := range cases {
		l := line(c, cfg.Change, "", 0)
		fullMs[c] = l.FullMs
		rep.Lines = append(rep.Lines, l)
	}
	for _, src := range []string{"iceberg", "relation"} {
		if f := floorOf(src, floors[src], rep.Lines); f != nil {
			rep.Floor = append(rep.Floor, f)
		}
	}
	reset(cases)

	// The dimension run: DimChange dimension rows renamed, the join's
	// outputs refreshed once.
	var joins []*rfCase
	for _, c := range cases {
		if c.shape == "join" {
			joins = append(joins, c)
		}
	}
	if len(joins) > 0 {
		for _, kind := range kinds {
			if _, err := env.Pool.Exec(ctx, `UPDATE `+srcs[kind].dimTable+` SET dname = dname || '+' WHERE d IN (SELECT s * $1::int / $2::int + 1 FROM generate_series(0, $2::int - 1) s)`,
				cfg.DimRows, cfg.DimChange); err != nil {
				return nil, err
			}
		}
		if err := sync(true, kinds...); err != nil {
			return nil, err
		}
		if err := runCases(joins, true); err != nil {
			return nil, fmt.Errorf("dimension run: %w", err)
		}
		for _, c := range joins {
			rep.Lines = append(rep.Lines, line(c, cfg.DimChange, "dim", 0))
		}
		reset(joins)
	}

	// Nothing changed: every case refreshed as many times as above, after
	// as many warm-up runs (first_ms: the joins' first run after the
	// dimension's full one); no full run: the line carries the case's
	// full run from above.
	for r := -cfg.Warmup; r < cfg.Runs; r++ {
		if err := runCases(cases, false); err != nil {
			return nil, fmt.Errorf("unchanged run: %w", err)
		}
		if r < 0 {
			for _, c := range cases {
				c.first, c.pgFirst = append(c.first, c.run...), append(c.pgFirst, c.pgRun...)
				c.run, c.pgRun, c.modes, c.pgModes, c.keys = nil, nil, nil, nil, nil
			}
		}
	}
	for _, c := range cases {
		rep.Lines = append(rep.Lines, line(c, 0, "", fullMs[c]))
	}
	reset(cases)

	if rep.Tracking, err = measureTracking(ctx, env, cfg, logw); err != nil {
		return nil, err
	}
	if cfg.Crossover {
		// Per share, the row-store source changes that share of its rows;
		// the rowwise and groupby outputs over it are refreshed with
		// incremental forced (MaxShare 1), then fully.
		rs := srcs["rowstore"]
		for _, share := range cfg.Shares {
			k := max(int(share*float64(len(gen.live))), 5)
			ops := gen.draw(k)
			if err := ops.apply(ctx, env, rs.factTable); err != nil {
				return nil, err
			}
			if err := sync(false, rs.kind); err != nil {
				return nil, err
			}
			for _, c := range cases {
				if c.src != rs || c.shape == "join" {
					continue
				}
				inc, err := write(c, c.inc, smallWriterIceberg, true, 1)
				if err != nil {
					return nil, fmt.Errorf("crossover: %w", err)
				}
				full, err := write(c, c.full, smallWriterIceberg, false, 0)
				if err != nil {
					return nil, fmt.Errorf("crossover: %w", err)
				}
				x := refreshCross{Shape: c.shape, Source: rs.kind, Share: share, Changed: ops.count(), Images: ops.images(), Mode: inc.mode, RunMs: ms(inc.took), FullMs: ms(full.took)}
				fmt.Fprintf(logw, "bench: refresh: crossover %s share %g: run %.1f ms (%s), full %.1f ms\n", c.shape, share, x.RunMs, x.Mode, x.FullMs)
				rep.Crossover = append(rep.Crossover, x)
			}
		}
	}
	rep.Load[1] = loadAvg()
	return rep, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// rfRun is one measured write of an output.
type rfRun struct {
	took   time.Duration
	mode   string   // WriteResult.Refresh.Mode
	reason string   // why it went full
	keys   int64    // affected key values
	scan   []string // sources read without an index on their key
	phases []string // the write's phases, name=ms in order
}

// oneMode is the mode of every run, "full" when any run went full, "" when
// none reported one.
func oneMode(modes []string) string {
	out := ""
	for _, m := range modes {
		if m == refreshFull {
			return m
		}
		if m != "" {
			out = m
		}
	}
	return out
}

// affectedGroups returns the groups o touches in table before o is
// applied: the old group of every updated or deleted row, the new group of
// every moved or inserted row.
func affectedGroups(ctx context.Context, env *armEnv, table string, o *rfOps) ([]int64, error) {
	ids := append(slices.Clone(o.updID), o.delID...)
	rows, err := env.Pool.Query(ctx, `SELECT DISTINCT g FROM `+table+` WHERE id = ANY($1::bigint[])`, ids)
	if err != nil {
		return nil, err
	}
	set := map[int64]bool{}
	for rows.Next() {
		var g int64
		if err := rows.Scan(&g); err != nil {
			rows.Close()
			return nil, err
		}
		set[g] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, g := range append(slices.Clone(o.updG), o.insG...) {
		if g >= 0 {
			set[g] = true
		}
	}
	out := make([]int64, 0, len(set))
	for g := range set {
		out = append(out, g)
	}
	slices.Sort(out)
	return out, nil
}

// floorRun is one measurement of the GROUP BY floor.
type floorRun struct {
	groups         int
	rows           int64
	scan, fullScan time.Duration
	pages, total   int64
}

// measureRelationFloor times, on the tracked table, a read of every row
// of the affected groups (the aggregates of the output, the plan
// Postgres picks, without parallel workers as in a run) and the same over
// every row, and counts the heap pages that hold the groups' rows.
func measureRelationFloor(ctx context.Context, env *armEnv, table string, groups []int64) (floorRun, error) {
	fr := floorRun{groups: len(groups)}
	tx, err := env.Pool.Begin(ctx)
	if err != nil {
		return fr, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SET LOCAL max_parallel_workers_per_gather = 0"); err != nil {
		return fr, err
	}
	agg := `SELECT count(*), sum(amount)::text, max(ts)::text FROM ` + table
	var sum, last *string
	t0 := time.Now()
	if err := tx.QueryRow(ctx, agg+` WHERE g = ANY($1::bigint[])`, groups).Scan(&fr.rows, &sum, &last); err != nil {
		return fr, fmt.Errorf("floor read of %s: %w", table, err)
	}
	fr.scan = time.Since(t0)
	var all int64
	t0 = time.Now()
	if err := tx.QueryRow(ctx, agg).Scan(&all, &sum, &last); err != nil {
		return fr, fmt.Errorf("floor read of %s: %w", table, err)
	}
	fr.fullScan = time.Since(t0)
	if err := tx.QueryRow(ctx, `SELECT (SELECT count(DISTINCT (ctid::text::point)[0]) FROM `+table+` WHERE g = ANY($1::bigint[])),
		pg_relation_size($2::regclass) / current_setting('block_size')::int`, groups, table).Scan(&fr.pages, &fr.total); err != nil {
		return fr, fmt.Errorf("floor pages of %s: %w", table, err)
	}
	return fr, nil
}

// measureFloor times, on the Iceberg upstream, a key-set scan of every
// row of the affected groups (every business column) and a scan of every
// row (the same columns).
func measureFloor(ctx context.Context, env *armEnv, upstream string, groups []int64) (floorRun, error) {
	cols := []string{"id", "g", "d", "name", "amount", "ts"}
	fr := floorRun{groups: len(groups)}
	count := func(opts facade.ScanOptions) (int64, time.Duration, error) {
		t0 := time.Now()
		var n int64
		for rec, err := range env.Facade.Scan(ctx, upstream, opts) {
			if err != nil {
				return 0, 0, fmt.Errorf("floor scan of %s: %w", upstream, err)
			}
			n += rec.NumRows()
			rec.Release()
		}
		return n, time.Since(t0), nil
	}
	var err error
	if fr.rows, fr.scan, err = count(groupScan(cols, groups)); err != nil {
		return fr, err
	}
	if _, fr.fullScan, err = count(facade.ScanOptions{Columns: cols}); err != nil {
		return fr, err
	}
	return fr, nil
}

// floorOf is the p50 floor of runs, against the groupby case over source.
func floorOf(source string, runs []floorRun, lines []refreshLine) *refreshFloor {
	if len(runs) == 0 {
		return nil
	}
	f := &refreshFloor{Source: source}
	var scans, fulls []time.Duration
	var gs []int
	var rs, ps []int64
	for _, r := range runs {
		scans, fulls, gs, rs, ps = append(scans, r.scan), append(fulls, r.fullScan), append(gs, r.groups), append(rs, r.rows), append(ps, r.pages)
		f.TablePages = r.total
	}
	slices.Sort(gs)
	slices.Sort(rs)
	slices.Sort(ps)
	f.Groups, f.GroupRows, f.ScanMs, f.FullScanMs, f.Pages = gs[len(gs)/2], rs[len(rs)/2], p50ms(scans), p50ms(fulls), ps[len(ps)/2]
	for _, l := range lines {
		if l.Shape == "groupby" && l.Source == source && l.Side == "" {
			f.FullMs, f.RunMs = l.FullMs, l.RunMs
		}
	}
	if f.FullMs > 0 {
		f.XFull = f.ScanMs / f.FullMs
	}
	return f
}

// measureTracking measures the write overhead of change tracking
// (internal/trackoverhead: the same inserts then updates of TrackRows rows
// on an untracked and a tracked table, alternating, the fastest of
// TrackReps) with statements of 1,000 rows, of all the rows at once and of
// one row each, sent 1,000 statements a round trip, and of one row each on
// its own round trip and in its own transaction (an application writing a
// row at a time).
func measureTracking(ctx context.Context, env *armEnv, cfg refreshConfig, logw io.Writer) ([]refreshTracking, error) {
	l := changelog.New(env.Ledger.Schema())
	var out []refreshTracking
	var done [][2]int
	for _, c := range [][2]int{{min(1000, cfg.TrackRows), 1000}, {cfg.TrackRows, 1000}, {1, 1000}, {1, 1}} {
		if slices.Contains(done, c) {
			continue
		}
		done = append(done, c)
		per := c[0]
		res, err := trackoverhead.Measure(ctx, env.Pool, l, trackoverhead.Options{Rows: cfg.TrackRows, RowsPerStatement: per,
			StatementsPerRoundTrip: c[1], Reps: cfg.TrackReps, Floor: per == 1})
		if err != nil {
			return nil, err
		}
		tr := refreshTracking{RowsPerStatement: per, PerRoundTrip: c[1], Rows: cfg.TrackRows,
			InsertMs: ms(res.InsertUntracked), TrackedInsertMs: ms(res.InsertTracked),
			UpdateMs: ms(res.UpdateUntracked), TrackedUpdateMs: ms(res.UpdateTracked),
			InsertRatio: res.InsertRatio(), UpdateRatio: res.UpdateRatio(),
			FloorInsertRatio: res.FloorInsertRatio(), FloorUpdateRatio: res.FloorUpdateRatio()}
		fmt.Fprintf(logw, "bench: refresh: tracking, %d rows per statement, %d statements per round trip: insert %.0f / %.0f ms, update %.0f / %.0f ms\n",
			per, c[1], tr.TrackedInsertMs, tr.InsertMs, tr.TrackedUpdateMs, tr.UpdateMs)
		out = append(out, tr)
	}
	return out, nil
}

// crossing is the share at which shape's incremental run costs as much as
// its full run, interpolated linearly between the measured shares around
// it; ok false when no measured share reached it (share is then the
// largest measured).
func crossing(xs []refreshCross, shape string) (share float64, ok bool) {
	var prev *refreshCross
	for i := range xs {
		x := &xs[i]
		if x.Shape != shape || x.FullMs <= 0 {
			continue
		}
		r := x.RunMs / x.FullMs
		if r >= 1 {
			if prev == nil {
				return x.Share, true
			}
			pr := prev.RunMs / prev.FullMs
			return prev.Share + (x.Share-prev.Share)*(1-pr)/(r-pr), true
		}
		prev = x
		share = x.Share
	}
	return share, false
}

// refreshTarget is the target of a line's run_ms / full_ms, 0 when the
// line has none (the dimension run, the unchanged run).
func refreshTarget(l refreshLine) float64 {
	switch {
	case l.Side != "" || l.Changed == 0:
		return 0
	case l.Shape == "groupby" && l.Source == "iceberg":
		return 0.25
	case l.Rows >= 5_000_000:
		return 0.02
	default:
		return 0.05
	}
}

// refreshIdleTargetMs is the target of a run with nothing changed.
const refreshIdleTargetMs = 50

// refreshTrackingTarget is the target of the tracking ratios.
const refreshTrackingTarget = 1.5

func printRefresh(w io.Writer, r *refreshReport) {
	fmt.Fprintf(w, "refresh: fact tables of %d rows (groups of ~10 rows spread over the table, a %d-row dimension), %d rows changed per run (60%% updates, a tenth of them moving the row's group; 20%% inserts; 20%% deletes), p50 of %d runs after %d warm-up run(s) (first_ms), both arms through the Dispatcher; shared_buffers %s; load average %s before, %s after\n",
		r.Rows, r.DimRows, r.Change, r.Runs, r.Warmup, r.SharedBuffers, r.Load[0], r.Load[1])
	for _, l := range r.Lines {
		fmt.Fprintf(w, "REFRESH shape=%s source=%s rows=%d changed=%d mode=%s run_ms=%.1f full_ms=%.1f pg_run_ms=%.1f",
			l.Shape, l.Source, l.Rows, l.Changed, modeOrNone(l.Mode), l.RunMs, l.FullMs, l.PgRunMs)
		if l.Side != "" {
			fmt.Fprintf(w, " side=%s", l.Side)
		}
		if l.FirstMs > 0 {
			fmt.Fprintf(w, " first_ms=%.1f pg_first_ms=%.1f", l.FirstMs, l.PgFirstMs)
		}
		fmt.Fprintln(w)
	}
	for _, f := range r.Floor {
		fmt.Fprintf(w, "FLOOR shape=groupby source=%s rows=%d changed=%d groups=%d group_rows=%d", f.Source, r.Rows, r.Change, f.Groups, f.GroupRows)
		if f.TablePages > 0 {
			fmt.Fprintf(w, " pages=%d table_pages=%d", f.Pages, f.TablePages)
		}
		fmt.Fprintf(w, " scan_ms=%.1f full_scan_ms=%.1f floor_over_full=%.3f run_ms=%.1f full_ms=%.1f\n", f.ScanMs, f.FullScanMs, f.XFull, f.RunMs, f.FullMs)
	}
	for _, t := range r.Tracking {
		fmt.Fprintf(w, "TRACKING insert_ratio=%.2f update_ratio=%.2f rows_per_statement=%d rows=%d statements_per_round_trip=%d",
			t.InsertRatio, t.UpdateRatio, t.RowsPerStatement, t.Rows, t.PerRoundTrip)
		if t.FloorInsertRatio > 0 {
			fmt.Fprintf(w, " floor_insert_ratio=%.2f floor_update_ratio=%.2f", t.FloorInsertRatio, t.FloorUpdateRatio)
		}
		fmt.Fprintln(w)
	}
	for _, x := range r.Crossover {
		fmt.Fprintf(w, "CROSSOVER shape=%s source=%s rows=%d share=%g changed=%d image_share=%.4f mode=%s run_ms=%.1f full_ms=%.1f ratio=%.3f\n",
			x.Shape, x.Source, r.Rows, x.Share, x.Changed, float64(x.Images)/float64(r.Rows), modeOrNone(x.Mode), x.RunMs, x.FullMs, x.RunMs/x.FullMs)
	}
	for _, shape := range refreshShapes {
		if !slices.ContainsFunc(r.Crossover, func(x refreshCross) bool { return x.Shape == shape }) {
			continue
		}
		if s, ok := crossing(r.Crossover, shape); ok {
			fmt.Fprintf(w, "crossover %s over rowstore: an incremental run costs a full one at a change share of about %.3f\n", shape, s)
		} else {
			fmt.Fprintf(w, "crossover %s over rowstore: not reached (incremental cheaper up to a share of %g)\n", shape, s)
		}
	}
	// Targets.
	for _, l := range r.Lines {
		if l.Mode == refreshFull && len(l.Reasons) > 0 {
			fmt.Fprintf(w, "%s over %s (changed=%d%s): full because %s\n", l.Shape, l.Source, l.Changed, sideNote(l.Side), strings.Join(l.Reasons, "; "))
		}
		if len(l.Scanned) > 0 {
			fmt.Fprintf(w, "%s over %s (changed=%d%s): scanned without an index on the key: %s\n", l.Shape, l.Source, l.Changed, sideNote(l.Side), strings.Join(l.Scanned, ", "))
		}
		if t := refreshTarget(l); t > 0 && l.FullMs > 0 {
			fmt.Fprintf(w, "target %s over %s: run/full %.3f <= %.2f: %s (pg_run/full %.3f, pg mode %s)\n", l.Shape, l.Source, l.RunMs/l.FullMs, t,
				metStr(l.RunMs <= t*l.FullMs), l.PgRunMs/l.FullMs, modeOrNone(l.PgMode))
		}
		if l.Changed == 0 {
			fmt.Fprintf(w, "target %s over %s, nothing changed: run %.1f ms < %d ms: %s (pg %.1f ms, pg mode %s)\n", l.Shape, l.Source, l.RunMs,
				refreshIdleTargetMs, metStr(l.RunMs < refreshIdleTargetMs), l.PgRunMs, modeOrNone(l.PgMode))
		}
	}
	for _, t := range r.Tracking {
		fmt.Fprintf(w, "target tracking, %d rows per statement, %d statements per round trip: ratios <= %.1f: %s", t.RowsPerStatement, t.PerRoundTrip, refreshTrackingTarget,
			metStr(t.InsertRatio <= refreshTrackingTarget && t.UpdateRatio <= refreshTrackingTarget))
		if t.FloorInsertRatio > 0 {
			fmt.Fprintf(w, " (the least a trigger can record, one log entry per row and nothing else, costs %.2f / %.2f)",
				t.FloorInsertRatio, t.FloorUpdateRatio)
		}
		fmt.Fprintln(w)
	}
}

func modeOrNone(m string) string {
	if m == "" {
		return "none"
	}
	return m
}

func sideNote(side string) string {
	if side == "" {
		return ""
	}
	return ", " + side + " side"
}

// parseShares parses -refresh-shares.
func parseShares(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 || v > 1 {
			return nil, fmt.Errorf("-refresh-shares %q: want shares in (0, 1], comma-separated", s)
		}
		out = append(out, v)
	}
	return out, nil
}
