// Package refresh builds the SQL of a keyed refresh: the table of
// affected key values a run derives from its sources' change images, the
// conditions that restrict a source read to those keys, the expression
// index the row store keeps for a declared key, and the change records the
// writers of the row store add in their own transaction. It holds no
// state; package writestrategy runs what it builds.
package refresh

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Table is the temporary table of affected keys, dropped at the commit of
// the run's transaction: one column k0..kn-1 per key column, typed as the
// key.
const Table = `"__lw_affected"`

// Col is a key column of a source: its name and its declared type.
type Col struct{ Name, Type string }

// Position prefixes: what refresh_positions holds for a source read from
// Postgres (a pg_snapshot) and from Iceberg (a snapshot id).
const (
	PositionPG      = "pg:"
	PositionIceberg = "ice:"
)

// MaxImages and MaxShare bound the change records of one row-store write:
// a write changing more than MaxImages rows and more than MaxShare of the
// dataset's rows records one 'F' (everything may have changed) instead of
// an image per row. A reader then recomputes in full, which is what a
// change that large costs anyway.
const (
	MaxImages = 10_000
	MaxShare  = 0.1
)

// CreateSQL creates the affected-key table for key types.
func CreateSQL(types []string) string {
	defs := make([]string, len(types))
	for i, t := range types {
		defs[i] = "k" + strconv.Itoa(i) + " " + t
	}
	return "CREATE TEMPORARY TABLE " + Table + " (" + strings.Join(defs, ", ") + ") ON COMMIT DROP"
}

// InsertSQL inserts the distinct key values of a window's images:
// valuesSQL selects, as text v1..vn, the values of cols (the source's
// columns mapped to the key, in the key's order) in each image
// (changelog.Window.ValuesSQL); each is read as its declared type, as the
// row store reads a scalar column.
func InsertSQL(cols []Col, valuesSQL string) string {
	sel := make([]string, len(cols))
	for i, c := range cols {
		sel[i] = "(w.v" + strconv.Itoa(i+1) + ")::" + c.Type
	}
	return "INSERT INTO " + Table + " SELECT DISTINCT " + strings.Join(sel, ", ") + " FROM (" + valuesSQL + ") w"
}

// CountSQL counts the distinct affected keys and tells whether one of
// them holds a NULL.
func CountSQL(n int) string {
	return "SELECT count(*), coalesce(bool_or(" + anyNull("x", n) + "), false) FROM (SELECT DISTINCT * FROM " + Table + ") x"
}

func anyNull(alias string, n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = alias + ".k" + strconv.Itoa(i) + " IS NULL"
	}
	return "(" + strings.Join(parts, " OR ") + ")"
}

func keyCols(alias string, n int, wrap func(string) string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = wrap(alias + ".k" + strconv.Itoa(i))
	}
	return strings.Join(parts, ", ")
}

// Cond is a condition true for a row whose key expressions exprs (one per
// key column, typed as the key) hold an affected key, NULL equal to NULL.
// The NULL branch is added only when an affected key holds a NULL
// (hasNull), so that the common case stays an indexable IN.
func Cond(exprs []string, hasNull bool) string {
	in := "(" + strings.Join(exprs, ", ") + ") IN (SELECT " + keyCols("a", len(exprs), ident) + " FROM " + Table + " a)"
	if !hasNull {
		return "(" + in + ")"
	}
	return "(" + in + " OR " + nullBranch(exprs) + ")"
}

func ident(s string) string { return s }

// IndexedCond is Cond for a source with an index on its key columns (a
// relation for which KeyIndexedSQL finds one): key expression lead, the
// index's first column, is compared with an array of the affected keys
// (= ANY), which the planner serves from the index. For IN (SELECT ...)
// it estimates the affected-key table's rows from its size alone and, on
// a large source, plans a hash join over a scan of every row; the array
// form it estimates small and reads through the index. Over a source
// without an index Cond's hash join is the better plan: = ANY over an
// array that is not a constant compares each row with every key.
//
// keys is the array compared with, a SQL expression typed as an array of
// the lead column's type: a statement parameter holding the keys
// (LeadKeysSQL), whose values the planner sees when it plans the
// statement, so that it estimates the rows read and plans what follows
// (a GROUP BY's hash aggregate rather than a sort) for them. Empty, the
// array is read from Table in the statement, which the planner estimates
// as a few keys whatever their number.
func IndexedCond(exprs []string, lead int, hasNull bool, keys string) string {
	k := "a.k" + strconv.Itoa(lead)
	if keys == "" {
		keys = "ARRAY(SELECT DISTINCT " + k + " FROM " + Table + " a WHERE " + k + " IS NOT NULL)"
	}
	in := exprs[lead] + " = ANY (" + keys + ")"
	if len(exprs) > 1 {
		in += " AND (" + strings.Join(exprs, ", ") + ") IN (SELECT " + keyCols("a", len(exprs), ident) + " FROM " + Table + " a)"
	}
	if !hasNull {
		return "(" + in + ")"
	}
	return "((" + in + ") OR " + nullBranch(exprs) + ")"
}

