package writestrategy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

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

// planSource is the refresh_positions entry holding the hash of an
// output's statement and declaration at its last run (not a dataset id:
// ids cannot hold a control character).
const planSource = "\x01plan"

// refreshRun is a run of a declared output: the facts gathered in the
// write's transaction (a REPEATABLE READ one, whose snapshot is the
// sources' read), the decision, and what to store at the commit.
type refreshRun struct {
	log    *changelog.Log
	output string
	dep    *incremental.Dependency
	facts  incremental.RefreshFacts
	report incremental.RefreshReport
	// windows of the sources read from Postgres, by id.
	windows map[string]changelog.Window
	// cols are the mapped sources' key columns, typed.
	cols map[string][]refresh.Col
	// save: the positions to store with the run, by source id.
	save map[string]string
	// plan is the stored plan hash.
	plan    string
	hasNull bool
	// prevRows are the output's recorded rows; prevSchema its columns.
	prevRows   int64
	prevSchema Schema
	// index: row-store sources whose key index is to be built after the
	// run's commit.
	index map[string][]refresh.Col
	// rebuild reads a mapped source restricted by a condition.
	rebuild map[string]func(cond string) *relation
	kinds   map[string]sink.Sink
}

func (r *refreshRun) incremental() bool {
	return r != nil && r.report.Mode == incremental.RefreshIncremental
}

// startRefresh gathers the windows of a declared output's sources in tx
// (whose snapshot is the run's read); nil for an output without a
// declaration.
func (e *Env) startRefresh(ctx context.Context, tx pgx.Tx, s WriteStrategy, ds map[string]datasetRow, sinkTo sink.Sink) (*refreshRun, error) {
	out, dep := declared(s)
	if dep == nil || !e.refreshes {
		return nil, nil
	}
	rr := &refreshRun{log: changelog.New(e.Schema), output: out, dep: dep, windows: map[string]changelog.Window{},
		cols: map[string][]refresh.Col{}, save: map[string]string{}, index: map[string][]refresh.Col{},
		rebuild: map[string]func(string) *relation{}, kinds: map[string]sink.Sink{}, prevRows: ds[out].rowCount}
	rr.prevSchema, _ = ParseSchema(ds[out].schema) // none: the columns differ, the run is full
	rr.facts = incremental.RefreshFacts{Declared: true, Sink: sinkTo, Previous: ds[out].sink, MaxShare: dep.MaxShare}
	positions, err := rr.log.Positions(ctx, tx, out)
	if err != nil {
		return nil, err
	}
	rr.plan = positions[planSource]
	var ids []string
	for _, id := range s.Sources() {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		d := ds[id]
		sc, err := datasetSchema(id, d.schema)
		if err != nil {
			return nil, err
		}
		if m, ok := dep.Sources[id]; ok {
			for _, c := range m {
				for _, sc := range sc.Columns {
					if sc.Name == c {
						rr.cols[id] = append(rr.cols[id], refresh.Col{Name: c, Type: sc.Type})
					}
				}
			}
		}
		_, mapped := dep.Sources[id]
		f := incremental.RefreshSource{ID: id, Mapped: mapped, Rows: d.rowCount}
		rr.kinds[id] = d.sink
		if d.sink == sink.Iceberg {
			f.Reason = "the source lives on Iceberg, whose changes are not read: it is read whole"
			rr.facts.Sources = append(rr.facts.Sources, f)
			continue
		}
		since := positions[id]
		if !strings.HasPrefix(since, refresh.PositionPG) {
			since = ""
		}
		w, err := rr.log.Window(ctx, tx, id, changelog.Position(since))
		if err != nil {
			return nil, err
		}
		f.Known, f.Reason, f.Changes = w.Known, w.Reason, w.Images
		rr.windows[id] = w
		store := true
		switch {
		case d.sink == sink.Relation:
			// The planner's estimate; counted when the table was never
			// analyzed.
			if err := tx.QueryRow(ctx, `SELECT coalesce(max(reltuples), -1)::pg_catalog.int8 FROM pg_catalog.pg_class WHERE oid = pg_catalog.to_regclass($1)`,
				d.relation).Scan(&f.Rows); err != nil {
				return nil, queryError("read relation size", err)
			}
			if f.Rows < 0 && w.Images > 0 {
				if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+relationFrom(d.relation)+` r`).Scan(&f.Rows); err != nil {
					return nil, queryError("count relation", err)
				}
			}
		case !w.Known:
			// A writer that opened its intent before the source was
			// registered may not record its changes: a position is stored
			// only when none of the source's intents is open.
			if err := tx.QueryRow(ctx, `SELECT NOT EXISTS (SELECT 1 FROM `+e.ctlSchema()+`.pipeline_build_transactions WHERE dataset_id = $1 AND status = 'open')`,
				id).Scan(&store); err != nil {
				return nil, queryError("read open intents", err)
			}
		}
		if store {
			rr.save[id] = refresh.PositionPG + string(w.Position)
		}
		rr.facts.Sources = append(rr.facts.Sources, f)
	}
	return rr, nil
}

