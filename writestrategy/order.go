package writestrategy

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
)

// writeOrderer is a Lakehouse that says in which order a dataset's rows
// must arrive (a *facade.Facade: partitioned tables need their rows
// clustered by partition).
type writeOrderer interface {
	WriteOrder(ctx context.Context, datasetID string) ([]facade.OrderKey, error)
}

// writeOrder asks the Lakehouse for the row order of each Iceberg output
// and records it in env, so ComputeRows orders the compute by it.
func (d *Dispatcher) writeOrder(ctx context.Context, env *Env, intents map[string]*ledger.Intent) error {
	wo, ok := d.cfg.Lakehouse.(writeOrderer)
	if !ok {
		return nil
	}
	for dataset := range intents {
		keys, err := wo.WriteOrder(ctx, dataset)
		if err != nil {
			return fmt.Errorf("writestrategy: row order of %q: %w", dataset, err)
		}
		if len(keys) == 0 {
			continue
		}
		if env.OrderBy == nil {
			env.OrderBy = map[string][]facade.OrderKey{}
		}
		env.OrderBy[dataset] = keys
	}
	return nil
}

// orderedSQL wraps a compute query in an ORDER BY over its output columns.
func orderedSQL(sql string, keys []facade.OrderKey) string {
	if len(keys) == 0 {
		return sql
	}
	var b strings.Builder
	b.WriteString("SELECT * FROM (")
	b.WriteString(sql)
	b.WriteString(") AS lw_ordered ORDER BY ")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pgx.Identifier{k.Column}.Sanitize())
		if k.Descending {
			b.WriteString(" DESC")
		} else {
			b.WriteString(" ASC")
		}
		if k.NullsFirst {
			b.WriteString(" NULLS FIRST")
		} else {
			b.WriteString(" NULLS LAST")
		}
	}
	return b.String()
}
