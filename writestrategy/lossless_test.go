package writestrategy_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/writestrategy"

	"github.com/lakewrite/lakewrite/sink"
)

// textNull stands for SQL NULL in text forms (no Postgres text holds a NUL).
const textNull = "\x00NULL"

// zooTypes are the types of the type zoo, created in each test database.
const zooTypes = `
	CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
	CREATE TYPE pair AS (x double precision, j json, t text);
	CREATE DOMAIN posint AS integer CHECK (VALUE > 0);
	CREATE DOMAIN f8dom AS double precision;
	CREATE DOMAIN jdom AS json;`

// zooSchema: the columns both sinks keep exactly.
var zooSchema = writestrategy.Schema{Columns: []writestrategy.Column{
	{Name: "id", Type: "integer"}, {Name: "b", Type: "boolean"},
	{Name: "f4", Type: "real"}, {Name: "f8", Type: "double precision"},
	{Name: "f4a", Type: "real[]"}, {Name: "f8a", Type: "double precision[]"},
	{Name: "n", Type: "numeric(38,10)"},
	{Name: "j", Type: "json"}, {Name: "jb", Type: "jsonb"}, {Name: "ja", Type: "json[]"}, {Name: "jba", Type: "jsonb[]"},
	{Name: "by", Type: "bytea"}, {Name: "tx", Type: "text"},
	{Name: "d", Type: "date"}, {Name: "ts", Type: "timestamp without time zone"}, {Name: "tz", Type: "timestamp with time zone"},
	{Name: "iv", Type: "interval"}, {Name: "ip", Type: "inet"}, {Name: "e", Type: "mood"}, {Name: "c", Type: "pair"},
	{Name: "dn", Type: "posint"}, {Name: "df", Type: "f8dom"}, {Name: "dj", Type: "jdom"},
	{Name: "rg", Type: "numrange"}, {Name: "iva", Type: "interval[]"},
}}

const zooValues = `(VALUES
	(1, true, '-0'::real, '-0'::float8, ARRAY['-0', NULL, 'NaN']::real[], ARRAY['-0', NULL, 'NaN', '-Infinity', '0.1']::float8[],
	 '-0.0000000001'::numeric(38,10),
	 'null'::json, 'null'::jsonb, ARRAY['null', NULL, '{"b":1,  "a":2, "a":3}']::json[], ARRAY['null', NULL, '{"a": 1.50}']::jsonb[],
	 '\x00ff00'::bytea, E'tab\there "q" \\ ü', date '4713-01-01 BC', timestamp '0001-01-01 00:00:00', timestamptz '1900-01-01 00:00:00+05:30',
	 interval '1 mon -2 days 03:04:05.000006', inet '10.0.0.1/8', 'happy'::mood, ROW('-0', '{"k" :  [1, 1]}', 'a,b')::pair,
	 1::posint, '-0'::f8dom, ' {"a":1, "a":2} '::jdom, numrange(1.50, 2, '[]'), '[0:1]={1 day,-1 mon}'::interval[]),
	(2, false, 'NaN', 'NaN', ARRAY[]::real[], ARRAY[]::float8[], 1.5,
	 '{"b":1,  "a":2, "a":3}', '{"a": 1.50, "b": [true, null]}', ARRAY[]::json[], ARRAY[]::jsonb[],
	 '\x'::bytea, '', date '2000-02-29', timestamp '1999-12-31 23:59:59.999999', timestamptz '9999-12-31 23:59:59.999999+00',
	 interval '-1 year', inet '::1', 'sad', ROW('NaN', 'null', NULL)::pair,
	 2147483647, 'Infinity', 'null', 'empty', ARRAY[]::interval[]),
	(3, NULL, 'Infinity', '-Infinity', ARRAY['Infinity', '-Infinity']::real[], ARRAY[5e-324, 1.7976931348623157e308]::float8[],
	 NULL, '  [1, 2.50, "x"]  ', '"str"', ARRAY['"s"', '1.50']::json[], ARRAY['"s"']::jsonb[],
	 NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, ROW(NULL, NULL, NULL)::pair, NULL, NULL, NULL, '(,)', ARRAY[NULL]::interval[]),
	(4, NULL, '-Infinity', 0.1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	 NULL, NULL, NULL, NULL, NULL)
) v(id, b, f4, f8, f4a, f8a, n, j, jb, ja, jba, by, tx, d, ts, tz, iv, ip, e, c, dn, df, dj, rg, iva)`

