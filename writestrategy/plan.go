package writestrategy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/writestrategy/sliced"
)

// relation is a dataset readable by SQL: its business columns plus
// "__ord", the row order (row_index in the row store, __row_index in a
// hydrated native table).
type relation struct {
	datasetID string
	schema    Schema
	// render returns a parenthesized subquery, registering its parameters.
	render func(b *builder) string
	// identity: the relation also exposes "__row_id" and "__created_at"
	// (a hydrated native table).
	identity bool
	// table is the stored name of a registered table relation (whose
	// unique keys the catalog can tell); empty otherwise.
	table string
	// scanOrder: render yields its rows in "__ord" order (a registered
	// relation numbered as it is read), so no ORDER BY is needed to keep
	// that order.
	scanOrder bool
	// unique are column sets proved to hold each value once (see
	// uniqueKeys); read only by deploys, which deduplicate by key.
	unique [][]string
	// only, when not nil, is the relation read for the named columns
	// only (and "__ord"): the row store then extracts only those from
	// each row. An append_new reads its target's keys this way.
	only func(names []string) *relation
	// slice, when not nil, reads the relation by ranges (Request.Slices).
	slice *sliceable
}

func (r *relation) cols(alias string) string {
	q := quoteIdents(r.schema.names())
	if alias != "" {
		for i := range q {
			q[i] = alias + "." + q[i]
		}
	}
	return strings.Join(q, ", ")
}

// rowStoreRelation reads a dataset from dataset_rows, typed by its declared
// schema; deltaTxns, when not nil, limits it to rows written by those
// ledger transactions, and keyCond, when not empty, to the rows of a
// refresh's affected keys (a condition over "d", see refreshRun). jsonCols are the columns declared json or jsonb (or
// a domain over them), which rows of the current encoding hold as their
// text (see rowstore.go); every other value reads back through
// jsonb_to_record in either encoding.
func rowStoreRelation(ctlSchema, datasetID string, s Schema, jsonCols map[string]bool, deltaTxns []string, keyCond string) *relation {
	r := &relation{datasetID: datasetID, schema: s}
	r.only = func(names []string) *relation {
		sub := Schema{}
		for _, c := range s.Columns {
			if slices.Contains(names, c.Name) {
				sub.Columns = append(sub.Columns, c)
			}
		}
		return rowStoreRelation(ctlSchema, datasetID, sub, jsonCols, deltaTxns, keyCond)
	}
	r.render = func(b *builder) string {
		return rowStoreSQL(b, ctlSchema, datasetID, s, jsonCols, deltaTxns, keyCond, nil)
	}
	if keyCond != "" {
		return r // a refresh's keyed read is not sliced
	}
	r.slice = &sliceable{src: sliced.Source{Dataset: datasetID, Rows: ctlSchema + ".dataset_rows"}, at: func(rg sliced.Range) *relation {
		out := *r
		out.only, out.slice = nil, nil
		out.render = func(b *builder) string { return rowStoreSQL(b, ctlSchema, datasetID, s, jsonCols, deltaTxns, "", &rg) }
		return &out
	}}
	return r
}

// rowStoreSQL is rowStoreRelation's subquery, over the rows of rg only
// when not nil.
func rowStoreSQL(b *builder, ctlSchema, datasetID string, s Schema, jsonCols map[string]bool, deltaTxns []string, keyCond string, rg *sliced.Range) string {
	defs := make([]string, len(s.Columns))
	sel := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		q := quoteIdents([]string{c.Name})[0]
		if jsonCols[c.Name] {
			defs[i] = q + " pg_catalog.jsonb"
			sel[i] = "CASE WHEN d.data ? '' THEN (r." + q + " #>> '{}')::" + c.Type + " ELSE r." + q + "::" + c.Type + " END AS " + q
			continue
		}
		defs[i] = q + " " + c.Type
		sel[i] = "r." + q
	}
	// A MATERIALIZED CTE: the planner then knows how many rows the
	// source has (a function scan over jsonb is estimated at one row per
	// input row, which turns joins into nested loops).
	ord := `, d.row_index AS "__ord"`
	if keyCond != "" {
		ord = "" // a refresh's keyed read is unordered (unorderedOrd)
	}
	sql := `(WITH "__rel" AS MATERIALIZED (SELECT ` + strings.Join(sel, ", ") + ord + ` FROM ` + ctlSchema +
		".dataset_rows d CROSS JOIN LATERAL jsonb_to_record(d.data) AS r(" + strings.Join(defs, ", ") +
		") WHERE d.dataset_id = " + b.param(datasetID)
	if deltaTxns != nil {
		sql += " AND d.txn_id = ANY(" + b.param(deltaTxns) + "::pg_catalog.uuid[])"
	}
	if keyCond != "" {
		sql += " AND " + keyCond
	}
	if rg != nil {
		sql += " AND d.row_index >= " + b.param(rg.Lo)
		if rg.Hi >= 0 {
			sql += " AND d.row_index < " + b.param(rg.Hi)
		}
	}
	if keyCond != "" {
		// the constant outside the CTE, where the planner sees it
		return sql + `) SELECT *, ` + unorderedOrd + ` FROM "__rel")`
	}
	return sql + `) SELECT * FROM "__rel")`
}

