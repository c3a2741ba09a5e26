package writestrategy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/refresh"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
)

type datasetRow struct {
	id       string
	schema   json.RawMessage
	rowCount int64
	sink     sink.Sink
	relation string // the relation of a sink.Relation dataset
}

// datasetsSQL reads the rows of datasets $1 (ids), with whether the
// built-in types whose names go through the search path are visible in the
// session (see builtinVisibleSQL).
func datasetsSQL(ctlSchema string) string {
	return `SELECT id, schema, row_count, coalesce(sink, ''), coalesce(relation, ''), ` + builtinVisibleSQL + `
		FROM ` + ctlSchema + `.datasets WHERE id = ANY($1)`
}

// datasetsRead is what datasetsSQL read: the rows, the visibility of the
// built-in types (false when no row was read), and where and for which ids
// it was read.
type datasetsRead struct {
	ids     []string
	conn    *pgx.Conn
	rows    map[string]datasetRow
	visible bool
	err     error
	done    bool
}

// scan reads the rows of datasetsSQL.
func (r *datasetsRead) scan(rows pgx.Rows) error {
	r.done, r.conn = true, rows.Conn()
	r.rows = map[string]datasetRow{}
	for rows.Next() {
		var d datasetRow
		var schema []byte
		if err := rows.Scan(&d.id, &schema, &d.rowCount, &d.sink, &d.relation, &r.visible); err != nil {
			r.err = fmt.Errorf("writestrategy: read datasets: %w", err)
			return r.err
		}
		if schema != nil {
			d.schema = schema
		}
		r.rows[d.id] = d
	}
	if err := rows.Err(); err != nil {
		r.err = fmt.Errorf("writestrategy: read datasets: %w", err)
	}
	return r.err
}

// usable reports whether r holds the rows of ids read on conn.
func (r *datasetsRead) usable(conn *pgx.Conn, ids []string) bool {
	return r != nil && r.done && r.err == nil && r.conn == conn && slices.Equal(r.ids, ids)
}

// loadDatasets reads the rows of datasets ids, and whether the built-in
// types whose names go through the search path are visible in it (see
// builtinVisibleSQL; false when no row was read).
func loadDatasets(ctx context.Context, tx pgx.Tx, ctlSchema string, ids []string) (map[string]datasetRow, bool, error) {
	rows, err := tx.Query(ctx, datasetsSQL(ctlSchema), ids)
	if err != nil {
		return nil, false, fmt.Errorf("writestrategy: read datasets: %w", err)
	}
	defer rows.Close()
	r := &datasetsRead{}
	if err := r.scan(rows); err != nil {
		return nil, false, err
	}
	return r.rows, r.visible, nil
}

// datasetIDs are the datasets a strategy reads: its sources, then its
// outputs.
func datasetIDs(s WriteStrategy) []string {
	return append(append([]string(nil), s.Sources()...), s.Outputs()...)
}

