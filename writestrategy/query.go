package writestrategy

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
)

// kindQuery names the query strategy.
const kindQuery Kind = "query"

// queryStrategy writes the rows of a SELECT that reads no dataset (any table, view
// or function of the database, or literal values) into its output: the
// strategy of a load (Dispatcher.Load). The output is replaced with the
// rows, or, with Mode facade.Append, the rows are added after its current
// ones. The
// SELECT runs in the write's transaction (the compute transaction on the
// lakehouse path), so it sees one snapshot of the database.
//
// When an appended output moves to the other sink (a canary flip or a
// revert), its first write there is a full rebuild: its current rows then
// the new ones, as one replace.
type queryStrategy struct {
	Output string
	// SQL is trusted SQL text: one SELECT (or VALUES, WITH ... SELECT),
	// whose values are in Args as $1, $2, ... Its ORDER BY, if any, is the
	// output's row order.
	SQL  string
	Args []any
	// Mode is facade.Replace (also when empty) or facade.Append.
	Mode facade.WriteMode
}

// Kind implements WriteStrategy.
func (queryStrategy) Kind() Kind { return kindQuery }

// Outputs implements WriteStrategy.
func (q queryStrategy) Outputs() []string { return []string{q.Output} }

// Sources implements WriteStrategy: a query reads no dataset.
func (queryStrategy) Sources() []string { return nil }

// Apply writes the output into the row store inside tx; see [Apply].
func (q queryStrategy) Apply(ctx context.Context, tx pgx.Tx, env *Env) ([]WriteResult, error) {
	return applyStrategy(ctx, tx, env, q)
}

// ComputeRows streams the output from tx without writing; see [ComputeRows].
func (q queryStrategy) ComputeRows(ctx context.Context, tx pgx.Tx, env *Env, opts *cursor.Options) ([]Computed, error) {
	return ComputeRows(ctx, tx, env, q, opts)
}

// appender is a strategy that may append to its output whatever its Kind:
// appendOutput returns the output appended to, or "" for a replace.
type appender interface {
	appendOutput() string
}

func (q queryStrategy) appendOutput() string {
	if q.Mode == facade.Append {
		return q.Output
	}
	return ""
}

// appends reports whether s appends to its outputs (its ledger write mode
// is append unless the output moves to another sink).
func appends(s WriteStrategy) bool {
	if a, ok := s.(appender); ok {
		return a.appendOutput() != ""
	}
	return s.Kind() == KindAppendAlways || s.Kind() == KindAppendNew
}

func (q queryStrategy) plan(pc *planContext) ([]projection, error) {
	if err := checkDatasetID("output", q.Output); err != nil {
		return nil, err
	}
	if strings.TrimSpace(q.SQL) == "" {
		return nil, fmt.Errorf("%w: query of %q has no SQL", ErrInvalid, q.Output)
	}
	p := projection{output: q.Output, kind: kindQuery, mode: facade.Replace, sql: q.SQL, args: q.Args,
		frags: []fragment{{text: q.SQL}}}
	switch q.Mode {
	case "", facade.Replace:
		return []projection{p}, nil
	case facade.Append:
	default:
		return nil, fmt.Errorf("%w: query of %q has write mode %q (want facade.Replace or facade.Append)", ErrInvalid, q.Output, q.Mode)
	}
	p.mode = facade.Append
	if ts := pc.targets[q.Output]; ts != nil && ts.flip && ts.rel != nil {
		// The output moves to another sink: write the whole target (its
		// current rows, then the new ones) as a replace.
		tgt := ts.rel
		fb := newBuilder(q.Args)
		cols := tgt.cols("")
		fb.w("SELECT ", cols, " FROM (SELECT ", cols, `, 0 AS "__part", "__ord" FROM `, tgt.render(fb),
			` t UNION ALL SELECT `, cols, `, 1, row_number() OVER () FROM (`)
		p.frags = []fragment{{start: fb.sb.Len(), text: q.SQL}}
		fb.w(q.SQL, "\n", `) n) u ORDER BY "__part", "__ord"`)
		p.sql, p.args, p.mode = fb.String(), fb.args, facade.Replace
	}
	return []projection{p}, nil
}