// tableRelation reads a temporary table holding a hydrated native dataset;
// the columns in asText hold text forms, cast to the declared type.
func tableRelation(datasetID, table string, s Schema, asText map[string]bool) *relation {
	return &relation{datasetID: datasetID, schema: s, identity: true, render: func(b *builder) string {
		return "(SELECT " + selectCast(s, asText) + `, "__row_index" AS "__ord", "__row_id", "__created_at" FROM ` + table + ")"
	}}
}

// plainTableRelation is a temporary table of s's columns only (no
// identity columns), asText as in tableRelation.
func plainTableRelation(datasetID, table string, s Schema, asText map[string]bool) *relation {
	return &relation{datasetID: datasetID, schema: s, render: func(b *builder) string {
		return "(SELECT " + selectCast(s, asText) + " FROM " + table + ")"
	}}
}

// selectCast is the select list of s's columns, those held as text cast
// to their type.
func selectCast(s Schema, asText map[string]bool) string {
	sel := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		q := quoteIdents([]string{c.Name})[0]
		sel[i] = q
		if asText[c.Name] {
			sel[i] = q + "::" + c.Type + " AS " + q
		}
	}
	return strings.Join(sel, ", ")
}

// projection is one output of a strategy: the SELECT of its business rows
// in output order, and how it is written.
type projection struct {
	output string
	kind   Kind
	mode   facade.WriteMode // facade.Replace or facade.Append
	sql    string
	args   []any
	// countSQL counts the source rows the output was drawn from (for
	// skipped); empty when nothing can be skipped.
	countSQL  string
	countArgs []any
	// preserveSQL counts output rows unchanged against the current target
	// (snapshot_replace); empty otherwise.
	preserveSQL  string
	preserveArgs []any
	// target is the current target when preserveSQL is set.
	target *relation
	// identitySQL is sql plus the nullable "__row_id" and "__created_at" of
	// unchanged rows, for the lakehouse path (snapshot_replace over a native
	// target); empty otherwise.
	identitySQL  string
	identityArgs []any
	// mergeKey: the output is written as a merge by these key columns
	// (see merge.go); nil otherwise.
	mergeKey []string
	// probe drops the rows of sql whose key the target holds (an
	// append_new over a native target; see keyprobe.go); nil otherwise.
	probe *keyProbe
	// builtinVisible: the built-in types named through the search path
	// were visible when the plan was made (see builtinVisibleSQL).
	builtinVisible bool
	// rowStoreSchema is the output's declared schema when its rows live
	// in the row store (an append then keeps them; see widenFloats).
	rowStoreSchema json.RawMessage
	// frags are the caller's SQL fragments in sql, for error positions.
	frags []fragment
	// slice: how to read the output in slices; sliceNote why not (nil).
	slice     *sliceOf
	sliceNote string
	// scope, when set, selects the model.KeyColumn values whose output
	// rows the write replaces (every other row stays); "" otherwise.
	scope string
	// depends is the output's declared dependency (Transform.Depends,
	// Join.Depends); nil otherwise.
	depends *incremental.Dependency
	// full is the output's full plan when this one recomputes only a
	// refresh's affected keys; nil otherwise.
	full *projection
}