// planHash identifies an output's statement and declaration.
func planHash(p projection, dep *incremental.Dependency) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%v\x00%q\x00", p.sql, p.args, dep.Key)
	for _, id := range slices.Sorted(maps.Keys(dep.Sources)) {
		fmt.Fprintf(h, "%q=%q\x00", id, dep.Sources[id])
	}
	return "plan:" + hex.EncodeToString(h.Sum(nil)[:16])
}

// decide applies incremental.ChooseRefresh once the output's full plan is
// known, and for an incremental run fills the table of affected keys.
func (rr *refreshRun) decide(ctx context.Context, tx pgx.Tx, full projection) error {
	hash := planHash(full, rr.dep)
	mode, why := incremental.ChooseRefresh(rr.facts)
	if mode == incremental.RefreshIncremental && rr.plan != hash {
		mode, why = incremental.RefreshFull, "the output's statement or declaration changed since its last run"
	}
	if mode == incremental.RefreshIncremental && rr.facts.Sink != sink.Postgres {
		mode, why = incremental.RefreshFull, "a keyed replace of an Iceberg output is not available to this Lakehouse"
	}
	rr.save[planSource] = hash
	rr.report = incremental.RefreshReport{Mode: mode, Reason: why}
	if mode != incremental.RefreshIncremental {
		return nil
	}
	var types []string
	for _, id := range slices.Sorted(maps.Keys(rr.cols)) {
		for _, c := range rr.cols[id] {
			types = append(types, c.Type)
		}
		break
	}
	if _, err := tx.Exec(ctx, refresh.CreateSQL(types)); err != nil {
		return queryError("create affected keys", err)
	}
	for id, cols := range rr.cols {
		w := rr.windows[id]
		if w.Images == 0 {
			continue
		}
		if _, err := tx.Exec(ctx, refresh.InsertSQL(cols, w.SQL), w.Args...); err != nil {
			return queryError("read affected keys", err)
		}
	}
	if err := tx.QueryRow(ctx, refresh.CountSQL(len(types))).Scan(&rr.report.Keys, &rr.hasNull); err != nil {
		return queryError("count affected keys", err)
	}
	if _, err := tx.Exec(ctx, "ANALYZE "+refresh.Table); err != nil {
		return queryError("analyze affected keys", err)
	}
	return nil
}

// restrict returns the sources of an incremental run: every mapped source
// read for the affected keys only.
func (rr *refreshRun) restrict(ctx context.Context, tx pgx.Tx, schema string, sources map[string]*relation) (map[string]*relation, error) {
	out := make(map[string]*relation, len(sources))
	for id, r := range sources {
		out[id] = r
	}
	for _, id := range slices.Sorted(maps.Keys(rr.cols)) {
		cols := rr.cols[id]
		switch rr.kinds[id] {
		case sink.Relation:
			exprs := make([]string, len(cols))
			names := make([]string, len(cols))
			for i, c := range cols {
				exprs[i] = "r." + quoteIdents([]string{c.Name})[0]
				names[i] = c.Name
			}
			r := sources[id]
			var indexed bool
			if r.table == "" {
				indexed = false
			} else if err := tx.QueryRow(ctx, refresh.KeyIndexedSQL, r.table, names).Scan(&indexed); err != nil {
				return nil, queryError("read relation indexes", err)
			}
			if !indexed {
				rr.report.Scanned = append(rr.report.Scanned, id)
			}
			out[id] = rr.rebuild[id](refresh.Cond(exprs, rr.hasNull))
		default:
			if refresh.Canonical(cols) {
				exists, valid, err := refresh.IndexState(ctx, tx, schema, refresh.IndexName(id, cols))
				if err != nil {
					return nil, queryError("read row store indexes", err)
				}
				if !exists || !valid {
					rr.index[id] = cols
				}
			}
			if _, ok := rr.index[id]; ok || !refresh.Canonical(cols) {
				rr.report.Scanned = append(rr.report.Scanned, id)
			}
			out[id] = rr.rebuild[id](refresh.RowStoreCond(id, cols, rr.hasNull))
		}
	}
	return out, nil
}

