package writestrategy

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/writestrategy/sliced"
)

// sliceOf is how an output is read in slices (Request.Slices): its
// driving source and the output's SELECT over one range of it.
type sliceOf struct {
	src    sliced.Source
	sqlFor func(sliced.Range) (string, []any, error)
	// partition: each slice computes the whole output and keeps the rows
	// of its bucket of partitions (orderedSlices adds the filter).
	partition bool
}

// sliceable is a source relation that can be read by ranges: a row-store
// dataset (row_index) or a registered table (ctid pages).
type sliceable struct {
	src sliced.Source
	at  func(sliced.Range) *relation
}

// slicePlan decides whether output p of s can be written in slices, by
// the rule of Request.Slices, and how; reason says why not.
func slicePlan(s WriteStrategy, pc *planContext, env *Env, p projection, visible bool) (*sliceOf, string) {
	var id string
	switch st := s.(type) {
	case Transform:
		id = st.Source
		if d := st.Depends; d != nil && d.Sources[id] != nil {
			return bucketPlan(s, pc, id, d.Sources[id], p, visible)
		}
	case Deploy:
		if t := pc.targets[st.Target]; st.Mode != KindAppendAlways || (t != nil && (t.flip || t.rel != nil)) {
			return nil, "a " + string(st.Mode) + " is not row-wise over its source"
		}
		id = st.Source
	default:
		return nil, "a " + string(s.Kind()) + " is not row-wise over one source"
	}
	r := pc.sources[id]
	if r == nil || r.slice == nil {
		return nil, fmt.Sprintf("source %q is neither a row-store dataset nor a registered table read whole", id)
	}
	if slices.ContainsFunc(env.orderBy[p.output], func(k facade.OrderKey) bool { return k.Partition }) {
		// Whole partitions per slice: every slice reads the whole source
		// and keeps its partitions' rows (orderedSlices).
		src := r.slice.src
		src.Buckets = true
		return &sliceOf{src: src, partition: true, sqlFor: sliceSQL(s, pc, id, p, visible, func(sliced.Range) *relation { return r })}, ""
	}
	return &sliceOf{src: r.slice.src, sqlFor: sliceSQL(s, pc, id, p, visible, r.slice.at)}, ""
}

// orderedSlices returns the slices of an output written in the order of
// keys (a partitioned or sorted table): each slice's rows in that order
// and, for a partitioned output, only the rows of the slice's bucket of
// partitions (the hash of the partition values), so that each partition
// is written by one slice. cols are the output's columns; why says why the
// output runs as one stream instead.
func orderedSlices(sl *sliceOf, keys []facade.OrderKey, ctlSchema string, kinds columnKinds, cols Schema) (out *sliceOf, why string) {
	var parts []string
	if sl.partition {
		for _, k := range keys {
			if !k.Partition {
				continue
			}
			if k.Bucket == 0 && k.Unit == "" && k.Width == 0 {
				for _, c := range cols.Columns {
					if c.Name == k.Column && !hashable(c.Type) {
						return nil, fmt.Sprintf("partition column %q has type %q, which is not cut into hash buckets", c.Name, c.Type)
					}
				}
			}
			parts = append(parts, orderExpr(k, ctlSchema, kinds))
		}
	}
	inner := sl.sqlFor
	o := *sl
	o.sqlFor = func(rg sliced.Range) (string, []any, error) {
		sql, args, err := inner(rg)
		if err != nil {
			return "", nil, err
		}
		if len(parts) > 0 {
			n := strconv.Itoa(rg.Buckets)
			sql = `SELECT * FROM (` + sql + `) AS "__p" WHERE ((pg_catalog.hash_record_extended(ROW(` + strings.Join(parts, ", ") + `), 0) % ` +
				n + `) + ` + n + `) % ` + n + ` = ` + strconv.Itoa(rg.Index)
		}
		return orderedSQL(sql, keys, ctlSchema, kinds), args, nil
	}
	return &o, ""
}

// sliceSQL returns the SELECT of output p of s over the slice of source
// id that at reads.
func sliceSQL(s WriteStrategy, pc *planContext, id string, p projection, visible bool,
	at func(sliced.Range) *relation) func(sliced.Range) (string, []any, error) {
	return func(rg sliced.Range) (string, []any, error) {
		sub := *pc
		sub.sources = maps.Clone(pc.sources)
		sub.sources[id] = at(rg)
		ps, err := planWith(s, &sub, visible)
		if err != nil {
			return "", nil, err
		}
		for _, q := range ps {
			if q.output == p.output {
				return q.sql, q.args, nil
			}
		}
		return "", nil, fmt.Errorf("%w: output %q not planned", ErrInvalid, p.output)
	}
}

