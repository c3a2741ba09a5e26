package writestrategy

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// widenFloats keeps the rows an append leaves in the row store equal to
// what the other sink reads once a column widens from real to double
// precision (or real[] to double precision[]). The row store holds a real
// value as its own shortest text ("0.1"), which read as double precision
// would be 0.1; Postgres' ALTER TABLE ... TYPE double precision and
// Iceberg's float-to-double promotion both widen the stored single
// precision value instead (0.10000000149011612). So the rows kept are
// rewritten, in the write's transaction and keeping their row_index and
// txn_id, as (value::real)::double precision. The write's float settings
// (extra_float_digits >= 1) keep every digit of the widened text.
func widenFloats(ctx context.Context, tx pgx.Tx, ctl string, p projection, cols Schema) error {
	if len(p.rowStoreSchema) == 0 {
		return nil
	}
	prior, err := ParseSchema(p.rowStoreSchema)
	if err != nil {
		return nil // no usable declared schema: the append declares one
	}
	for _, c := range cols.Columns {
		var expr string
		for _, o := range prior.Columns {
			if o.Name != c.Name {
				continue
			}
			switch {
			case o.Type == "real" && c.Type == "double precision":
				// The current encoding holds the text form; rows of
				// earlier versions hold to_jsonb of the value.
				expr = `CASE WHEN d.data ? '' THEN pg_catalog.to_jsonb(((d.data ->> $2)::pg_catalog.float4::pg_catalog.float8)::pg_catalog.text)` +
					` ELSE pg_catalog.to_jsonb((d.data ->> $2)::pg_catalog.float4::pg_catalog.float8) END`
			case o.Type == "real[]" && c.Type == "double precision[]":
				expr = `CASE WHEN d.data ? '' THEN pg_catalog.to_jsonb(((d.data ->> $2)::pg_catalog.float4[]::pg_catalog.float8[])::pg_catalog.text)` +
					` ELSE pg_catalog.to_jsonb(ARRAY(SELECT (e #>> '{}')::pg_catalog.float4::pg_catalog.float8 FROM pg_catalog.jsonb_array_elements(d.data -> $2) e)) END`
			}
		}
		if expr == "" {
			continue
		}
		sql := `UPDATE ` + ctl + `.dataset_rows d SET data = pg_catalog.jsonb_set(d.data, ARRAY[$2::pg_catalog.text], ` + expr + `)` +
			` WHERE d.dataset_id = $1 AND pg_catalog.jsonb_typeof(d.data -> $2) IN ('string', 'number', 'array')`
		if _, err := tx.Exec(ctx, sql, p.output, c.Name); err != nil {
			return queryError(fmt.Sprintf("widen column %q to double precision", c.Name), err)
		}
	}
	return nil
}