// MaxParamKeys bounds the affected keys a statement receives as a
// parameter (IndexedCond's keys). The planner estimates an array's rows
// key by key: over an analyzed 1M-row table of 10 rows a key, a GROUP BY
// of the keys' rows planned in 0.2-0.5 ms for 1,000 keys, 1.4 ms for
// 10,000, 3-5 ms for 20,000 and 15-80 ms for 100,000, and read them
// faster than the subselect form up to 10,000 keys (43 against 67 ms
// there) and slower from 20,000 (a scan of every row, which the estimate
// then favours): BenchmarkKeysParamPlanning in writestrategy.
const MaxParamKeys = 10_000

// LeadKeysSQL reads, as the text of an array, the distinct non-NULL values
// of key column lead in Table ('{}' when there are none): the parameter of
// IndexedCond's keys, cast back as ParamKeys says.
func LeadKeysSQL(lead int) string {
	k := "k" + strconv.Itoa(lead)
	return "SELECT coalesce(array_agg(DISTINCT " + k + ")::pg_catalog.text, '{}') FROM " + Table + " WHERE " + k + " IS NOT NULL"
}

// ParamKeys is IndexedCond's keys for the parameter placeholder param
// holding LeadKeysSQL's text, of a key column of type typ: an array of
// typ, which the statement is planned with as a constant. Given only when
// the planner has statistics of the column (KeyIndexedSQL): without, it
// estimates each key's rows at a fixed share of the table, a thousand
// keys at all of it, and plans a scan of every row.
func ParamKeys(param, typ string) string {
	return param + "::" + typ + "[]"
}

// nullBranch is true for a row whose key expressions equal an affected key
// that holds a NULL.
func nullBranch(exprs []string) string {
	eq := make([]string, len(exprs))
	for i, e := range exprs {
		eq[i] = "a.k" + strconv.Itoa(i) + " IS NOT DISTINCT FROM " + e
	}
	return "EXISTS (SELECT 1 FROM " + Table + " a WHERE " + anyNull("a", len(exprs)) + " AND " + strings.Join(eq, " AND ") + ")"
}

// canonical are the types whose to_jsonb text is one per value: a row
// store value of these types equals an affected key exactly when its text
// does, so the row store is filtered (and indexed) on the text.
var canonical = map[string]bool{
	"smallint": true, "integer": true, "bigint": true, "int2": true, "int4": true, "int8": true, "int": true,
	"text": true, "boolean": true, "bool": true, "uuid": true, "date": true,
}

// Canonical reports whether every key column's type has one text per
// value (see RowStoreCond).
func Canonical(cols []Col) bool {
	for _, c := range cols {
		t := strings.TrimPrefix(strings.ToLower(c.Type), "pg_catalog.")
		if !canonical[t] && !strings.HasPrefix(t, "character varying") && !strings.HasPrefix(t, "varchar") {
			return false
		}
	}
	return true
}

// RowStoreCond restricts the rows of dataset (alias d of dataset_rows) to
// the affected keys. For keys of canonical types it compares the stored
// text of each key column, which the index of IndexSQL serves; for others
// it compares typed values (a scan of the dataset's rows).
func RowStoreCond(dataset string, cols []Col, hasNull bool) string {
	exprs := make([]string, len(cols))
	canon := Canonical(cols)
	for i, c := range cols {
		if canon {
			exprs[i] = "(d.data ->> " + Literal(c.Name) + ")"
		} else {
			exprs[i] = "(d.data ->> " + Literal(c.Name) + ")::" + c.Type
		}
	}
	if !canon {
		return Cond(exprs, hasNull)
	}
	// The affected keys as the row store's text (to_jsonb of the typed
	// value, as the row store encodes it). The first column is compared
	// with an array of the keys' values (= ANY), which the planner serves
	// from the index of IndexSQL: for IN (SELECT ...) over the texts, of
	// which it has no statistics, it assumes half the dataset matches
	// and reads all of it.
	text := func(k string) string { return "to_jsonb(" + k + ") #>> '{}'" }
	in := exprs[0] + " = ANY (ARRAY(SELECT DISTINCT " + text("a.k0") + " FROM " + Table + " a))"
	if len(cols) > 1 {
		in = "(" + in + " AND (" + strings.Join(exprs, ", ") + ") IN (SELECT " + keyCols("a", len(cols), text) + " FROM " + Table + " a))"
	}
	cond := "d.dataset_id = " + Literal(dataset) + " AND " + in
	if !hasNull {
		return "(" + cond + ")"
	}
	eq := make([]string, len(cols))
	for i, e := range exprs {
		eq[i] = "to_jsonb(a.k" + strconv.Itoa(i) + ") #>> '{}' IS NOT DISTINCT FROM " + e
	}
	return "(" + cond + " OR EXISTS (SELECT 1 FROM " + Table + " a WHERE " + anyNull("a", len(cols)) + " AND " + strings.Join(eq, " AND ") + "))"
}

