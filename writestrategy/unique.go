package writestrategy

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"
)

// uniqueKeysSQL lists, for the registered table $1, the column sets the
// catalog proves unique under the equality a PARTITION BY of those columns
// uses: the key columns of each valid, immediate, non-partial unique index
// (or primary key) without expressions whose every column is NOT NULL, is
// indexed with the default operator class of its type and with the
// column's own collation. Only a plain table without inheritance children,
// a partitioned table (its unique indexes span the partitions) or a
// materialized view qualifies; any other relation has no rows.
const uniqueKeysSQL = `SELECT ARRAY(SELECT a.attname::pg_catalog.text
		FROM pg_catalog.unnest(i.indkey::pg_catalog.int2[]) WITH ORDINALITY k(att, n)
		JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.att
		WHERE k.n <= i.indnkeyatts ORDER BY k.n)
	FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indrelid
	WHERE i.indrelid = pg_catalog.to_regclass($1) AND i.indisunique AND i.indisvalid AND i.indimmediate
		AND i.indpred IS NULL AND i.indexprs IS NULL
		AND (c.relkind IN ('p', 'm') OR c.relkind = 'r' AND NOT c.relhassubclass)
		AND NOT EXISTS (SELECT 1
			FROM ROWS FROM (pg_catalog.unnest(i.indkey::pg_catalog.int2[]), pg_catalog.unnest(i.indcollation::pg_catalog.oid[]),
				pg_catalog.unnest(i.indclass::pg_catalog.oid[])) WITH ORDINALITY k(att, coll, opc, n)
			LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.att
			LEFT JOIN pg_catalog.pg_opclass o ON o.oid = k.opc
			WHERE k.n <= i.indnkeyatts
				AND (a.attnum IS NULL OR NOT a.attnotnull OR k.coll IS DISTINCT FROM a.attcollation OR o.opcdefault IS NOT TRUE))`

// uniqueKeys reads the column sets of the registered table rel that hold
// no two rows with equal values (see uniqueKeysSQL). It runs inside the
// write's transaction after the relation's columns were described, so the
// table's lock is held: no index proving a set can be dropped, nor can a
// duplicate be committed, before the rows are read.
func uniqueKeys(ctx context.Context, tx pgx.Tx, rel string) ([][]string, error) {
	rows, err := tx.Query(ctx, uniqueKeysSQL, rel)
	if err != nil {
		return nil, queryError("unique keys of "+rel, err)
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		var cols []string
		if err := rows.Scan(&cols); err != nil {
			return nil, queryError("unique keys of "+rel, err)
		}
		if len(cols) > 0 {
			out = append(out, cols)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, queryError("unique keys of "+rel, err)
	}
	return out, nil
}

// uniqueOn reports whether r provably holds each value of key once: some
// unique column set of r lies within key. A deduplication by key then
// keeps every row.
func (r *relation) uniqueOn(key []string) bool {
	for _, set := range r.unique {
		if len(set) > 0 && !slices.ContainsFunc(set, func(c string) bool { return !slices.Contains(key, c) }) {
			return true
		}
	}
	return false
}