// targetState is what the plan knows about an output's current contents.
type targetState struct {
	rel *relation // nil when the target is empty or does not exist yet
	// flip: the output is being written to a different sink than the one
	// holding its contents; every strategy then writes a full rebuild.
	flip bool
	// merge: a snapshot_replace over a native target, written as a merge
	// by key (the facade probes the target; see merge.go); rel is nil.
	merge bool
	// keyOnly: rel holds only the target's key columns (append_new).
	keyOnly bool
	// probe: an append_new over a native target whose rows the client
	// filters by key (keyprobe.go); rel is nil.
	probe *keyProbe
}

// planContext holds what planning needs: resolved sources and targets.
type planContext struct {
	ctlSchema string // quoted control-plane schema
	sources   map[string]*relation
	targets   map[string]*targetState
	rowCounts map[string]int64 // recorded datasets.row_count per source
	maxCross  int64
	// rowStore holds the declared schema of each output whose rows live
	// in the row store.
	rowStore map[string]json.RawMessage
}

func (pc *planContext) source(id string) (*relation, error) {
	r, ok := pc.sources[id]
	if !ok {
		return nil, fmt.Errorf("%w: source %q was not resolved", ErrInvalid, id)
	}
	return r, nil
}

func (t Transform) plan(pc *planContext) ([]projection, error) {
	if err := checkDatasetID("output", t.Output); err != nil {
		return nil, err
	}
	src, err := pc.source(t.Source)
	if err != nil {
		return nil, err
	}
	if err := checkDepends(t.Depends, map[string]*relation{t.Source: src}); err != nil {
		return nil, err
	}
	b := newBuilder(t.Args)
	b.w(`WITH "source" AS (SELECT `, src.cols("s"), " FROM ", src.render(b), ` s ORDER BY s."__ord")`)
	last := `"source"`
	seen := map[string]bool{"source": true}
	var frags []fragment
	for _, st := range t.Steps {
		q, err := quoteIdent("step", st.Name)
		if err != nil {
			return nil, err
		}
		if seen[st.Name] {
			return nil, identifierError("step", st.Name, "used twice (or named \"source\")")
		}
		if strings.TrimSpace(st.SQL) == "" {
			return nil, fmt.Errorf("%w: step %q has no SQL", ErrInvalid, st.Name)
		}
		seen[st.Name] = true
		b.w(", ", q, " AS (")
		frags = append(frags, fragment{step: st.Name, start: b.sb.Len(), text: st.SQL})
		b.w(st.SQL, "\n)")
		last = q
	}
	b.w(" SELECT * FROM ", last)
	return []projection{{output: t.Output, kind: kindTransform, mode: facade.Replace, sql: b.String(), args: b.args, frags: frags, depends: t.Depends}}, nil
}

