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
// and records it in env, so ComputeRows orders the compute by it. The write
// holds its intents' sessions while it asks: the facade bounds the
// catalog's answer (facade.Config.CatalogWait), so that a catalog on a pool
// with no free connection fails the write (ErrNoConnection, see
// writeError) instead of waiting on the other writes.
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
		if env.orderBy == nil {
			env.orderBy = map[string][]facade.OrderKey{}
		}
		env.orderBy[dataset] = keys
	}
	return nil
}

// bucketType reports whether iceberg_bucket hashes a column of this type
// oid as Iceberg does: smallint, integer, bigint (as longs), date, time,
// timestamp, timestamptz, text, varchar (UTF-8 bytes) and bytea. char(n)
// is left out: its cast to text drops the padding the written value keeps.
func bucketType(oid uint32) bool {
	switch oid {
	case 21, 23, 20, 1082, 1083, 1114, 1184, 25, 1043, 17:
		return true
	}
	return false
}

// checkBucketKeys refuses bucket keys over a column whose type
// iceberg_bucket does not hash. cols and oids describe the output; a key
// naming no output column is left to the query to refuse.
func checkBucketKeys(dataset string, cols Schema, oids []uint32, keys []facade.OrderKey) error {
	for _, k := range keys {
		if k.Bucket <= 0 {
			continue
		}
		for i, c := range cols.Columns {
			if c.Name == k.Column && i < len(oids) && !bucketType(oids[i]) {
				return bucketTypeError(dataset, c.Name, c.Type)
			}
		}
	}
	return nil
}

// columnKinds are the output columns of the types whose order keys are
// rendered apart: strings (text, varchar, char, name, and domains over
// them: pg_type category S), timestamptz and the integers.
type columnKinds struct {
	str, tz, integer map[string]bool
}

// kindsOf returns the column kinds of an output.
func kindsOf(cols Schema, oids []uint32, types map[uint32]*pgTypeRow) columnKinds {
	k := columnKinds{str: map[string]bool{}, tz: map[string]bool{}, integer: map[string]bool{}}
	for i, c := range cols.Columns {
		if i >= len(oids) {
			break
		}
		o := oids[i]
		t := types[o]
		for t != nil && t.base != 0 {
			o = t.base
			t = types[o]
		}
		switch {
		case t != nil && t.category == 'S':
			k.str[c.Name] = true
		case o == 1184:
			k.tz[c.Name] = true
		case o == 20 || o == 21 || o == 23:
			k.integer[c.Name] = true
		}
	}
	return k
}

// orderedSQL wraps a compute query in an ORDER BY over its output columns;
// a bucket key orders by ctlSchema.iceberg_bucket(column, N) (ctlSchema
// quoted), a time unit key by date_trunc in UTC, a truncate key by the
// truncated string or integer. A key over a string column orders by its
// bytes (COLLATE "C"), the order Iceberg compares strings in, whatever the
// column's collation: under a linguistic collation the rows of one
// truncate[W] partition need not be adjacent ("ab" < "Ab" < "abc").
func orderedSQL(sql string, keys []facade.OrderKey, ctlSchema string, kinds columnKinds) string {
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
		b.WriteString(orderExpr(k, ctlSchema, kinds))
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

// orderExpr is the expression an order key orders by (see orderedSQL).
func orderExpr(k facade.OrderKey, ctlSchema string, kinds columnKinds) string {
	col := pgx.Identifier{k.Column}.Sanitize()
	switch {
	case k.Bucket > 0:
		return fmt.Sprintf("%s.iceberg_bucket(%s, %d)", ctlSchema, col, k.Bucket)
	case k.Unit != "" && kinds.tz[k.Column]:
		return fmt.Sprintf("pg_catalog.date_trunc('%s', %s, 'UTC')", k.Unit, col)
	case k.Unit != "":
		return fmt.Sprintf("pg_catalog.date_trunc('%s', %s)", k.Unit, col)
	case k.Width > 0 && kinds.str[k.Column]:
		return fmt.Sprintf(`pg_catalog.left(%s::pg_catalog.text, %d) COLLATE "C"`, col, k.Width)
	case k.Width > 0 && kinds.integer[k.Column]:
		return fmt.Sprintf("(%s::pg_catalog.int8 - ((%s::pg_catalog.int8 %% %d) + %d) %% %d)", col, col, k.Width, k.Width, k.Width)
	case kinds.str[k.Column]:
		return col + ` COLLATE "C"`
	}
	return col
}