// prepare resolves the strategy's sources and targets inside tx (hydrating
// native ones into temporary tables) and plans its projections. sinkTo is
// where the outputs are being written.
func prepare(ctx context.Context, tx pgx.Tx, env *Env, s WriteStrategy, sinkTo sink.Sink) ([]projection, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: strategy is nil", ErrInvalid)
	}
	ctl := env.ctlSchema()
	for _, id := range s.Sources() {
		if err := checkDatasetID("source", id); err != nil {
			return nil, err
		}
	}
	ids := datasetIDs(s)
	var ds map[string]datasetRow
	var visible bool
	if env.read.usable(tx.Conn(), ids) {
		ds, visible = env.read.rows, env.read.visible
	} else {
		var err error
		if ds, visible, err = loadDatasets(ctx, tx, ctl, ids); err != nil {
			return nil, err
		}
	}
	for _, id := range ids {
		if _, ok := ds[id]; !ok {
			return nil, fmt.Errorf("%w: %q", ledger.ErrDatasetNotFound, id)
		}
	}
	if sinkTo == sink.Postgres {
		if err := refuseRelationOutputs(ds, s.Outputs()); err != nil {
			return nil, err
		}
	}
	if st, ok := s.(stager); ok {
		if err := st.stage(ctx, tx); err != nil {
			return nil, err
		}
	}
	pc := &planContext{ctlSchema: ctl, sources: map[string]*relation{}, targets: map[string]*targetState{},
		rowCounts: map[string]int64{}, maxCross: env.maxCross(), rowStore: map[string]json.RawMessage{}}
	for _, o := range s.Outputs() {
		if t := ds[o]; t.sink == sink.Postgres && sinkTo == sink.Postgres {
			pc.rowStore[o] = t.schema
		}
	}
	hydrated := map[string]*relation{}
	nhydrated := 0
	txns, err := env.windowTxns(ctx, tx)
	if err != nil {
		return nil, err
	}
	rr, err := env.startRefresh(ctx, tx, s, ds, sinkTo)
	if err != nil {
		return nil, err
	}
	env.refresh = rr
	// read reads dataset id, as a source when source is set (in delta mode
	// perhaps only its window's rows), else whole.
	read := func(id string, source bool, filter []facade.Range) (*relation, error) {
		d := ds[id]
		sc, err := datasetSchema(id, d.schema)
		if err != nil {
			return nil, err
		}
		if err := checkFilter(id, sc, filter); err != nil {
			return nil, err
		}
		var sr sourceRead
		if source {
			if sr, err = env.sourceRead(ctx, id, d, txns, filter); err != nil {
				return nil, err
			}
		}
		if d.sink == sink.Relation {
			r, err := relationRelation(ctx, tx, id, d.relation, sc)
			if err != nil {
				return nil, err
			}
			if source && rr != nil {
				rr.rebuild[id] = func(cond string, keys any) *relation {
					return filteredRelation(keyedRelation(r, d.relation, cond, keys), filter)
				}
			}
			return filteredRelation(r, filter), nil
		}
		if d.sink != sink.Iceberg {
			jc, ok := builtinJSONColumns(sc, visible)
			if !ok {
				if jc, err = jsonColumns(ctx, tx, sc); err != nil {
					return nil, err
				}
			}
			if source && rr != nil {
				rr.rebuild[id] = func(cond string, _ any) *relation {
					return filteredRelation(rowStoreRelation(ctl, id, sc, jc, sr.rowTxns, cond), filter)
				}
			}
			return filteredRelation(rowStoreRelation(ctl, id, sc, jc, sr.rowTxns, ""), filter), nil
		}
		if cols := rr.mapped(id); source && cols != nil && sr.appended == nil {
			// A mapped Iceberg source of a declared output: its whole read
			// waits until the run is known to be full; an incremental run
			// reads the affected keys only (refreshRun.restrict).
			r, fill, err := env.hydrateTable(ctx, tx, id, sc, nhydrated, true)
			if err != nil {
				return nil, err
			}
			n := nhydrated
			nhydrated++
			rr.later[id] = func() error { return fill(env.scan(ctx, id, sc, filter)) }
			rr.keyedIce[id] = func() (*relation, error) {
				return env.keyedIceberg(ctx, tx, id, sc, cols, 500+n, filter, rr.HasNull, rr.changedSince(id))
			}
			return filteredRelation(r, filter), nil
		}
		if source && rr != nil && env.modelRun == nil && sr.appended == nil {
			// An unmapped Iceberg source of a declared output: read whole,
			// by a full run or by an incremental one with affected keys,
			// but not by a run that has none (refreshRun.restrict).
			r, fill, err := env.hydrateTable(ctx, tx, id, sc, nhydrated, true)
			if err != nil {
				return nil, err
			}
			nhydrated++
			rr.later[id] = func() error { return fill(env.scan(ctx, id, sc, filter)) }
			return filteredRelation(r, filter), nil
		}
		if source && env.modelRun != nil && filter == nil && sr.appended == nil {
			// A Model's Iceberg source: read whole or by touched keys once
			// the run knows its changes (Model.planSources).
			r, err := env.lazyModelSource(ctx, tx, id, sc, nhydrated)
			nhydrated++
			return r, err
		}
		whole := filter == nil && sr.appended == nil // a filtered or delta read is not the whole dataset
		if r, ok := hydrated[id]; ok && whole {
			return r, nil
		}
		rows := sr.appended
		if rows == nil {
			rows = env.scan(ctx, id, sc, filter)
		}
		r, err := env.hydrate(ctx, tx, id, sc, nhydrated, rows)
		if err != nil {
			return nil, err
		}
		nhydrated++
		if whole {
			hydrated[id] = r
		}
		return filteredRelation(r, filter), nil
	}
	for _, id := range s.Sources() {
		if _, done := pc.sources[id]; done {
			continue
		}
		r, err := read(id, true, env.sourceFilter[id])
		if err != nil {
			return nil, err
		}
		pc.sources[id] = r
		pc.rowCounts[id] = ds[id].rowCount
	}
	if sp, ok := s.(sourcePlanner); ok {
		ps, err := sp.planSources(ctx, tx, env, pc, sinkTo, ds)
		for i := range ps {
			ps[i].builtinVisible = visible
		}
		return ps, err
	}
	if q, ok := s.(appender); ok && q.appendOutput() != "" {
		// An append moving its output to the other sink rewrites the
		// current target first (see Query.plan).
		out := q.appendOutput()
		t := ds[out]
		st := &targetState{flip: t.sink != "" && t.sink != sinkTo}
		if st.flip && len(t.schema) > 0 {
			r, err := read(out, false, nil)
			if err != nil {
				return nil, err
			}
			st.rel = r
		}
		pc.targets[out] = st
	}
	if dep, ok := s.(Deploy); ok {
		// A deploy deduplicates its source by key: a registered table
		// whose unique keys prove it needs none skips that step.
		if r := pc.sources[dep.Source]; r != nil && r.table != "" && (dep.Mode == KindSnapshotReplace || dep.Mode == KindAppendNew) {
			if r.unique, err = uniqueKeys(ctx, tx, r.table); err != nil {
				return nil, err
			}
		}
		// Tier B deploys, and any deploy moving its output to the other
		// sink, read the current target from where it lives.
		t := ds[dep.Target]
		st := &targetState{flip: t.sink != "" && t.sink != sinkTo}
		switch mode := env.incremental(dep, ds, st.flip); mode {
		case incrementalMerge:
			st.merge = true
			pc.targets[dep.Target] = st
			return planWith(s, pc, visible)
		case incrementalKeys:
			probe, ok, err := env.probeKeys(ctx, tx, dep, ds, pc)
			if err != nil {
				return nil, err
			}
			st.probe = probe
			if !ok {
				if st.rel, err = env.hydrateKeys(ctx, tx, dep, ds, pc, nhydrated); err != nil {
					return nil, err
				}
				st.keyOnly = true
			}
			pc.targets[dep.Target] = st
			return planWith(s, pc, visible)
		}
		if (dep.Mode != KindAppendAlways || st.flip) && t.sink != "" && len(t.schema) > 0 {
			r, err := read(dep.Target, false, nil)
			if err != nil {
				return nil, err
			}
			st.rel = r
		}
		pc.targets[dep.Target] = st
	}
	if rr != nil {
		return planRefresh(ctx, tx, env, rr, s, pc, visible)
	}
	ps, err := planWith(s, pc, visible)
	for i := range ps {
		ps[i].slice, ps[i].sliceNote = slicePlan(s, pc, env, ps[i], visible)
	}
	return ps, err
}

