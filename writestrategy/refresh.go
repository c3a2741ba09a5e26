package writestrategy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/incremental/changelog"
	"github.com/lakewrite/lakewrite/internal/refresh"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
)

// checkDepends validates a declaration against the sources' columns
// (before anything is read or written); the output's columns are checked
// once its statement is described (checkDependsOutput).
func checkDepends(d *incremental.Dependency, sources map[string]*relation) error {
	if d == nil {
		return nil
	}
	cols := make(map[string][]string, len(sources))
	for id, r := range sources {
		cols[id] = r.schema.names()
	}
	if err := d.Validate(nil, cols); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// checkDependsOutput validates a projection's declaration against the
// output's described columns.
func checkDependsOutput(p projection, cols Schema) error {
	if p.depends == nil {
		return nil
	}
	if err := p.depends.Validate(cols.names(), nil); err != nil {
		return fmt.Errorf("%w: output %q: %w", ErrInvalid, p.output, err)
	}
	return nil
}

// declared returns the output and declaration of a strategy that has one.
func declared(s WriteStrategy) (string, *incremental.Dependency) {
	switch t := s.(type) {
	case Transform:
		return t.Output, t.Depends
	case Join:
		return t.Output, t.Depends
	}
	return "", nil
}

// refreshRun is a run of a declared output (refresh.Run) with what the
// write dispatch adds: the output's recorded rows and columns, the
// restricted reads of its mapped sources, and the key indexes to build
// after the commit.
type refreshRun struct {
	*refresh.Run
	prevRows   int64
	prevSchema Schema
	// index: row-store datasets whose key index is to be built after the
	// run's commit.
	index map[string][]refresh.Col
	// rebuild reads a mapped source restricted by a condition, and keys,
	// when not nil, the value of its parameter keysParam.
	rebuild map[string]func(cond string, keys any) *relation
	// keyedIce reads a mapped Iceberg source for the affected keys only;
	// later fills the table its whole read is planned over, which only a
	// full run reads (fillWhole).
	keyedIce map[string]func() (*relation, error)
	later    map[string]func() error
}

// fillWhole reads whole the mapped Iceberg sources whose read was put off
// until the run's mode was known: a full run, or an incremental one that
// falls back to its full plan.
func (rr *refreshRun) fillWhole() error {
	if rr == nil {
		return nil
	}
	for _, id := range slices.Sorted(maps.Keys(rr.later)) {
		fill := rr.later[id]
		delete(rr.later, id)
		if err := fill(); err != nil {
			return err
		}
	}
	return nil
}

func (r *refreshRun) incremental() bool { return r != nil && r.Incremental() }

// outputAltered says why output, whose last run was written on Iceberg,
// is not as that run left it: "" when it is, or when the Lakehouse cannot
// tell (see unchangedChecker).
func (e *Env) outputAltered(ctx context.Context, tx pgx.Tx, out string) (string, error) {
	uc, ok := e.Lakehouse.(unchangedChecker)
	if !ok {
		return "", nil
	}
	snaps, err := e.icebergSnapshots(ctx, tx, []string{out})
	if err != nil {
		return "", err
	}
	why := "its last write recorded no Iceberg snapshot"
	if s := snaps[out]; s != 0 {
		if why, err = uc.Unchanged(ctx, out, s); err != nil {
			return "", fmt.Errorf("writestrategy: read the table of output %q: %w", out, err)
		}
	}
	if why == "" {
		return "", nil
	}
	return "the output is not as its last run left it: " + why, nil
}

// unchangedChecker is a Lakehouse that tells whether a table still holds
// the rows a snapshot committed (facade.Facade.Unchanged): an incremental
// run patches the rows of its output's last run, so an output altered
// since runs in full. A Lakehouse without it is not asked.
type unchangedChecker interface {
	Unchanged(ctx context.Context, datasetID string, snapshotID int64) (why string, err error)
}

// startRefresh gathers the windows of a declared output's sources in tx
// (whose snapshot is the run's read); nil for an output without a
// declaration or outside the write dispatch.
func (e *Env) startRefresh(ctx context.Context, tx pgx.Tx, s WriteStrategy, ds map[string]datasetRow, sinkTo sink.Sink) (*refreshRun, error) {
	out, dep := declared(s)
	if dep == nil || !e.refreshes {
		return nil, nil
	}
	var srcs []refresh.Source
	for _, id := range s.Sources() {
		if slices.ContainsFunc(srcs, func(x refresh.Source) bool { return x.ID == id }) {
			continue
		}
		d := ds[id]
		sc, err := datasetSchema(id, d.schema)
		if err != nil {
			return nil, err
		}
		src := refresh.Source{ID: id, Sink: d.sink, Relation: relationFrom(d.relation), Rows: d.rowCount}
		if m, ok := dep.Sources[id]; ok {
			src.Cols = []refresh.Col{}
			for _, c := range m {
				for _, sc := range sc.Columns {
					if sc.Name == c {
						src.Cols = append(src.Cols, refresh.Col{Name: c, Type: sc.Type})
					}
				}
			}
		}
		srcs = append(srcs, src)
	}
	var ice []string
	for _, s := range srcs {
		if s.Sink == sink.Iceberg {
			ice = append(ice, s.ID)
		}
	}
	if ice != nil {
		snaps, err := e.icebergSnapshots(ctx, tx, ice)
		if err != nil {
			return nil, err
		}
		for i := range srcs {
			srcs[i].Snapshot = snaps[srcs[i].ID]
		}
	}
	run, err := refresh.Gather(ctx, tx, changelog.New(e.Schema), e.ctlSchema(), out, dep, sinkTo, ds[out].sink, srcs)
	if err != nil {
		return nil, err
	}
	if run.Facts.Altered == "" && sinkTo == sink.Iceberg && ds[out].sink == sink.Iceberg {
		if run.Facts.Altered, err = e.outputAltered(ctx, tx, out); err != nil {
			return nil, err
		}
	}
	if err := e.icebergChanges(ctx, tx, run, ds); err != nil {
		return nil, err
	}
	rr := &refreshRun{Run: run, prevRows: ds[out].rowCount, index: map[string][]refresh.Col{}, rebuild: map[string]func(string, any) *relation{},
		keyedIce: map[string]func() (*relation, error){}, later: map[string]func() error{}}
	rr.prevSchema, _ = ParseSchema(ds[out].schema) // none: the columns differ, the run is full
	return rr, nil
}

// restrict returns the sources of an incremental run: every mapped source
// read for the affected keys only.
func (rr *refreshRun) restrict(ctx context.Context, tx pgx.Tx, schema string, sources map[string]*relation) (map[string]*relation, error) {
	// Decide has set the transaction's planner settings for keyed reads.
	out := make(map[string]*relation, len(sources))
	for id, r := range sources {
		out[id] = r
	}
	// The unmapped Iceberg sources are read whole, unless no key is
	// affected: then the run reads and writes nothing.
	for _, id := range slices.Sorted(maps.Keys(rr.later)) {
		if _, mapped := rr.Cols[id]; mapped || rr.Report.Keys == 0 {
			continue
		}
		fill := rr.later[id]
		delete(rr.later, id)
		if err := fill(); err != nil {
			return nil, err
		}
	}
	for _, id := range slices.Sorted(maps.Keys(rr.Cols)) {
		cols := rr.Cols[id]
		switch rr.Kinds[id] {
		case sink.Relation:
			exprs := make([]string, len(cols))
			names := make([]string, len(cols))
			for i, c := range cols {
				exprs[i] = "r." + quoteIdents([]string{c.Name})[0]
				names[i] = c.Name
			}
			r := sources[id]
			// lead: the key column first in an index on the key.
			var lead string
			var stats bool
			if r.table != "" {
				err := tx.QueryRow(ctx, refresh.KeyIndexedSQL, r.table, names).Scan(&lead, &stats)
				if err != nil && !errors.Is(err, pgx.ErrNoRows) {
					return nil, queryError("read relation indexes", err)
				}
			}
			cond := refresh.Cond(exprs, rr.HasNull)
			var keys any
			if i := slices.Index(names, lead); i >= 0 {
				// The lead column's keys as a parameter, which the planner
				// estimates the read by, when they are not too many and it
				// has the column's statistics; typed as the affected-key
				// table's column, as the array read in the statement is.
				var param string
				if stats && rr.Report.Keys <= refresh.MaxParamKeys {
					var text string
					if err := tx.QueryRow(ctx, refresh.LeadKeysSQL(i)).Scan(&text); err != nil {
						return nil, queryError("read affected keys", err)
					}
					keys, param = text, refresh.ParamKeys(keysParam, rr.KeyTypes[i])
				}
				cond = refresh.IndexedCond(exprs, i, rr.HasNull, param)
			} else {
				rr.Report.Scanned = append(rr.Report.Scanned, id)
			}
			out[id] = rr.rebuild[id](cond, keys)
		case sink.Iceberg:
			r, err := rr.keyedIce[id]()
			if err != nil {
				return nil, err
			}
			out[id] = r
		default:
			if err := rr.wantIndex(ctx, tx, schema, id, cols); err != nil {
				return nil, err
			}
			if _, ok := rr.index[id]; ok || !refresh.Canonical(cols) {
				rr.Report.Scanned = append(rr.Report.Scanned, id)
			}
			out[id] = rr.rebuild[id](refresh.RowStoreCond(id, cols, rr.HasNull), nil)
		}
	}
	return out, nil
}

// wantIndex queues row-store dataset id's index on its key columns cols
// for building after the run's commit (afterRefresh) when it is missing
// or invalid and cols can have one (refresh.Canonical).
func (rr *refreshRun) wantIndex(ctx context.Context, tx pgx.Tx, schema, id string, cols []refresh.Col) error {
	if !refresh.Canonical(cols) {
		return nil
	}
	exists, valid, err := refresh.IndexState(ctx, tx, schema, refresh.IndexName(id, cols))
	if err != nil {
		return queryError("read row store indexes", err)
	}
	if !exists || !valid {
		rr.index[id] = cols
	}
	return nil
}

// indexSources queues the key index of each mapped row-store source that
// has none (wantIndex): a full run builds it too, so that the next,
// incremental, run reads its affected keys through it.
func (rr *refreshRun) indexSources(ctx context.Context, tx pgx.Tx, schema string) error {
	for _, id := range slices.Sorted(maps.Keys(rr.Cols)) {
		if k := rr.Kinds[id]; k == sink.Relation || k == sink.Iceberg {
			continue
		}
		if err := rr.wantIndex(ctx, tx, schema, id, rr.Cols[id]); err != nil {
			return err
		}
	}
	return nil
}

// keysParam stands, in the condition of a keyed read, for the parameter
// holding its keys (refreshRun.restrict): a NUL, which no identifier or
// literal of the condition holds.
const keysParam = "\x00keys\x00"

// keyedRelation is a registered relation read for the rows satisfying
// cond (over its columns as "r"), unordered (unorderedOrd); keys, when
// not nil, is the value of cond's parameter keysParam.
func keyedRelation(r *relation, rel, cond string, keys any) *relation {
	out := *r
	out.scanOrder, out.only, out.unique = false, nil, nil
	out.render = func(b *builder) string {
		c := cond
		if keys != nil {
			c = strings.ReplaceAll(c, keysParam, b.param(keys))
		}
		return "(SELECT " + (&relation{schema: r.schema}).cols("r") + ", " + unorderedOrd + " FROM " + relationFrom(rel) + " r WHERE " + c + ")"
	}
	return &out
}

// unorderedOrd is the "__ord" of a refresh's keyed read: one constant.
// Only a Transform or a Join is refreshed, and neither keeps a source's
// order for its result (a GROUP BY, a join or an aggregate may reorder
// its rows anyway): their ORDER BY "__ord" then sorts nothing (the
// planner drops a sort by a constant). Numbering the rows instead
// (row_number() OVER ()) made the scan carry every column through the
// numbering and a sort, which cost the recompute about as much as the
// read of the affected rows.
const unorderedOrd = `0::pg_catalog.int8 AS "__ord"`

// applyRefresh writes projection p of a declared output on the Postgres
// arm: keyed when the run is incremental and the output's columns are
// those of its last run, else in full (replaceRows). It returns the
// output's rows and those kept in place.
func applyRefresh(ctx context.Context, tx pgx.Tx, env *Env, p projection, cols Schema, enc *rowEncoding, txn any) (n, preserved int64, err error) {
	rr, ctl := env.refresh, env.ctlSchema()
	if rr.incremental() && !sameSchema(cols, rr.prevSchema) {
		rr.Report = incremental.RefreshReport{Mode: incremental.RefreshFull, Reason: "the output's columns changed since its last run"}
	}
	// The output's key index, which an incremental run reads and writes
	// through, is built after the run's commit when missing, a full run's
	// too: the next run need not scan.
	keyCols := rr.keyCols(cols)
	if err := rr.wantIndex(ctx, tx, env.schemaName(), p.output, keyCols); err != nil {
		return 0, 0, err
	}
	if !rr.incremental() {
		q := p
		if p.full != nil {
			q = *p.full
		}
		if err := rr.fillWhole(); err != nil {
			return 0, 0, err
		}
		n, err = replaceRows(ctx, tx, ctl, q, enc, txn)
		return n, 0, err
	}
	b := newBuilder(p.args)
	ds, t, prev := b.param(p.output), b.param(txn), b.param(rr.prevRows)
	var ins, del int64
	if err := tx.QueryRow(ctx, refresh.KeyedSQL(ctl, ctl+".dataset_rows", ds, t, prev, enc.data(), enc.from(p.sql),
		refresh.RowStoreCond(p.output, keyCols, rr.HasNull)), b.args...).Scan(&ins, &del); err != nil {
		return 0, 0, queryError("write row store", err)
	}
	n = rr.prevRows - del + ins
	return n, n - ins, nil
}

// keyCols are the output's key columns, typed as its columns cols.
func (rr *refreshRun) keyCols(cols Schema) []refresh.Col {
	out := make([]refresh.Col, len(rr.Dep.Key))
	for i, k := range rr.Dep.Key {
		for _, c := range cols.Columns {
			if c.Name == k {
				out[i] = refresh.Col{Name: k, Type: c.Type}
			}
		}
	}
	return out
}

// icebergPlan returns the projection to stream of a declared output on
// the Iceberg arm (p, or its full plan when the run is full) and, when the
// run is incremental, the scope of its replace: the affected keys.
func (rr *refreshRun) icebergPlan(ctx context.Context, tx pgx.Tx, p projection, cols Schema, opts *cursor.Options) (projection, *facade.Scope, error) {
	if rr.incremental() && !sameSchema(cols, rr.prevSchema) {
		rr.Report = incremental.RefreshReport{Mode: incremental.RefreshFull, Reason: "the output's columns changed since its last run"}
	}
	if !rr.incremental() {
		if err := rr.fillWhole(); err != nil {
			return p, nil, err
		}
		if p.full != nil {
			return *p.full, nil, nil
		}
		return p, nil, nil
	}
	keys, err := refresh.ScopeKeys(ctx, tx, rr.keyCols(cols), opts)
	if err != nil {
		return p, nil, err
	}
	return p, &facade.Scope{Columns: rr.Dep.Key, Keys: keys}, nil
}

// savePositions stores, in a transaction of its own, what the run of an
// Iceberg output about to commit its snapshot read of its sources, with
// the run's txn id (SetTxn): the next run uses them when that write is the
// output's last committed one (a snapshot that landed, its ledger commit
// rolled forward by Recover after a crash), and runs in full otherwise.
func (d *Dispatcher) savePositions(ctx context.Context, rr *refreshRun) error {
	if rr == nil {
		return nil
	}
	return pgx.BeginFunc(ctx, d.db, func(tx pgx.Tx) error { return rr.SavePositions(ctx, tx) })
}

// refreshSettings are the settings of the transaction of a write of s: a
// declared output's run, and a Model's, reads its sources' windows and its
// sources in one snapshot (REPEATABLE READ).
func refreshSettings(s WriteStrategy, settings string) string {
	_, isModel := s.(Model)
	if _, dep := declared(s); dep == nil && !isModel {
		return settings
	}
	return "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; " + settings
}

// registerSources registers the row-store sources of a declared output,
// and the source of a Model, as change sources (their writes then record
// change images), in a transaction of its own before the run: the run
// that registers a source reads it whole.
func (d *Dispatcher) registerSources(ctx context.Context, s WriteStrategy) error {
	if _, isModel := s.(Model); !isModel {
		if _, dep := declared(s); dep == nil {
			return nil
		}
	}
	ctl := pgx.Identifier{d.cfg.Ledger.Schema()}.Sanitize()
	if _, err := d.db.Exec(ctx, refresh.RegisterSQL(ctl), s.Sources(), string(sink.Postgres)); err != nil {
		return queryError("register change sources", err)
	}
	return nil
}

// afterRefresh trims the change log of the run's Postgres sources
// (trimConsumed) and builds, after a declared output's run committed, the
// row store's key indexes its next runs read through (concurrently: writers
// of the row store are not blocked). A failure is logged: the runs then
// scan, and report it (RefreshReport.Scanned).
func (d *Dispatcher) afterRefresh(ctx context.Context, rr *refreshRun) {
	if rr == nil {
		return
	}
	d.trimConsumed(ctx, slices.Collect(maps.Keys(rr.Windows)))
	if len(rr.index) == 0 {
		return
	}
	exec := func(ctx context.Context, sql string) error { _, err := d.db.Exec(ctx, sql); return err }
	if err := refresh.BuildIndexes(ctx, exec, d.db, d.cfg.Ledger.Schema(), rr.index); err != nil {
		d.log.WarnContext(ctx, "lakewrite refresh key index not built", "dataset_id", rr.Output, "err", err)
	}
}

// Track installs change tracking of the columns of a registered relation
// (RegisterRelation) that is a table, so that the outputs declaring it as
// a source (Transform.Depends, Join.Depends) recompute only what its
// changes touch: triggers record each change's images of columns in the
// change log (package incremental/changelog). columns must include those
// the declarations map to their keys (and a Model's key): a run whose
// source's tracking does not record one is full and says so
// (RefreshReport.Reason). Tracking again with other columns replaces it;
// the next run of each output reading it is full. A
// relation over a view or a query is refused (ErrInvalid): its changes
// cannot be recorded.
func (d *Dispatcher) Track(ctx context.Context, datasetID string, columns ...string) error {
	var s, rel string
	err := d.db.QueryRow(ctx, `SELECT coalesce(sink, ''), coalesce(relation, '') FROM `+pgx.Identifier{d.cfg.Ledger.Schema()}.Sanitize()+
		`.datasets WHERE id = $1`, datasetID).Scan(&s, &rel)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %q", ledger.ErrDatasetNotFound, datasetID)
	case err != nil:
		return queryError("read dataset", err)
	case sink.Sink(s) != sink.Relation:
		return fmt.Errorf("%w: %q is not a registered relation", ErrInvalid, datasetID)
	case isQuery(rel):
		return fmt.Errorf("%w: %q is registered over a query, whose changes cannot be tracked", ErrInvalid, datasetID)
	}
	if err := changelog.New(d.cfg.Ledger.Schema()).Track(ctx, d.db, datasetID, rel, columns); err != nil {
		if errors.Is(err, changelog.ErrInvalid) {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		return err
	}
	return nil
}

// reportFor is the refresh report of output ("" mode when undeclared).
func (rr *refreshRun) reportFor(output string) incremental.RefreshReport {
	if rr == nil || rr.Output != output {
		return incremental.RefreshReport{}
	}
	return rr.Report
}