func (j Join) plan(pc *planContext) ([]projection, error) {
	if err := checkDatasetID("output", j.Output); err != nil {
		return nil, err
	}
	left, err := pc.source(j.Left)
	if err != nil {
		return nil, err
	}
	right, err := pc.source(j.Right)
	if err != nil {
		return nil, err
	}
	if err := checkDepends(j.Depends, map[string]*relation{j.Left: left, j.Right: right}); err != nil {
		return nil, err
	}
	kind := j.Type
	if kind == "" {
		kind = innerJoin
	}
	var joinSQL string
	switch kind {
	case innerJoin:
		joinSQL = "JOIN"
	case LeftJoin:
		joinSQL = "LEFT JOIN"
	case FullJoin:
		joinSQL = "FULL JOIN"
	case CrossJoin:
		joinSQL = "CROSS JOIN"
	default:
		return nil, fmt.Errorf("%w: join type %q", ErrInvalid, j.Type)
	}
	if kind != CrossJoin && len(j.On) == 0 {
		return nil, fmt.Errorf("%w: a %s join needs On columns (use CrossJoin for a cartesian product)", ErrInvalid, kind)
	}
	if kind == CrossJoin && len(j.On) > 0 {
		return nil, fmt.Errorf("%w: a cross join takes no On columns", ErrInvalid)
	}
	if kind == CrossJoin {
		// Preflight from the recorded row counts, never a count(*) of the
		// row store (which reads 0 for a native dataset).
		lr, rr := pc.rowCounts[j.Left], pc.rowCounts[j.Right]
		if pc.maxCross > 0 && (lr > 0 && rr > pc.maxCross/lr || lr*rr > pc.maxCross) {
			return nil, crossJoinError(j.Left, j.Right, lr, rr, pc.maxCross)
		}
	}
	sides := map[string]*relation{"left": left, "right": right}
	alias := map[string]string{"left": "l", "right": "r"}
	cols := j.Columns
	if len(cols) == 0 {
		for _, c := range left.schema.Columns {
			cols = append(cols, JoinColumn{Side: "left", Name: c.Name})
		}
		for _, c := range right.schema.Columns {
			cols = append(cols, JoinColumn{Side: "right", Name: c.Name})
		}
	}
	var sel []string
	names := map[string]bool{}
	for _, c := range cols {
		rel, ok := sides[c.Side]
		if !ok {
			return nil, fmt.Errorf("%w: join column %q: side %q is not \"left\" or \"right\"", ErrInvalid, c.Name, c.Side)
		}
		if !rel.schema.has(c.Name) {
			return nil, fmt.Errorf("%w: join column %q is not a column of %s dataset %q", ErrInvalid, c.Name, c.Side, rel.datasetID)
		}
		as := c.As
		if as == "" {
			as = c.Name
		}
		if err := checkColumnName(as); err != nil {
			return nil, err
		}
		if names[columnKey(as)] {
			return nil, identifierError("join output column", as, "appears twice (names are compared case-insensitively); rename one with As")
		}
		names[columnKey(as)] = true
		sel = append(sel, alias[c.Side]+"."+quoteIdents([]string{c.Name})[0]+" AS "+quoteIdents([]string{as})[0])
	}
	b := newBuilder(nil)
	b.w("SELECT ", strings.Join(sel, ", "), " FROM ", left.render(b), " l ", joinSQL, " ", right.render(b), " r")
	for i, on := range j.On {
		if !left.schema.has(on.Left) || !right.schema.has(on.Right) {
			return nil, fmt.Errorf("%w: join condition %q = %q names a column the sources do not have", ErrInvalid, on.Left, on.Right)
		}
		if i == 0 {
			b.w(" ON ")
		} else {
			b.w(" AND ")
		}
		b.w("l.", quoteIdents([]string{on.Left})[0], " = r.", quoteIdents([]string{on.Right})[0])
	}
	b.w(` ORDER BY l."__ord" NULLS LAST, r."__ord" NULLS LAST`)
	return []projection{{output: j.Output, kind: kindJoin, mode: facade.Replace, sql: b.String(), args: b.args, depends: j.Depends}}, nil
}

func (s Split) plan(pc *planContext) ([]projection, error) {
	if err := checkDatasetID("matched output", s.Matched); err != nil {
		return nil, err
	}
	if err := checkDatasetID("unmatched output", s.Unmatched); err != nil {
		return nil, err
	}
	if s.Matched == s.Unmatched {
		return nil, fmt.Errorf("%w: split outputs are the same dataset %q", ErrInvalid, s.Matched)
	}
	if strings.TrimSpace(s.Predicate) == "" {
		return nil, fmt.Errorf("%w: split predicate is empty", ErrInvalid)
	}
	src, err := pc.source(s.Source)
	if err != nil {
		return nil, err
	}
	// One builder for both outputs: they share parameter numbers, so the
	// Postgres path can write them in one combined statement.
	b := newBuilder(s.Args)
	from := src.render(b)
	one := func(output, test string) projection {
		head := "SELECT " + src.cols("s") + " FROM " + from + " s WHERE ("
		sql := head + s.Predicate + "\n) " + test + ` ORDER BY s."__ord"`
		return projection{output: output, kind: kindSplit, mode: facade.Replace, sql: sql, args: b.args,
			frags: []fragment{{step: splitPredicateStep, start: len(head), text: s.Predicate}}}
	}
	return []projection{one(s.Matched, "IS TRUE"), one(s.Unmatched, "IS NOT TRUE")}, nil
}

