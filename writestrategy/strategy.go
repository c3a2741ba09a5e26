package writestrategy

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/incremental"
)

// Column is one column of a dataset's declared schema: a name and a
// Postgres type as format_type prints it ("bigint", "numeric(12,2)",
// "timestamp with time zone", "text[]").
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Schema is a dataset's declared schema, stored as JSON in
// datasets.schema. Every write stamps the output's schema there; a dataset
// read as a source must have one.
type Schema struct {
	Columns []Column `json:"columns"`
}

// ParseSchema decodes a declared schema and checks its names and types.
func ParseSchema(raw json.RawMessage) (Schema, error) {
	var s Schema
	if len(raw) == 0 || string(raw) == "null" {
		return s, ErrNoSchema
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, fmt.Errorf("%w: %v", ErrNoSchema, err)
	}
	if len(s.Columns) == 0 {
		return s, ErrNoSchema
	}
	seen := map[string]string{}
	for _, c := range s.Columns {
		if err := checkColumnName(c.Name); err != nil {
			return s, err
		}
		if err := checkType(c.Name, c.Type); err != nil {
			return s, err
		}
		if prev, dup := seen[columnKey(c.Name)]; dup {
			return s, identifierError("column", c.Name, clashReason(prev, c.Name))
		}
		seen[columnKey(c.Name)] = c.Name
	}
	return s, nil
}

// JSON encodes the schema for datasets.schema.
func (s Schema) JSON() json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

func (s Schema) names() []string {
	out := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		out[i] = c.Name
	}
	return out
}

// sameNames reports whether a and b declare the same column names, in any
// order.
func sameNames(a, b Schema) bool {
	if len(a.Columns) != len(b.Columns) {
		return false
	}
	for _, c := range a.Columns {
		if !b.has(c.Name) {
			return false
		}
	}
	return true
}

func (s Schema) has(name string) bool {
	for _, c := range s.Columns {
		if c.Name == name {
			return true
		}
	}
	return false
}

// Kind names a strategy.
type Kind string

// The strategies.
const (
	kindTransform       Kind = "transform"
	kindJoin            Kind = "join"
	kindSplit           Kind = "split"
	KindAppendAlways    Kind = "append_always"
	KindAppendNew       Kind = "append_new"
	KindSnapshotReplace Kind = "snapshot_replace"
)

// WriteStrategy is how an output is computed from its sources. Apply (the
// Postgres path) and ComputeRows (the lakehouse path) are built from one
// projection of the output, so the two paths cannot disagree on what the
// output is.
type WriteStrategy interface {
	// Kind names the strategy.
	Kind() Kind
	// Outputs are the datasets written: one, or two for a split (matched
	// first).
	Outputs() []string
	// Sources are the datasets read.
	Sources() []string
	// Apply is the Postgres path: the output written into the row store
	// inside the caller's transaction.
	Apply(ctx context.Context, tx pgx.Tx, env *Env) ([]WriteResult, error)
	// ComputeRows is the lakehouse path: the same SELECT, streamed as Arrow
	// batches, nothing written.
	ComputeRows(ctx context.Context, tx pgx.Tx, env *Env, opts *cursor.Options) ([]Computed, error)

	plan(pc *planContext) ([]projection, error)
}

// Step is one step of a Transform: a SELECT that may read "source" (the
// transform's source dataset) and the steps before it by name.
type Step struct {
	Name string
	SQL  string // trusted SQL text; values go in Transform.Args as $1, $2, ...
}

// Transform is a chain of SQL steps over a source, composed as CTEs; the
// last step's rows are the output, which is replaced on every run (a full
// rebuild, snapshot mode).
type Transform struct {
	Output string
	Source string
	Steps  []Step
	Args   []any // parameters of the steps' SQL, as $1..$n
	// Depends, when set, declares how the output's rows depend on the
	// source (see "Refresh: recompute only what changed" in the package
	// documentation): a run then recomputes only the key values the
	// source's changes touch, when incremental.ChooseRefresh allows it.
	Depends *incremental.Dependency
}