// keyedRelation is a registered relation read for the rows satisfying
// cond (over its columns as "r"), numbered as read.
func keyedRelation(r *relation, rel, cond string) *relation {
	out := *r
	out.scanOrder, out.only, out.unique = false, nil, nil
	out.render = func(*builder) string {
		return "(SELECT " + (&relation{schema: r.schema}).cols("r") + `, row_number() OVER () AS "__ord" FROM ` + relationFrom(rel) + " r WHERE " + cond + ")"
	}
	return &out
}

// savePositions stores, in tx (the transaction that commits the run), what
// the run read of each source.
func (rr *refreshRun) savePositions(ctx context.Context, tx pgx.Tx) error {
	if rr == nil {
		return nil
	}
	for _, id := range slices.Sorted(maps.Keys(rr.save)) {
		if err := rr.log.SavePosition(ctx, tx, rr.output, id, rr.save[id]); err != nil {
			return err
		}
	}
	return nil
}

// applyKeyed writes an incremental run of a declared output into the row
// store: the output's rows of the affected keys that the recompute no
// longer produces are deleted, the recomputed rows not already there are
// appended, and rows exactly equal to a recomputed one stay in place
// (their row_index and txn_id), counted with their repeats. It records
// the images of what it changed (refresh.ImagesCTE) and returns the rows
// inserted and deleted.
func applyKeyed(ctx context.Context, tx pgx.Tx, ctl string, rr *refreshRun, p projection, keyCols []refresh.Col, enc *rowEncoding, txn any) (ins, del int64, err error) {
	b := newBuilder(p.args)
	ds, t, prev := b.param(p.output), b.param(txn), b.param(rr.prevRows)
	rows := ctl + ".dataset_rows"
	b.w("WITH o AS MATERIALIZED (SELECT x.data, x.n, row_number() OVER (PARTITION BY x.data::pg_catalog.text ORDER BY x.n) AS occ FROM (SELECT ",
		enc.data(), " AS data, row_number() OVER () AS n FROM ", enc.from(p.sql), ") x), ",
		"cur AS MATERIALIZED (SELECT d.row_index, d.data, row_number() OVER (PARTITION BY d.data::pg_catalog.text ORDER BY d.row_index) AS occ FROM ",
		rows, " d WHERE d.dataset_id = ", ds, " AND ", refresh.RowStoreCond(p.output, keyCols, rr.hasNull), "), ",
		"gone AS (SELECT c.row_index FROM cur c WHERE NOT EXISTS (SELECT 1 FROM o WHERE o.data::pg_catalog.text = c.data::pg_catalog.text AND o.occ = c.occ)), ",
		"del AS (DELETE FROM ", rows, " d USING gone g WHERE d.dataset_id = ", ds, " AND d.row_index = g.row_index RETURNING d.data), ",
		"ins AS (INSERT INTO ", rows, " (dataset_id, row_index, data, txn_id) SELECT ", ds,
		", (SELECT coalesce(max(row_index), -1) FROM ", rows, " WHERE dataset_id = ", ds, ") + row_number() OVER (ORDER BY o.n), o.data, ", t,
		"::pg_catalog.uuid FROM o WHERE NOT EXISTS (SELECT 1 FROM cur c WHERE c.data::pg_catalog.text = o.data::pg_catalog.text AND c.occ = o.occ) RETURNING data), ",
		"rec AS (", refresh.ImagesCTE(ctl, ds+"::pg_catalog.text", `SELECT 'D'::"char" AS op, data FROM del UNION ALL SELECT 'I'::"char", data FROM ins`,
			"(SELECT count(*) FROM del) + (SELECT count(*) FROM ins)", prev+"::pg_catalog.int8 - (SELECT count(*) FROM del) + (SELECT count(*) FROM ins)"), ") ",
		"SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM del)")
	if err := tx.QueryRow(ctx, b.String(), b.args...).Scan(&ins, &del); err != nil {
		return 0, 0, queryError("write row store", err)
	}
	return ins, del, nil
}