var zooSQL = typedSelect(zooSchema, zooValues)

// pgOnlySchema: values the row store keeps and the Iceberg sink refuses.
var pgOnlySchema = writestrategy.Schema{Columns: []writestrategy.Column{
	{Name: "id", Type: "integer"}, {Name: "nu", Type: "numeric"}, {Name: "ts", Type: "timestamp without time zone"},
	{Name: "tz", Type: "timestamp with time zone"}, {Name: "d", Type: "date"}, {Name: "md", Type: "integer[]"},
	{Name: "fmd", Type: "double precision[]"}, {Name: "fb", Type: "double precision[]"},
}}

const pgOnlyValues = `(VALUES
	(1, 'NaN'::numeric, timestamp 'infinity', timestamptz '-infinity', date 'infinity', '{{1,2},{3,NULL}}'::int[],
	 '{{-0,1},{NaN,NULL}}'::float8[], '[0:1]={-0,1}'::float8[]),
	(2, 'Infinity', '-infinity', 'infinity', '-infinity', NULL, NULL, NULL),
	(3, '-Infinity', NULL, NULL, NULL, NULL, NULL, NULL),
	(4, 1.50, NULL, NULL, NULL, NULL, NULL, NULL),
	(5, '-0.000000000000000000000000000000000000000000000001', NULL, NULL, NULL, NULL, NULL, NULL)
) v(id, nu, ts, tz, d, md, fmd, fb)`

var pgOnlySQL = typedSelect(pgOnlySchema, pgOnlyValues)

// typedSelect selects every column of s from "from" as its declared type.
func typedSelect(s writestrategy.Schema, from string) string {
	cols := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		q := pgx.Identifier{c.Name}.Sanitize()
		cols[i] = q + "::" + c.Type + " AS " + q
	}
	return "SELECT " + strings.Join(cols, ", ") + " FROM " + from
}

// textSelect selects every column of s as its Postgres text form.
func textSelect(s writestrategy.Schema, from string) string {
	cols := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		q := pgx.Identifier{c.Name}.Sanitize()
		cols[i] = q + "::text AS " + q
	}
	return "SELECT " + strings.Join(cols, ", ") + " FROM " + from
}

// sourceText returns the text forms of the rows of selectSQL, in its order.
func (w *world) sourceText(s writestrategy.Schema, selectSQL string) [][]string {
	w.t.Helper()
	rows, err := w.pool.Query(context.Background(), textSelect(s, "("+selectSQL+") v"))
	require.NoError(w.t, err)
	var out [][]string
	for rows.Next() {
		vals := make([]*string, len(s.Columns))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(w.t, rows.Scan(ptrs...))
		row := make([]string, len(vals))
		for i, v := range vals {
			row[i] = textNull
			if v != nil {
				row[i] = *v
			}
		}
		out = append(out, row)
	}
	require.NoError(w.t, rows.Err())
	return out
}

