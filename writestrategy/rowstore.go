package writestrategy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// The row store's encoding.
//
// Each row of a dataset in the row store is one jsonb object in
// dataset_rows.data, keyed by column name. A row written by this version
// carries the marker key "" (no Postgres column can have an empty name);
// its values are:
//
//   - to_jsonb of the value for the types whose JSON form reads back exactly
//     through jsonb_to_record whatever the session's settings: boolean,
//     the integers, numeric, text, varchar, char, name, uuid, bytea, date,
//     time, timetz, timestamp, timestamptz, and arrays of these;
//   - the value's text form as a JSON string for every other type (float4
//     and float8, json and jsonb, interval, inet, enums, composites, ranges,
//     arrays of these, ...), so -0, NaN and json text (whitespace, key
//     order, duplicate keys) survive, and a json 'null' stays apart from
//     SQL NULL (a JSON null).
//
// Rows without the marker (written before) hold to_jsonb of the whole row
// and read back as they always did.

// rowMarker is merged into every new row: it tells new rows from old ones.
const rowMarker = `'{"": 1}'::pg_catalog.jsonb`

// ErrUnsupportedType: a column's type cannot be stored: an output column's
// type in the row store without loss (an anonymous record, a pseudo-type),
// or a load's Arrow type (see Dispatcher.Load); nothing was written. Cast
// the column in SQL, or the Arrow column before the load. The error names
// the column and its type.
var ErrUnsupportedType = errors.New("writestrategy: column type not supported")

// pgTypeRow is the part of pg_type the encoding needs.
type pgTypeRow struct {
	typtype  byte
	base     uint32 // a domain's base type
	elem     uint32
	category byte
	length   int16
}

// Types whose to_jsonb form reads back exactly (see above).
var jsonExact = map[uint32]bool{
	pgtype.BoolOID: true, pgtype.Int2OID: true, pgtype.Int4OID: true, pgtype.Int8OID: true, pgtype.NumericOID: true,
	pgtype.TextOID: true, pgtype.VarcharOID: true, pgtype.BPCharOID: true, pgtype.NameOID: true, pgtype.UUIDOID: true,
	pgtype.ByteaOID: true, pgtype.DateOID: true, pgtype.TimeOID: true, pgtype.TimetzOID: true,
	pgtype.TimestampOID: true, pgtype.TimestamptzOID: true,
}

// typeRowsCTE is the recursive CTE "t" of the pg_type rows of the oids
// in column "o" of CTE "c", and of the types they are built on (domains'
// base types, arrays' element types).
const typeRowsCTE = `t(oid, typtype, typbasetype, typelem, typcategory, typlen) AS (
	SELECT oid, typtype, typbasetype, typelem, typcategory, typlen FROM pg_catalog.pg_type WHERE oid IN (SELECT o FROM c)
	UNION
	SELECT p.oid, p.typtype, p.typbasetype, p.typelem, p.typcategory, p.typlen FROM pg_catalog.pg_type p JOIN t ON p.oid IN (t.typbasetype, t.typelem)
)`

// typeRowsSelect selects, after typeRowsCTE, the rows readTypes reads:
// first one row per item of "c" (its ordinal "n", the text expression
// itemText, its oid "o"), then the pg_type rows of "t".
func typeRowsSelect(itemText string) string {
	return `SELECT n::pg_catalog.int8, ` + itemText + `, o, NULL::pg_catalog.text, NULL::pg_catalog.oid, NULL::pg_catalog.oid, NULL::pg_catalog.text, NULL::pg_catalog.int2 FROM c
UNION ALL SELECT NULL, NULL, oid, typtype::pg_catalog.text, typbasetype, typelem, typcategory::pg_catalog.text, typlen FROM t`
}

// readTypes reads the rows of typeRowsSelect: the text and oid of each of
// the items items, in order, and the pg_type rows by oid.
func readTypes(rows pgx.Rows, items int, what string) ([]string, []uint32, map[uint32]*pgTypeRow, error) {
	texts := make([]string, items)
	oids := make([]uint32, items)
	types := map[uint32]*pgTypeRow{}
	for rows.Next() {
		var (
			n            *int64
			text         *string
			oid          uint32
			typtype, cat *string
			base, elem   *uint32
			length       *int16
		)
		if err := rows.Scan(&n, &text, &oid, &typtype, &base, &elem, &cat, &length); err != nil {
			rows.Close()
			return nil, nil, nil, queryError(what, err)
		}
		if n != nil {
			if *n < 1 || *n > int64(items) {
				rows.Close()
				return nil, nil, nil, queryError(what, fmt.Errorf("item %d of %d", *n, items))
			}
			if text != nil {
				texts[*n-1] = *text
			}
			oids[*n-1] = oid
			continue
		}
		if typtype == nil || cat == nil || base == nil || elem == nil || length == nil || *typtype == "" || *cat == "" {
			rows.Close()
			return nil, nil, nil, queryError(what, fmt.Errorf("incomplete pg_type row for oid %d", oid))
		}
		types[oid] = &pgTypeRow{typtype: (*typtype)[0], base: *base, elem: *elem, category: (*cat)[0], length: *length}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, nil, queryError(what, err)
	}
	return texts, oids, types, nil
}