// JoinType is the type of a Join.
type JoinType string

// Join types.
const (
	innerJoin JoinType = "inner"
	LeftJoin  JoinType = "left"
	FullJoin  JoinType = "full"
	CrossJoin JoinType = "cross"
)

// JoinOn pairs a left column with a right column that must be equal.
type JoinOn struct{ Left, Right string }

// JoinColumn selects an output column from one side: Side is "left" or
// "right"; As renames it (default: Name).
type JoinColumn struct {
	Side string
	Name string
	As   string
}

// Join joins two sources. Without Columns the output is every left column
// then every right column (a name on both sides is an error then: list the
// columns with As). Output order: left rows in source order, then right.
// A CrossJoin (or a join without On) goes through the cross-join preflight.
type Join struct {
	Output      string
	Left, Right string
	Type        JoinType // default (empty): an inner join
	On          []JoinOn
	Columns     []JoinColumn
	// Depends, when set, declares how the output's rows depend on the
	// sides (see Transform.Depends).
	Depends *incremental.Dependency
}

// Split writes a source's rows to two outputs: Matched gets the rows for
// which Predicate is true, Unmatched every other row (false or NULL).
// Both outputs are replaced; they flip between sinks as a pair.
type Split struct {
	Source             string
	Predicate          string // trusted SQL boolean expression over the source's columns
	Args               []any  // parameters of Predicate, as $1..$n
	Matched, Unmatched string
}

// Deploy copies a source into a target with one of the deploy modes:
//
//   - KindAppendAlways: every source row is appended on each run.
//   - KindAppendNew: only source rows whose key (Key columns, or the whole
//     row when Key is empty) is not in the target yet are appended; within
//     the source the first row of a key wins. Skipped = source rows not
//     appended.
//   - KindSnapshotReplace: the target becomes the source deduplicated by key
//     (first row of a key in source order wins). Rows whose key and content
//     are unchanged keep their identity. Preserved = those rows; skipped =
//     the duplicates removed.
//
// The deduplication (a row_number() window over the source by key) is
// skipped when the source is a registered table (RegisterRelation) whose
// catalog proves every key value occurs once: a valid, non-deferrable,
// non-partial unique index or primary key on columns within Key, every
// one NOT NULL, indexed with its type's default operator class and its
// own collation. This is checked inside each write (the table's lock
// held until its rows are read), so a dropped index makes the next write
// deduplicate again. A snapshot_replace over such a source then reads it
// in one pass, in the order it is read.
type Deploy struct {
	Mode   Kind
	Source string
	Target string
	Key    []string
}

// Kind implements WriteStrategy.
func (Transform) Kind() Kind { return kindTransform }

// Outputs implements WriteStrategy.
func (t Transform) Outputs() []string { return []string{t.Output} }

// Sources implements WriteStrategy.
func (t Transform) Sources() []string { return []string{t.Source} }

// Kind implements WriteStrategy.
func (Join) Kind() Kind { return kindJoin }

// Outputs implements WriteStrategy.
func (j Join) Outputs() []string { return []string{j.Output} }

// Sources implements WriteStrategy.
func (j Join) Sources() []string { return []string{j.Left, j.Right} }

// Kind implements WriteStrategy.
func (Split) Kind() Kind { return kindSplit }

// Outputs implements WriteStrategy.
func (s Split) Outputs() []string { return []string{s.Matched, s.Unmatched} }

// Sources implements WriteStrategy.
func (s Split) Sources() []string { return []string{s.Source} }

// Kind implements WriteStrategy.
func (d Deploy) Kind() Kind { return d.Mode }

// Outputs implements WriteStrategy.
func (d Deploy) Outputs() []string { return []string{d.Target} }

// Sources implements WriteStrategy.
func (d Deploy) Sources() []string { return []string{d.Source} }