// datasetText returns the text forms of the rows of dataset id as lakewrite
// reads it (from the row store, or hydrated from Iceberg), in its order.
func (w *world) datasetText(s writestrategy.Schema, id string) [][]string {
	w.t.Helper()
	ctx := context.Background()
	var out [][]string
	require.NoError(w.t, pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		cs, err := writestrategy.ComputeRows(ctx, tx, &writestrategy.Env{Lakehouse: w.lake}, writestrategy.Transform{Output: id, Source: id,
			Steps: []writestrategy.Step{{Name: "t", SQL: textSelect(s, "source")}}}, nil)
		if err != nil {
			return err
		}
		for rec, err := range cs[0].Batches() {
			if err != nil {
				return err
			}
			for r := 0; r < int(rec.NumRows()); r++ {
				row := make([]string, rec.NumCols())
				for c := range row {
					a := rec.Column(c).(*array.String)
					row[c] = textNull
					if !a.IsNull(r) {
						row[c] = strings.Clone(a.Value(r)) // the batch is borrowed: its buffers are reused
					}
				}
				out = append(out, row)
			}
		}
		return nil
	}))
	return out
}

// textChecksum is the checksum of a dataset's business rows, wherever it
// lives, with columns of types the cursor has no Arrow mapping for as text
// (the world's cursor options).
func (w *world) textChecksum(id string) facade.Checksum {
	w.t.Helper()
	return w.checksum(id)
}

// Every value of every column keeps its Postgres text form on both sinks:
// source -> Postgres sink; source -> Iceberg sink -> back to the Postgres
// sink; the Iceberg table itself; and the checksums agree across sinks.
func TestTypeZooLosslessOnBothSinks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorldWith(t, nil, nil, &cursor.Options{UnknownAsText: true}, nil)
	_, err := w.pool.Exec(ctx, zooTypes)
	require.NoError(t, err)
	want := w.sourceText(zooSchema, zooSQL)
	require.Len(t, want, 4)

	seedRowStore(t, w.pool, "src", zooSchema, zooSQL)
	require.Equal(t, want, w.datasetText(zooSchema, "src"), "source -> row store")

	ensureOutputs(t, w.pool, "pg", "ice", "back")
	pg := w.mustWrite(writestrategy.Transform{Output: "pg", Source: "src"})[0]
	require.Equal(t, sink.Postgres, pg.Sink)
	// Postgres describes a domain-typed output column by its base type.
	outSchema := writestrategy.Schema{Columns: slices.Clone(zooSchema.Columns)}
	base := map[string]string{"posint": "integer", "f8dom": "double precision", "jdom": "json"}
	for i, c := range outSchema.Columns {
		if b, ok := base[c.Type]; ok {
			outSchema.Columns[i].Type = b
		}
	}
	require.Equal(t, outSchema, writestrategy.ResultColumns(pg))
	require.Equal(t, want, w.datasetText(zooSchema, "pg"), "source -> Postgres sink")

	w.iceberg("ice")
	ice := w.mustWrite(writestrategy.Transform{Output: "ice", Source: "src"})[0]
	require.Equal(t, sink.Iceberg, ice.Sink)
	require.Equal(t, want, w.datasetText(zooSchema, "ice"), "source -> Iceberg sink")
	back := w.mustWrite(writestrategy.Transform{Output: "back", Source: "ice"})[0]
	require.Equal(t, sink.Postgres, back.Sink)
	require.Equal(t, want, w.datasetText(zooSchema, "back"), "source -> Iceberg sink -> Postgres sink")

	sum := w.textChecksum("ice")
	require.Equal(t, int64(4), sum.Rows)
	for _, id := range []string{"src", "pg", "back"} {
		require.Equal(t, sum, w.textChecksum(id), id)
	}
}

// Values the Iceberg sink cannot hold (numeric NaN and ±Infinity, infinite
// timestamps and dates, multi-dimensional arrays, unconstrained numeric
// scale, array lower bounds inside text-form arrays) keep their text form in
// the row store.
func TestRowStoreKeepsWhatIcebergRefuses(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	want := w.sourceText(pgOnlySchema, pgOnlySQL)
	seedRowStore(t, w.pool, "src", pgOnlySchema, pgOnlySQL)
	ensureOutputs(t, w.pool, "pg")
	w.mustWrite(writestrategy.Transform{Output: "pg", Source: "src"})
	require.Equal(t, want, w.datasetText(pgOnlySchema, "pg"))
}