// resolvedType is a column type with its domains resolved.
type resolvedType struct {
	base     uint32 // the type under any domains
	elem     uint32 // for an array: its element type under any domains; else 0
	pseudo   bool   // base or element is a pseudo-type (record, anyarray, ...)
	jsonText bool   // base is json or jsonb
}

func resolveType(types map[uint32]*pgTypeRow, oid uint32) resolvedType {
	under := func(o uint32) uint32 {
		for i := 0; i < 64; i++ {
			t := types[o]
			if t == nil || t.typtype != 'd' {
				return o
			}
			o = t.base
		}
		return o
	}
	var r resolvedType
	r.base = under(oid)
	t := types[r.base]
	if t == nil {
		return r
	}
	r.pseudo = t.typtype == 'p'
	r.jsonText = r.base == pgtype.JSONOID || r.base == pgtype.JSONBOID
	if t.category == 'A' && t.elem != 0 && t.length == -1 {
		r.elem = under(t.elem)
		if et := types[r.elem]; et != nil && et.typtype == 'p' {
			r.pseudo = true
		}
	}
	return r
}

// Types the cursor streams in their binary form (and pgx copies back):
// every other type reaches Iceberg as its text form (cursor's
// UnknownAsText).
var streamedBinary = map[uint32]bool{
	pgtype.BoolOID: true, pgtype.Int2OID: true, pgtype.Int4OID: true, pgtype.Int8OID: true,
	pgtype.Float4OID: true, pgtype.Float8OID: true, pgtype.NumericOID: true,
	pgtype.TextOID: true, pgtype.VarcharOID: true, pgtype.BPCharOID: true, pgtype.NameOID: true,
	pgtype.JSONOID: true, pgtype.JSONBOID: true, pgtype.UUIDOID: true, pgtype.ByteaOID: true,
	pgtype.DateOID: true, pgtype.TimestampOID: true, pgtype.TimestamptzOID: true, pgtype.TimeOID: true,
}

// binary reports whether a native table holds this type's values in their
// own Arrow type rather than as text.
func (r resolvedType) binary() bool {
	if r.elem != 0 {
		return streamedBinary[r.elem]
	}
	return streamedBinary[r.base]
}

// exact reports whether to_jsonb of a value of this type reads back exactly.
func (r resolvedType) exact() bool {
	if r.elem != 0 {
		return jsonExact[r.elem]
	}
	return jsonExact[r.base]
}

// rowEncoding encodes the rows of one SELECT into the row store.
type rowEncoding struct {
	sel      []string // the select list over alias "x"
	textForm bool     // some column is stored as its text form
}

// encodingFor returns the encoding of rows with columns cols of types oids
// (whose pg_type rows types holds), or an error wrapping
// ErrUnsupportedType.
func encodingFor(cols Schema, oids []uint32, types map[uint32]*pgTypeRow) (*rowEncoding, error) {
	enc := &rowEncoding{}
	for i, c := range cols.Columns {
		r := resolveType(types, oids[i])
		if r.pseudo {
			return nil, fmt.Errorf("%w by the row store: column %q has type %s, which cannot be read back; cast it to a named type", ErrUnsupportedType, c.Name, c.Type)
		}
		q := pgx.Identifier{c.Name}.Sanitize()
		if r.exact() {
			enc.sel = append(enc.sel, "x."+q)
			continue
		}
		enc.sel = append(enc.sel, "x."+q+"::pg_catalog.text AS "+q)
		enc.textForm = true
	}
	return enc, nil
}

// from returns a FROM item "(...) e" holding the encoded columns of sql's
// rows, in sql's order; data() is the row's jsonb over it.
func (enc *rowEncoding) from(sql string) string {
	return "(SELECT " + strings.Join(enc.sel, ", ") + " FROM (" + sql + "\n) x) e"
}

// data is the encoded row, over the FROM item of from.
func (enc *rowEncoding) data() string { return rowMarker + " || to_jsonb(e.*)" }

// noRestore restores nothing.
func noRestore(context.Context) error { return nil }