// applyRefresh writes projection p of a declared output on the Postgres
// arm: keyed when the run is incremental and the output's columns are
// those of its last run, else in full (replaceRows). It returns the
// output's rows and those kept in place.
func applyRefresh(ctx context.Context, tx pgx.Tx, env *Env, p projection, cols Schema, enc *rowEncoding, txn any) (n, preserved int64, err error) {
	rr, ctl := env.refresh, env.ctlSchema()
	if rr.incremental() && !sameSchema(cols, rr.prevSchema) {
		rr.report = incremental.RefreshReport{Mode: incremental.RefreshFull, Reason: "the output's columns changed since its last run"}
	}
	if !rr.incremental() {
		q := p
		if p.full != nil {
			q = *p.full
		}
		n, err = replaceRows(ctx, tx, ctl, q, enc, txn)
		return n, 0, err
	}
	keyCols := make([]refresh.Col, len(rr.dep.Key))
	for i, k := range rr.dep.Key {
		for _, c := range cols.Columns {
			if c.Name == k {
				keyCols[i] = refresh.Col{Name: k, Type: c.Type}
			}
		}
	}
	if refresh.Canonical(keyCols) {
		exists, valid, err := refresh.IndexState(ctx, tx, env.schemaName(), refresh.IndexName(p.output, keyCols))
		if err != nil {
			return 0, 0, queryError("read row store indexes", err)
		}
		if !exists || !valid {
			rr.index[p.output] = keyCols
		}
	}
	ins, del, err := applyKeyed(ctx, tx, ctl, rr, p, keyCols, enc, txn)
	if err != nil {
		return 0, 0, err
	}
	n = rr.prevRows - del + ins
	return n, n - ins, nil
}

// refreshSettings are the settings of the transaction of a write of s: a
// declared output's run reads its sources' windows and its sources in one
// snapshot (REPEATABLE READ).
func refreshSettings(s WriteStrategy, settings string) string {
	if _, dep := declared(s); dep == nil {
		return settings
	}
	return "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; " + settings
}

// registerSources registers the row-store sources of a declared output
// as change sources (their writes then record change images), in a
// transaction of its own before the run: the run that registers a source
// reads it whole.
func (d *Dispatcher) registerSources(ctx context.Context, s WriteStrategy) error {
	if _, dep := declared(s); dep == nil {
		return nil
	}
	ctl := pgx.Identifier{d.cfg.Ledger.Schema()}.Sanitize()
	if _, err := d.db.Exec(ctx, `INSERT INTO `+ctl+`.change_sources (source, installed_xid)
		SELECT id, pg_current_xact_id() FROM `+ctl+`.datasets d WHERE id = ANY($1) AND coalesce(sink, $2) = $2
		AND NOT EXISTS (SELECT 1 FROM `+ctl+`.change_sources c WHERE c.source = d.id)
		ON CONFLICT (source) DO NOTHING`, s.Sources(), string(sink.Postgres)); err != nil {
		return queryError("register change sources", err)
	}
	return nil
}

// afterRefresh builds, after a declared output's run committed, the row
// store's key indexes its next runs read through (concurrently: writers
// of the row store are not blocked). A failure is logged: the runs then
// scan, and report it (RefreshReport.Scanned).
func (d *Dispatcher) afterRefresh(ctx context.Context, rr *refreshRun) {
	if rr == nil {
		return
	}
	ctl := pgx.Identifier{d.cfg.Ledger.Schema()}.Sanitize()
	for _, id := range slices.Sorted(maps.Keys(rr.index)) {
		cols := rr.index[id]
		name := refresh.IndexName(id, cols)
		exists, valid, err := refresh.IndexState(ctx, d.db, d.cfg.Ledger.Schema(), name)
		if err == nil && exists && !valid {
			_, err = d.db.Exec(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+ctl+"."+pgx.Identifier{name}.Sanitize())
		}
		if err == nil {
			_, err = d.db.Exec(ctx, refresh.IndexSQL(ctl+".dataset_rows", id, cols))
		}
		if err != nil {
			d.log.WarnContext(ctx, "lakewrite refresh key index not built", "dataset_id", id, "index", name, "err", err)
		}
	}
}

// Track installs change tracking of the columns of a registered relation
// (RegisterRelation) that is a table, so that the outputs declaring it as
// a source (Transform.Depends, Join.Depends) recompute only what its
// changes touch: triggers record each change's images of columns in the
// change log (package incremental/changelog). Tracking again with other
// columns replaces it; the next run of each output reading it is full. A
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
	if rr == nil || rr.output != output {
		return incremental.RefreshReport{}
	}
	return rr.report
}