func (d Deploy) plan(pc *planContext) ([]projection, error) {
	if err := checkDatasetID("target", d.Target); err != nil {
		return nil, err
	}
	src, err := pc.source(d.Source)
	if err != nil {
		return nil, err
	}
	key := d.Key
	if len(key) == 0 {
		key = src.schema.names()
	}
	for _, k := range key {
		if !src.schema.has(k) {
			return nil, fmt.Errorf("%w: key column %q is not a column of source %q", ErrInvalid, k, d.Source)
		}
	}
	ts := pc.targets[d.Target]
	if ts == nil {
		ts = &targetState{}
	}
	tgt := ts.rel
	if tgt != nil && d.Mode == KindSnapshotReplace && !sameNames(src.schema, tgt.schema) {
		// The source's columns changed since the last write (a column
		// added or dropped): no row of the target is unchanged, and the
		// replace is a full rebuild with the new columns.
		tgt = nil
	}
	if tgt != nil && !ts.keyOnly {
		// An append compares keys only; the target's rows read NULL for
		// the columns the source gained since they were written.
		for _, k := range key {
			if !tgt.schema.has(k) {
				return nil, fmt.Errorf("%w: key column %q is not a column of target %q", ErrInvalid, k, d.Target)
			}
		}
	}
	cols := src.cols("")
	keyRow := func(alias string) string { return rowKey(alias, key) }
	p := projection{output: d.Target, kind: d.Mode}
	// countSQL: the source rows considered, for skipped.
	cb := newBuilder(nil)
	cb.w("SELECT count(*) FROM ", src.render(cb), " s")
	p.countSQL, p.countArgs = cb.String(), cb.args

	// A source whose catalog proves the key unique (and never NULL) is
	// already deduplicated: the row_number() window would keep every row.
	unique := src.uniqueOn(key)
	b := newBuilder(nil)
	switch d.Mode {
	case KindAppendAlways:
		p.mode = facade.Append
		p.countSQL = ""
		b.w("SELECT ", cols, " FROM ", src.render(b), ` s ORDER BY "__ord"`)
	case KindAppendNew:
		p.mode = facade.Append
		// The source rows, each key's first (or every row, when the key
		// is unique).
		from := src.render(b) + " s"
		if !unique {
			from = "(SELECT s.*, row_number() OVER (PARTITION BY " + strings.Join(quoteIdents(key), ", ") +
				` ORDER BY s."__ord") AS "__dup" FROM ` + from + `) s WHERE s."__dup" = 1`
		}
		if tgt == nil {
			// No target, or one the client probes (the rows are those of
			// an empty target, filtered as they stream).
			p.probe = ts.probe
			b.w("SELECT ", cols, " FROM ", from)
			if !unique || !src.scanOrder {
				b.w(` ORDER BY s."__ord"`)
			}
			break
		}
		probe := tgt // only the keys are compared
		if tgt.only != nil {
			probe = tgt.only(key)
		}
		b.w("SELECT ", src.cols("s"), " FROM (SELECT s.* FROM ", from, ") s ", newRowsJoin(keyRow, probe.render(b)))
	case KindSnapshotReplace:
		p.mode = facade.Replace
		switch {
		case unique:
			// Every source row is an output row: nothing to count as
			// skipped, and a source read in its own order needs no sort.
			p.countSQL, p.countArgs = "", nil
			b.w("SELECT ", cols, " FROM ", src.render(b), " s")
			if !src.scanOrder {
				b.w(` ORDER BY s."__ord"`)
			}
		default:
			b.w("SELECT ", cols, " FROM (SELECT s.*, row_number() OVER (PARTITION BY ", strings.Join(quoteIdents(key), ", "),
				` ORDER BY s."__ord") AS "__dup" FROM `, src.render(b), ` s) s WHERE s."__dup" = 1 ORDER BY s."__ord"`)
		}
	default:
		return nil, fmt.Errorf("%w: deploy mode %q", ErrInvalid, d.Mode)
	}
	p.sql, p.args = b.String(), b.args
	if d.Mode == KindSnapshotReplace && ts.merge {
		p.mergeKey = key
	}
	if d.Mode == KindSnapshotReplace && tgt != nil && !ts.flip {
		// Output rows equal to a current target row keep their identity.
		pb := newBuilder(b.args)
		all := src.schema.names()
		pb.w("SELECT count(*) FROM (", b.String(), ") o WHERE EXISTS (SELECT 1 FROM ", tgt.render(pb), " t WHERE ",
			rowKey("t", all), " = ", rowKey("o", all), ")")
		p.preserveSQL, p.preserveArgs, p.target = pb.String(), pb.args, tgt
		if tgt.identity {
			// The lakehouse path carries the identity of unchanged rows.
			ib := newBuilder(b.args)
			ib.w("SELECT ", (&relation{schema: src.schema}).cols("o"), `, t."__row_id", t."__created_at" FROM (SELECT x.*, `,
				rowKey("x", all), ` AS "__k", row_number() OVER () AS "__n" FROM (`, b.String(), `) x) o LEFT JOIN (SELECT DISTINCT ON ("__k") "__k", "__row_id", "__created_at" FROM (SELECT `,
				rowKey("t", all), ` AS "__k", t."__row_id", t."__created_at" FROM `, tgt.render(ib), ` t) t0 ORDER BY "__k", "__row_id") t ON t."__k" = o."__k" ORDER BY o."__n"`)
			p.identitySQL, p.identityArgs = ib.String(), ib.args
		}
	}
	if ts.flip && tgt != nil && p.mode == facade.Append {
		// The output moves to another sink: write the whole target (its
		// current rows, then the new ones) as a replace.
		fb := newBuilder(b.args)
		fb.w("SELECT ", cols, " FROM (SELECT ", targetCols(src.schema, tgt.schema), `, 0 AS "__part", "__ord" FROM `, tgt.render(fb),
			` t UNION ALL SELECT `, cols, `, 1, row_number() OVER () FROM (`, b.String(), `) n) u ORDER BY "__part", "__ord"`)
		p.sql, p.args, p.mode = fb.String(), fb.args, facade.Replace
		if p.countSQL != "" {
			// Skipped counts source rows: the target's rows written again
			// are not among them.
			cb := newBuilder(p.countArgs)
			cb.w("SELECT (", p.countSQL, ") + (SELECT count(*) FROM ", tgt.render(cb), " t)")
			p.countSQL, p.countArgs = cb.String(), cb.args
		}
	}
	return []projection{p}, nil
}