// floatDigits makes float text forms exact (extra_float_digits >= 1) for
// the rest of the statement sequence, when the session asks for rounded
// ones; the returned function restores the setting.
func floatDigits(ctx context.Context, tx pgx.Tx) (func(context.Context) error, error) {
	var cur int
	if err := tx.QueryRow(ctx, `SELECT current_setting('extra_float_digits')::pg_catalog.int4`).Scan(&cur); err != nil {
		return nil, queryError("read extra_float_digits", err)
	}
	if cur >= 1 {
		return noRestore, nil
	}
	if _, err := tx.Exec(ctx, `SELECT set_config('extra_float_digits', '1', true)`); err != nil {
		return nil, queryError("set extra_float_digits", err)
	}
	return func(ctx context.Context) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('extra_float_digits', $1, true)`, fmt.Sprint(cur)); err != nil {
			return queryError("restore extra_float_digits", err)
		}
		return nil
	}, nil
}

// declaredTypes resolves the declared column types of s (format_type
// names) and returns them with their oids; a type that no longer exists
// resolves to oid zero.
func declaredTypes(ctx context.Context, tx pgx.Tx, s Schema) ([]resolvedType, []uint32, map[uint32]*pgTypeRow, error) {
	names := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		names[i] = c.Type
	}
	rows, err := tx.Query(ctx, `WITH RECURSIVE c(o, n) AS (
	SELECT coalesce(to_regtype(x)::pg_catalog.oid, 0), i FROM unnest($1::pg_catalog.text[]) WITH ORDINALITY u(x, i)
), `+typeRowsCTE+" "+typeRowsSelect("NULL::pg_catalog.text"), names)
	if err != nil {
		return nil, nil, nil, queryError("read column types", err)
	}
	_, oids, types, err := readTypes(rows, len(names), "read column types")
	if err != nil {
		return nil, nil, nil, err
	}
	out := make([]resolvedType, len(oids))
	for i, o := range oids {
		out[i] = resolveType(types, o)
	}
	return out, oids, types, nil
}

// jsonColumns returns the columns of s whose declared type is json or
// jsonb (or a domain over them): the row store holds them as their text
// in new rows, which jsonb_to_record alone would read as a JSON string.
func jsonColumns(ctx context.Context, tx pgx.Tx, s Schema) (map[string]bool, error) {
	types, _, _, err := declaredTypes(ctx, tx, s)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for i, c := range s.Columns {
		if types[i].jsonText && types[i].elem == 0 {
			out[c.Name] = true
		}
	}
	return out, nil
}

// RowStoreInsert writes the rows of selectSQL (run with args; $1.. in
// selectSQL are args), in its order, into the Postgres row store
// (Env.Schema's dataset_rows) as rows of dataset datasetID written by the
// ledger transaction txnID, inside tx. It encodes them as the Postgres sink
// does, so every value reads back exactly as selectSQL returned it (see the
// package documentation). Rows are numbered after the dataset's last row
// (from 0 when it has none): to replace the dataset's contents, delete its
// rows first in the same transaction. It returns the rows written and
// selectSQL's columns, the schema to declare (ledger.Outcome.Schema) so the
// dataset can be read. A column of a type the row store cannot hold is
// refused with an error matching ErrUnsupportedType before anything is
// written. env may be nil. The rows are recorded as change images when the
// dataset is a change source (see "Refresh: recompute only what changed"
// in the package documentation); rows the caller deletes are not: record
// an 'F' for the dataset in the same transaction then (INSERT INTO
// <schema>.change_log (source, op) VALUES (datasetID, 'F')).
func RowStoreInsert(ctx context.Context, tx pgx.Tx, env *Env, datasetID, txnID, selectSQL string, args ...any) (int64, Schema, error) {
	if env == nil {
		env = &Env{}
	}
	if err := checkDatasetID("dataset", datasetID); err != nil {
		return 0, Schema{}, err
	}
	cols, oids, types, err := describeTypes(ctx, tx, selectSQL, false)
	if err != nil {
		return 0, Schema{}, err
	}
	enc, err := encodingFor(cols, oids, types)
	if err != nil {
		return 0, Schema{}, err
	}
	var txn any
	if txnID != "" {
		txn = txnID
	}
	restore, err := floatDigits(ctx, tx)
	if err != nil {
		return 0, Schema{}, err
	}
	n, err := insertRows(ctx, tx, env.ctlSchema(), projection{output: datasetID, sql: selectSQL, args: args}, enc, txn, true)
	if err != nil {
		return 0, Schema{}, err
	}
	if err := restore(ctx); err != nil {
		return 0, Schema{}, err
	}
	return n, cols, nil
}