// bucketPlan slices output p of s, declared to depend on source id by its
// columns key (Transform.Depends), into buckets of the key's hash: each
// slice reads the source rows of its bucket, so any output computed per
// key value (an aggregate GROUP BY the key, DISTINCT, a window PARTITION
// BY it) is cut without splitting a key across slices.
func bucketPlan(s WriteStrategy, pc *planContext, id string, key []string, p projection, visible bool) (*sliceOf, string) {
	r := pc.sources[id]
	if r == nil || r.slice == nil {
		return nil, fmt.Sprintf("source %q is neither a row-store dataset nor a registered relation read whole", id)
	}
	types := make([]string, len(key))
	for i, k := range key {
		for _, c := range r.schema.Columns {
			if c.Name == k {
				types[i] = c.Type
			}
		}
		if !hashable(types[i]) {
			return nil, fmt.Sprintf("key column %q of source %q has type %q, which is not cut into hash buckets", k, id, types[i])
		}
	}
	src := r.slice.src
	src.Buckets = true
	return &sliceOf{src: src, sqlFor: sliceSQL(s, pc, id, p, visible, func(rg sliced.Range) *relation {
		return bucketRelation(r, key, rg.Buckets, rg.Index)
	})}, ""
}

// bucketRelation is r read for the rows whose key columns fall in bucket
// k of n: pg_catalog.hash_record_extended of the key, which hashes each
// column by its type's hash function (the same value hashes the same in
// every session, whatever its settings).
func bucketRelation(r *relation, key []string, n, k int) *relation {
	out := *r
	out.slice, out.only = nil, nil
	q := quoteIdents(key)
	for i := range q {
		q[i] = `"__b".` + q[i]
	}
	out.render = func(b *builder) string {
		h := "pg_catalog.hash_record_extended(ROW(" + strings.Join(q, ", ") + "), 0)"
		return "(SELECT * FROM " + r.render(b) + ` "__b" WHERE ((` + h + " % " + strconv.Itoa(n) + ") + " + strconv.Itoa(n) + ") % " +
			strconv.Itoa(n) + " = " + strconv.Itoa(k) + ")"
	}
	return &out
}

// hashable reports whether a key column of type typ (as the catalog
// formats it) is cut into hash buckets: the types whose values have one
// hash per equal value.
func hashable(typ string) bool {
	t := strings.TrimPrefix(strings.ToLower(typ), "pg_catalog.")
	if i := strings.IndexByte(t, '('); i >= 0 {
		t = t[:i] // varchar(n), numeric(p,s), timestamp(p) ...
	}
	switch strings.TrimSpace(t) {
	case "smallint", "integer", "bigint", "int2", "int4", "int8", "int",
		"text", "character varying", "varchar", "character", "char", "bpchar", "name",
		"boolean", "bool", "uuid", "date", "numeric", "bytea",
		"timestamp", "timestamp without time zone", "timestamptz", "timestamp with time zone",
		"time", "time without time zone", "interval", "real", "double precision", "float4", "float8", "oid":
		return true
	}
	return false
}

// stageOutput stages one computed output: in slices (Request.Slices) when
// the output, the lakehouse and the database allow it, else as one stream;
// r records which, and why.
func (d *Dispatcher) stageOutput(ctx context.Context, tx pgx.Tx, req Request, c *Computed, target facade.Target, wreq facade.WriteRequest, r *WriteResult) (facade.Staged, error) {
	r.Slices = 1
	if req.Slices <= 1 {
		return d.cfg.Lakehouse.Stage(ctx, target, wreq)
	}
	f, isFacade := d.cfg.Lakehouse.(*facade.Facade)
	db, isPool := d.db.(sliced.Beginner)
	switch {
	case c.slice == nil:
		r.SliceNote = c.sliceNote
		if r.SliceNote == "" {
			r.SliceNote = "the output was not planned in slices"
		}
	case !isFacade:
		r.SliceNote = fmt.Sprintf("the lakehouse (%T) is not a *facade.Facade", d.cfg.Lakehouse)
	case !isPool:
		r.SliceNote = "the dispatcher's database cannot open a connection per slice (give it a pool)"
	default:
		if why, err := sliced.Check(ctx, tx, c.slice.src); err != nil || why != "" {
			r.SliceNote = why
			if err != nil {
				return nil, err
			}
		}
	}
	if r.SliceNote != "" {
		return d.cfg.Lakehouse.Stage(ctx, target, wreq)
	}
	t0 := time.Now()
	cfg := &sliced.Config{DB: db, Cursor: d.cursorOptions(req), Deadline: d.cfg.SliceDeadline,
		Wrap: func(i int, rows iter.Seq2[arrow.RecordBatch, error]) iter.Seq2[arrow.RecordBatch, error] {
			return d.progress(ctx, c.DatasetID, i, rows)
		},
		SliceDone: func(i int, rows int64) {
			if po, ok := d.cfg.Observer.(progressObserver); ok {
				po.Progress(ctx, ProgressEvent{DatasetID: c.DatasetID, Rows: rows, Elapsed: time.Since(t0), Slice: i})
			}
		}}
	stage := sliced.Stage
	if d.cfg.StageSlices != nil {
		stage = d.cfg.StageSlices
	}
	st, n, rounded, err := stage(ctx, cfg, f, tx, target, wreq, c.slice.src, req.Slices, c.slice.sqlFor)
	r.Slices, c.slicedRounded = n, &rounded
	return st, err
}

// rounded is the numeric values the output's stream (or slices) rounded.
func (c *Computed) rounded() int64 {
	if c.slicedRounded != nil {
		return *c.slicedRounded
	}
	return c.stream.Rounded()
}