// oldReaderText reads a row-store dataset as earlier versions did:
// jsonb_to_record typed by the declared schema, text forms in row order.
func (w *world) oldReaderText(s writestrategy.Schema, id string) [][]string {
	w.t.Helper()
	defs := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		defs[i] = pgx.Identifier{c.Name}.Sanitize() + " " + c.Type
	}
	return w.sourceText(s, `SELECT r.* FROM lakewrite.dataset_rows d CROSS JOIN LATERAL jsonb_to_record(d.data) AS r(`+
		strings.Join(defs, ", ")+`) WHERE d.dataset_id = '`+id+`' ORDER BY d.row_index`)
}

// Rows written by earlier versions (to_jsonb of the row, no marker) read
// exactly as they always did, alone and mixed with new rows; appends and
// snapshot_replaces over them give the output's exact values.
func TestOldRowStoreRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	_, err := w.pool.Exec(ctx, zooTypes)
	require.NoError(t, err)
	want := w.sourceText(zooSchema, zooSQL)

	seedOldRowStore(t, w.pool, "old", zooSchema, zooSQL)
	before := w.oldReaderText(zooSchema, "old")
	require.NotEqual(t, want, before, "the old encoding loses -0 and json text")
	require.Equal(t, before, w.datasetText(zooSchema, "old"))

	// An append over old rows: old rows read as before, new ones exactly.
	seedRowStore(t, w.pool, "src", zooSchema, zooSQL)
	res := w.mustWrite(writestrategy.Deploy{Mode: writestrategy.KindAppendAlways, Source: "src", Target: "old"})[0]
	require.Equal(t, sink.Postgres, res.Sink)
	require.EqualValues(t, 4, res.Rows)
	require.Equal(t, append(slices.Clone(before), want...), w.datasetText(zooSchema, "old"))

	// A snapshot_replace over old rows gives exactly the output; the old
	// rows that read as the output's rows keep their identity (they are
	// rewritten in place in the current encoding), the others are replaced.
	seedOldRowStore(t, w.pool, "old2", zooSchema, zooSQL)
	var same []string
	for i := range want {
		if slices.Equal(want[i], before[i]) {
			same = append(same, fmt.Sprint(i))
		}
	}
	require.NotEmpty(t, same)
	require.Less(t, len(same), len(want))
	res = w.mustWrite(writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "src", Target: "old2", Key: []string{"id"}})[0]
	require.EqualValues(t, 4, res.Rows)
	require.EqualValues(t, len(same), res.Preserved)
	// Kept rows stay first (in their place), new ones follow.
	sorted := func(rows [][]string) [][]string {
		return slices.SortedFunc(slices.Values(rows), func(a, b []string) int { return slices.Compare(a, b) })
	}
	require.Equal(t, sorted(want), sorted(w.datasetText(zooSchema, "old2")))
	kept := rowIndexes(t, w.pool, "old2")
	require.True(t, strings.HasPrefix(kept, strings.Join(same, ",")+","), kept)
	var marked bool
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT bool_and(data ? '') FROM lakewrite.dataset_rows WHERE dataset_id = 'old2'`).Scan(&marked))
	require.True(t, marked)
	// and a second one keeps every row in place.
	idx := rowIndexes(t, w.pool, "old2")
	res = w.mustWrite(writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "src", Target: "old2", Key: []string{"id"}})[0]
	require.EqualValues(t, 4, res.Preserved)
	require.Equal(t, idx, rowIndexes(t, w.pool, "old2"))
	require.Equal(t, sorted(want), sorted(w.datasetText(zooSchema, "old2")))
}

// A column whose type cannot be read back (an anonymous record) is refused
// with ErrUnsupportedType, and nothing is written.
func TestRowStoreRefusesAnonymousRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	seedRowStore(t, w.pool, "src", ordersSchema, ordersSQL, 3)
	ensureOutputs(t, w.pool, "out")
	_, err := w.write(writestrategy.Transform{Output: "out", Source: "src",
		Steps: []writestrategy.Step{{Name: "r", SQL: `SELECT id, ROW(id, name) AS pair FROM source`}}})
	require.ErrorIs(t, err, writestrategy.ErrUnsupportedType)
	require.Empty(t, rowStoreRows(t, w.pool, "out"))

	err = pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		_, _, err := writestrategy.RowStoreInsert(ctx, tx, nil, "out", "", `SELECT ARRAY[ROW(1, 'x')] AS a`)
		return err
	})
	require.ErrorIs(t, err, writestrategy.ErrUnsupportedType)
}

// A session that rounds float text (extra_float_digits <= 0) still stores
// floats exactly, and keeps its setting.
func TestRowStoreExactUnderRoundingSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	schema := writestrategy.Schema{Columns: []writestrategy.Column{{Name: "f", Type: "double precision"}, {Name: "fa", Type: "real[]"}}}
	sql := `SELECT (1/3::float8) AS f, ARRAY[0.1, 1/3.0]::real[] AS fa`
	want := w.sourceText(schema, sql)
	seed(t, w.pool, "r", schema, func(tx pgx.Tx, txn string) int64 {
		_, err := tx.Exec(ctx, `SET LOCAL extra_float_digits = -3`)
		require.NoError(t, err)
		n, _, err := writestrategy.RowStoreInsert(ctx, tx, nil, "r", txn, sql)
		require.NoError(t, err)
		var got string
		require.NoError(t, tx.QueryRow(ctx, `SELECT current_setting('extra_float_digits')`).Scan(&got))
		require.Equal(t, "-3", got)
		return n
	})
	require.Equal(t, want, w.datasetText(schema, "r"))
}

// A snapshot_replace on the Postgres sink keeps a row in place only when
// its values are identical: 0 is not -0, 1.50 is not 1.5, json text with
// other whitespace is another value.
func TestSnapshotReplaceComparesExactly(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	schema := writestrategy.Schema{Columns: []writestrategy.Column{
		{Name: "k", Type: "integer"}, {Name: "f", Type: "double precision"}, {Name: "nu", Type: "numeric"}, {Name: "j", Type: "json"}}}
	v1 := typedSelect(schema, `(VALUES (1, '-0'::float8, 1.5, '{"a":1}'), (2, 0, 1.5, '{"a":1}'), (3, 1, 2, '{"a":1}'), (4, 1, 2, NULL)) v(k, f, nu, j)`)
	v2 := typedSelect(schema, `(VALUES (1, '0', 1.5, '{"a":1}'), (2, 0, 1.50, '{"a":1}'), (3, 1, 2, '{"a": 1}'), (4, 1, 2, NULL)) v(k, f, nu, j)`)
	seedRowStore(t, w.pool, "s1", schema, v1)
	seedRowStore(t, w.pool, "s2", schema, v2)
	ensureOutputs(t, w.pool, "out")
	w.mustWrite(writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "s1", Target: "out", Key: []string{"k"}})
	res := w.mustWrite(writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "s1", Target: "out", Key: []string{"k"}})[0]
	require.EqualValues(t, 4, res.Preserved)
	require.Equal(t, "0,1,2,3", rowIndexes(t, w.pool, "out"))
	res = w.mustWrite(writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "s2", Target: "out", Key: []string{"k"}})[0]
	require.EqualValues(t, 1, res.Preserved)
	require.Equal(t, "3,4,5,6", rowIndexes(t, w.pool, "out"))
	require.Equal(t, w.sourceText(schema, v2+" ORDER BY k DESC LIMIT 1"), w.datasetText(schema, "out")[:1])
	require.Equal(t, w.sourceText(schema, v2+" ORDER BY k LIMIT 3"), w.datasetText(schema, "out")[1:])
}