// targetCols selects the columns of s from a target declared as ts: a
// column the target lacks (added to the source since) as a NULL of its
// type.
func targetCols(s, ts Schema) string {
	out := quoteIdents(s.names())
	for i, c := range s.Columns {
		if !ts.has(c.Name) {
			out[i] = "NULL::" + c.Type + " AS " + out[i]
		}
	}
	return strings.Join(out, ", ")
}

// newRowsJoin is the anti-join of the deduplicated source s against the
// target rendered as tgt on their rowKey: a FULL JOIN whose WHERE keeps
// the source rows without a target row. Postgres runs a full join only as
// a hash or merge join, never as a nested loop, so the target is read
// once whatever the estimates say; a NOT EXISTS over a source estimated
// at a row or two (a delta read: rows of transactions the statistics have
// not seen) plans a nested-loop anti-join that scans the whole target per
// source row. The WHERE keeps the rows of s ("__ord" is never NULL) and is
// not strict in s's columns (coalesce), so the planner keeps the full join
// rather than reducing it back to an anti-join; the key expression, and so
// its semantics, are rowKey's.
func newRowsJoin(keyRow func(string) string, tgt string) string {
	return "FULL JOIN (SELECT " + keyRow("t") + ` AS "__k" FROM ` + tgt + ` t) t ON ` + keyRow("s") + ` = t."__k"` +
		` WHERE t."__k" IS NULL AND coalesce(s."__ord" IS NOT NULL, false) ORDER BY s."__ord"`
}

// rowKey is a comparable, hashable key of the named columns: a jsonb
// array, so NULLs compare equal and numbers compare by value (1.5 = 1.50),
// and Postgres can hash-join on it.
func rowKey(alias string, names []string) string {
	q := quoteIdents(names)
	for i := range q {
		q[i] = alias + "." + q[i]
	}
	return "jsonb_build_array(" + strings.Join(q, ", ") + ")"
}