// IndexName is the name of the row store's index on dataset's key cols.
func IndexName(dataset string, cols []Col) string {
	h := sha256.New()
	h.Write([]byte(dataset))
	for _, c := range cols {
		h.Write([]byte{0})
		h.Write([]byte(c.Name))
	}
	return "dataset_rows_key_" + hex.EncodeToString(h.Sum(nil)[:8])
}

// IndexSQL creates, concurrently (outside any transaction), the partial
// expression index of dataset's rows on the text of its key columns in
// the row store table rows (schema-qualified). The expressions read text
// only, so no later write of the dataset can fail on them.
func IndexSQL(rows, dataset string, cols []Col) string {
	exprs := make([]string, len(cols))
	for i, c := range cols {
		exprs[i] = "(data ->> " + Literal(c.Name) + ")"
	}
	return "CREATE INDEX CONCURRENTLY IF NOT EXISTS " + pgx.Identifier{IndexName(dataset, cols)}.Sanitize() + " ON " + rows +
		" (" + strings.Join(exprs, ", ") + ") WHERE dataset_id = " + Literal(dataset)
}

// IndexState reports whether the index named name exists in schema and
// whether it is valid (a failed concurrent build leaves it invalid).
func IndexState(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, schema, name string) (exists, valid bool, err error) {
	err = q.QueryRow(ctx, `SELECT count(*) > 0, coalesce(bool_and(i.indisvalid), false) FROM pg_catalog.pg_index i
		JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relname = $1 AND n.nspname = $2`, name, schema).Scan(&exists, &valid)
	return exists, valid, err
}

// KeyIndexedSQL returns the name of the first column of a valid,
// non-partial index of table ($1, a regclass text) whose leading columns
// are the columns $2 (in any order), and whether the planner has
// statistics of that column (see ParamKeys), or no row when it has none.
// The statistics are looked up by the column's schema, table and name,
// which the catalog's indexes find (0.2 ms; a join of pg_stats with the
// catalog on those names hashed all of pg_statistic, 2 ms).
const KeyIndexedSQL = `SELECT (SELECT a.attname::text FROM pg_catalog.pg_attribute a
		WHERE a.attrelid = i.indrelid AND a.attnum = i.indkey[0]),
	EXISTS (SELECT 1 FROM pg_catalog.pg_stats s
		WHERE s.schemaname = (SELECT n.nspname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = i.indrelid)
		AND s.tablename = (SELECT c.relname FROM pg_catalog.pg_class c WHERE c.oid = i.indrelid)
		AND s.attname = (SELECT a.attname FROM pg_catalog.pg_attribute a WHERE a.attrelid = i.indrelid AND a.attnum = i.indkey[0]))
	FROM pg_catalog.pg_index i
	WHERE i.indrelid = $1::pg_catalog.regclass AND i.indisvalid AND i.indpred IS NULL
	AND i.indnkeyatts >= cardinality($2::text[])
	AND (SELECT array_agg(a.attname::text ORDER BY a.attname) FROM pg_catalog.pg_attribute a
		WHERE a.attrelid = i.indrelid AND a.attnum = ANY ((i.indkey::pg_catalog.int2[])[0:cardinality($2::text[]) - 1]))
		= (SELECT array_agg(x ORDER BY x) FROM unnest($2::text[]) x)
	ORDER BY i.indexrelid LIMIT 1`

// Literal quotes s as a SQL string literal whatever
// standard_conforming_strings says.
func Literal(s string) string {
	if strings.Contains(s, `\`) {
		return `E'` + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `'`, `''`) + `'`
	}
	return `'` + strings.ReplaceAll(s, `'`, `''`) + `'`
}

// Registered is a condition true when dataset (a SQL expression) is a
// row-store source whose writes record change images.
func Registered(ctl, dataset string) string {
	return "EXISTS (SELECT 1 FROM " + ctl + ".change_sources WHERE source = " + dataset + " AND relation IS NULL)"
}

// FullSQL records an 'F' for dataset (a SQL expression) when it is
// registered.
func FullSQL(ctl, dataset string) string {
	return "INSERT INTO " + ctl + ".change_log (source, op) SELECT " + dataset + ", 'F' WHERE " + Registered(ctl, dataset)
}

// ImagesCTE is a data-modifying CTE body recording the images of a
// row-store write of dataset (a SQL expression), when it is registered:
// images is a query of (op, data) rows; changed counts them and total is
// the dataset's rows after the write (SQL expressions). A write changing
// more than MaxImages rows and more than MaxShare of total records one 'F'
// instead.
func ImagesCTE(ctl, dataset, images, changed, total string) string {
	big := "((" + changed + ") > " + strconv.Itoa(MaxImages) + " AND (" + changed + ") > " + fmt.Sprint(MaxShare) + " * (" + total + "))"
	return "INSERT INTO " + ctl + ".change_log (source, op, image) SELECT " + dataset + ", x.op, x.data FROM (" + images +
		") x WHERE " + Registered(ctl, dataset) + " AND NOT " + big +
		" UNION ALL SELECT " + dataset + ", 'F', NULL WHERE " + Registered(ctl, dataset) + " AND " + big
}