// planRefresh plans a declared output: in full, then, when the run is
// incremental, over its mapped sources restricted to the affected keys
// (the full plan kept for a fallback: see applyPlanned).
func planRefresh(ctx context.Context, tx pgx.Tx, env *Env, rr *refreshRun, s WriteStrategy, pc *planContext, visible bool) ([]projection, error) {
	full, err := planWith(s, pc, visible)
	if err != nil {
		return nil, err
	}
	for i := range full {
		full[i].slice, full[i].sliceNote = slicePlan(s, pc, env, full[i], visible)
	}
	if len(full) != 1 {
		return full, rr.fillWhole()
	}
	if err := rr.Decide(ctx, tx, refresh.PlanHash(full[0].sql, full[0].args, rr.Dep)); err != nil {
		return nil, err
	}
	if !rr.incremental() {
		if err := rr.indexSources(ctx, tx, env.schemaName()); err != nil {
			return nil, err
		}
		return full, rr.fillWhole()
	}
	if pc.sources, err = rr.restrict(ctx, tx, env.schemaName(), pc.sources); err != nil {
		return nil, err
	}
	keyed, err := planWith(s, pc, visible)
	if err != nil {
		return nil, err
	}
	keyed[0].sliceNote = "an incremental run reads only the affected keys"
	keyed[0].full = &full[0]
	return keyed, nil
}

// planWith plans s over the resolved pc.
func planWith(s WriteStrategy, pc *planContext, visible bool) ([]projection, error) {
	ps, err := s.plan(pc)
	for i := range ps {
		ps[i].builtinVisible = visible
		ps[i].rowStoreSchema = pc.rowStore[ps[i].output]
	}
	return ps, err
}
