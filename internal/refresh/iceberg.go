package refresh

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/cursor"
)

// KeysSQL selects the distinct affected keys (Table) as the output's key
// columns cols, each cast to its declared type and named after it: the
// rows of an Iceberg output's scoped replace (facade.Scope.Keys).
func KeysSQL(cols []Col) string {
	sel := make([]string, len(cols))
	for i, c := range cols {
		sel[i] = "k" + strconv.Itoa(i) + "::" + c.Type + " AS " + pgx.Identifier{c.Name}.Sanitize()
	}
	return "SELECT DISTINCT " + strings.Join(sel, ", ") + " FROM " + Table
}

// ScopeKeys reads the affected keys, in tx, as one Arrow batch of the
// output's key columns cols, typed as the cursor types the output's own
// columns (opts: the output's stream options). The caller owns the batch.
func ScopeKeys(ctx context.Context, tx pgx.Tx, cols []Col, opts *cursor.Options) (arrow.RecordBatch, error) {
	s, err := cursor.Batches(ctx, tx, KeysSQL(cols), nil, opts)
	if err != nil {
		return nil, fmt.Errorf("refresh: read affected keys: %w", err)
	}
	parts := make([][]arrow.Array, len(cols))
	defer func() {
		for _, p := range parts {
			for _, a := range p {
				a.Release()
			}
		}
	}()
	var rows int64
	for rec, err := range s.All() {
		if err != nil {
			return nil, fmt.Errorf("refresh: read affected keys: %w", err)
		}
		for i := range parts {
			a := rec.Column(i)
			a.Retain()
			parts[i] = append(parts[i], a)
		}
		rows += rec.NumRows()
	}
	out := make([]arrow.Array, len(cols))
	for i, p := range parts {
		if len(p) == 0 {
			out[i] = array.MakeArrayOfNull(memory.DefaultAllocator, s.Schema().Field(i).Type, 0)
			continue
		}
		a, err := array.Concatenate(p, memory.DefaultAllocator)
		if err != nil {
			for _, x := range out[:i] {
				x.Release()
			}
			return nil, fmt.Errorf("refresh: affected keys: %w", err)
		}
		out[i] = a
	}
	rec := array.NewRecordBatch(s.Schema(), out, rows)
	for _, a := range out {
		a.Release()
	}
	return rec, nil
}
