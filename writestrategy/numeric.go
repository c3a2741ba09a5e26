package writestrategy

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/cursor"
)

// cursorOptions are the cursor options of req's compute: the dispatcher's,
// with the request's numeric policy when it sets one.
func (d *Dispatcher) cursorOptions(req Request) *cursor.Options {
	if req.Numeric == cursor.NumericDefault {
		return d.cfg.Cursor
	}
	var o cursor.Options
	if d.cfg.Cursor != nil {
		o = *d.cfg.Cursor
	}
	o.Numeric = req.Numeric
	return &o
}

// ColumnIssue is an output column whose values the Iceberg path would round
// or refuse (see cursor.ColumnIssue).
type ColumnIssue struct {
	DatasetID string
	cursor.ColumnIssue
}

// Preflight computes s inside tx as the Iceberg path would (ComputeRows
// with opts, the options of the cursor; nil means the defaults, so the
// default numeric policy) and decodes every value of every output without
// writing anything or failing at a refused value. It returns the columns
// whose values would be rounded (with counts) or refused (integer digits
// beyond the precision, NaN, ±Infinity, out-of-range dates and timestamps,
// ...), in output and column order; none means the outputs would be written
// exactly. Run it before moving an output to Iceberg: a refused value fails
// that write. The query runs once per output; tx is used as ComputeRows
// uses it (roll it back afterwards: nothing is written, but a native
// source is hydrated into a temporary table).
func Preflight(ctx context.Context, tx pgx.Tx, env *Env, s WriteStrategy, opts *cursor.Options) ([]ColumnIssue, error) {
	computed, err := ComputeRows(ctx, tx, env, s, opts)
	if err != nil {
		return nil, err
	}
	var out []ColumnIssue
	for _, c := range computed {
		issues, err := c.stream.Preflight()
		if err != nil {
			return nil, err
		}
		for _, is := range issues {
			out = append(out, ColumnIssue{DatasetID: c.DatasetID, ColumnIssue: is})
		}
	}
	return out, nil
}
