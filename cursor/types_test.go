package cursor_test

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/internal/pgtest"
)

const allTypesDDL = `
CREATE TYPE mood AS ENUM ('sad', 'happy');
CREATE DOMAIN money2 AS numeric(8,2);
CREATE TABLE alltypes (
  b bool, i2 int2, i4 int4, i8 int8, f4 float4, f8 float8,
  n numeric(12,2), nu numeric, dm money2,
  tx text, vc varchar(10), bc char(3), nm name, en mood,
  u uuid, by bytea, d date, ts timestamp, tstz timestamptz, tm time,
  j json, jb jsonb,
  ai int4[], at text[], an numeric(6,2)[], ajb jsonb[]
);
INSERT INTO alltypes VALUES (
  true, -2, 40000, 9000000000, 1.5, -2.25,
  1234567890.12, 12345678901234567890.123456789, 42.5,
  'héllo', 'vc', 'ab', 'nm', 'happy',
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '\x00ff10', '2024-02-29', '1999-12-31 23:59:59.123456',
  '2024-06-01 12:00:00+02', '13:14:15.5',
  '{"a": 1}', '{"b": [1, 2]}',
  '{1,NULL,3}', '{"x",NULL}', '{1.5,-2.25}', ARRAY['{"k":1}'::jsonb]
);
INSERT INTO alltypes DEFAULT VALUES;
INSERT INTO alltypes (b, n, nu, ai, at, ts, d) VALUES (false, -0.01, 0, '{}', '{}', '1900-01-01 00:00:00', '1900-01-01');
`

func TestAllTypesRoundTrip(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, allTypesDDL)
	require.NoError(t, err)

	for _, mode := range []cursor.StreamMode{cursor.Direct, cursor.Staged} {
		t.Run(mode.String(), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			s, err := cursor.Batches(ctx, pool, `SELECT * FROM alltypes ORDER BY b DESC NULLS LAST`, nil, &cursor.Options{Mode: mode, Allocator: mem})
			require.NoError(t, err)

			sc := s.Schema()
			wantTypes := map[string]string{
				"b": "bool", "i2": "int16", "i4": "int32", "i8": "int64", "f4": "float32", "f8": "float64",
				"n": "decimal(12, 2)", "nu": "decimal(38, 18)", "dm": "decimal(8, 2)",
				"tx": "utf8", "vc": "utf8", "bc": "utf8", "nm": "utf8", "en": "utf8",
				"u": "fixed_size_binary[16]", "by": "binary", "d": "date32", "ts": "timestamp[us]",
				"tstz": "timestamp[us, tz=UTC]", "tm": "time64[us]", "j": "utf8", "jb": "utf8",
				"ai": "list<item: int32, nullable>", "at": "list<item: utf8, nullable>",
				"an": "list<item: decimal(6, 2), nullable>", "ajb": "list<item: utf8, nullable>",
			}
			wantPG := map[string]string{"b": "bool", "i8": "int8", "n": "numeric", "dm": "numeric", "en": "mood", "u": "uuid",
				"tstz": "timestamptz", "jb": "jsonb", "j": "json", "ai": "_int4", "bc": "bpchar", "ajb": "_jsonb"}
			require.Equal(t, len(wantTypes), sc.NumFields())
			for _, f := range sc.Fields() {
				require.Equal(t, wantTypes[f.Name], f.Type.String(), f.Name)
				require.True(t, f.Nullable, f.Name)
				pgType, ok := f.Metadata.GetValue(cursor.MetaPGType)
				require.True(t, ok, f.Name)
				if w, ok := wantPG[f.Name]; ok {
					require.Equal(t, w, pgType, f.Name)
				}
				js, _ := f.Metadata.GetValue(cursor.MetaJSON)
				require.Equal(t, f.Name == "j" || f.Name == "jb", js == "true", f.Name)
			}
			elem := sc.Field(sc.FieldIndices("ajb")[0]).Type.(*arrow.ListType).ElemField()
			js, _ := elem.Metadata.GetValue(cursor.MetaJSON)
			require.Equal(t, "true", js)

			var batches []arrow.RecordBatch
			for b, err := range s.All() {
				require.NoError(t, err)
				batches = append(batches, b)
			}
			require.Len(t, batches, 1)
			b := batches[0]
			defer b.Release()
			require.EqualValues(t, 3, b.NumRows())
			col := func(name string) arrow.Array { return b.Column(sc.FieldIndices(name)[0]) }

			// Row 0: values.
			require.Equal(t, true, col("b").(*array.Boolean).Value(0))
			require.EqualValues(t, -2, col("i2").(*array.Int16).Value(0))
			require.EqualValues(t, 40000, col("i4").(*array.Int32).Value(0))
			require.EqualValues(t, 9000000000, col("i8").(*array.Int64).Value(0))
			require.EqualValues(t, 1.5, col("f4").(*array.Float32).Value(0))
			require.EqualValues(t, -2.25, col("f8").(*array.Float64).Value(0))
			require.Equal(t, "1234567890.12", col("n").ValueStr(0))
			require.Equal(t, "12345678901234567890.123456789000000000", col("nu").(*array.Decimal128).Value(0).ToString(18))
			require.Equal(t, "42.50", col("dm").(*array.Decimal128).Value(0).ToString(2))
			require.Equal(t, "héllo", col("tx").(*array.String).Value(0))
			require.Equal(t, "vc", col("vc").(*array.String).Value(0))
			require.Equal(t, "ab ", col("bc").(*array.String).Value(0))
			require.Equal(t, "nm", col("nm").(*array.String).Value(0))
			require.Equal(t, "happy", col("en").(*array.String).Value(0))
			require.Equal(t, []byte{0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11}, col("u").(*array.FixedSizeBinary).Value(0))
			require.Equal(t, []byte{0, 0xff, 0x10}, col("by").(*array.Binary).Value(0))
			require.Equal(t, "2024-02-29", col("d").(*array.Date32).Value(0).FormattedString())
			require.Equal(t, "1999-12-31 23:59:59.123456", col("ts").(*array.Timestamp).Value(0).ToTime(arrow.Microsecond).Format("2006-01-02 15:04:05.999999"))
			require.Equal(t, "2024-06-01T10:00:00Z", col("tstz").(*array.Timestamp).Value(0).ToTime(arrow.Microsecond).Format("2006-01-02T15:04:05Z07:00"))
			require.Equal(t, "13:14:15.500000", col("tm").(*array.Time64).Value(0).FormattedString(arrow.Microsecond))
			require.Equal(t, `{"a": 1}`, col("j").(*array.String).Value(0))
			require.Equal(t, `{"b": [1, 2]}`, col("jb").(*array.String).Value(0))
			require.Equal(t, `[1 (null) 3]`, listStr(col("ai"), 0))
			require.Equal(t, `["x" (null)]`, listStr(col("at"), 0))
			require.Equal(t, `[1.5 -2.25]`, listStr(col("an"), 0))
			require.Equal(t, `["{\"k\": 1}"]`, listStr(col("ajb"), 0))

			// Row 1: empty arrays, negative numeric, old dates.
			require.Equal(t, false, col("b").(*array.Boolean).Value(1))
			require.Equal(t, "-0.01", col("n").(*array.Decimal128).Value(1).ToString(2))
			require.Equal(t, "0.000000000000000000", col("nu").(*array.Decimal128).Value(1).ToString(18))
			require.Equal(t, `[]`, listStr(col("ai"), 1))
			require.False(t, col("ai").IsNull(1))
			require.Equal(t, "1900-01-01", col("d").(*array.Date32).Value(1).FormattedString())
			require.Equal(t, "1900-01-01 00:00:00", col("ts").(*array.Timestamp).Value(1).ToTime(arrow.Microsecond).Format("2006-01-02 15:04:05"))
			require.True(t, col("tx").IsNull(1))

			// Row 2: NULL everywhere.
			for i := range int(b.NumCols()) {
				require.True(t, b.Column(i).IsNull(2), sc.Field(i).Name)
			}
		})
	}
}

func listStr(a arrow.Array, i int) string {
	l := a.(*array.List)
	s := array.NewSlice(l, int64(i), int64(i+1))
	defer s.Release()
	str := s.String()
	return str[1 : len(str)-1]
}

// TestNumericExactness: under NumericStrict a numeric value decodes exactly
// or fails with ErrOutOfRange (TestNumericRounding covers the default).
func TestNumericExactness(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	cases := []struct {
		sql  string
		want string // "" = out of range
	}{
		{`SELECT 1::numeric / 3`, ""}, // 20 fractional digits > scale 18
		{`SELECT 'NaN'::numeric`, ""},
		{`SELECT 'Infinity'::numeric`, ""},
		{`SELECT 1e21::numeric`, ""}, // 22 integer digits > 38-18
		{`SELECT 99999999999999999999.999999999999999999::numeric`, "99999999999999999999.999999999999999999"},
		{`SELECT -12345678901234567.25::numeric`, "-12345678901234567.250000000000000000"},
		{`SELECT 10000000000000000::numeric`, "10000000000000000.000000000000000000"},
		{`SELECT 0.000000000000000001::numeric`, "0.000000000000000001"},
	}
	for _, c := range cases {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		s, err := cursor.Batches(ctx, pool, c.sql, nil, &cursor.Options{Allocator: mem, Numeric: cursor.NumericStrict})
		require.NoError(t, err)
		var got string
		var gotErr error
		for b, err := range s.All() {
			if err != nil {
				gotErr = err
				continue
			}
			got = b.Column(0).(*array.Decimal128).Value(0).ToString(18)
			b.Release()
		}
		if c.want == "" {
			require.ErrorIs(t, gotErr, cursor.ErrOutOfRange, c.sql)
			var de *cursor.DecodeError
			require.ErrorAs(t, gotErr, &de)
			require.Equal(t, "numeric", cursor.DecodeErrorTypeName(de))
		} else {
			require.NoError(t, gotErr, c.sql)
			require.Equal(t, c.want, got, c.sql)
		}
		mem.AssertSize(t, 0)
	}
	require.Equal(t, int32(0), pool.Stat().AcquiredConns())
}

func TestUnsupportedType(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	_, err := cursor.Batches(ctx, pool, `SELECT 1 AS a, '1 day'::interval AS iv`, nil, nil)
	require.ErrorIs(t, err, cursor.ErrUnsupportedType)
	require.ErrorContains(t, err, `column "iv"`)
	var ute *cursor.UnsupportedTypeError
	require.ErrorAs(t, err, &ute)
	require.Equal(t, "iv", ute.Column)
	require.Equal(t, "interval", ute.TypeName)
	require.Equal(t, 1, ute.Index)

	_, err = cursor.Batches(ctx, pool, `SELECT ARRAY['1 day'::interval] AS ivs`, nil, nil)
	require.ErrorAs(t, err, &ute)
	require.Equal(t, "_interval", ute.TypeName)

	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s, err := cursor.Batches(ctx, pool, `SELECT '1 day'::interval AS iv, NULL::interval AS nv`, nil, &cursor.Options{UnknownAsText: true, Allocator: mem})
	require.NoError(t, err)
	require.Equal(t, "utf8", s.Schema().Field(0).Type.String())
	pgType, _ := s.Schema().Field(0).Metadata.GetValue(cursor.MetaPGType)
	require.Equal(t, "interval", pgType)
	for b, err := range s.All() {
		require.NoError(t, err)
		require.Equal(t, "1 day", b.Column(0).(*array.String).Value(0))
		require.True(t, b.Column(1).IsNull(0))
		b.Release()
	}
	require.Equal(t, int32(0), pool.Stat().AcquiredConns())
}

func TestBadSQL(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	_, err := cursor.Batches(ctx, pool, `SELEC 1`, nil, nil)
	var qe *cursor.QueryError
	require.ErrorAs(t, err, &qe)
	var pge *pgconn.PgError
	require.ErrorAs(t, err, &pge)
	require.Equal(t, "42601", pge.Code)

	_, err = cursor.Batches(ctx, pool, `SELECT * FROM no_such_table`, nil, nil)
	require.ErrorAs(t, err, &pge)
	require.Equal(t, "42P01", pge.Code)

	// In a caller's transaction, a bad query leaves the transaction usable.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = cursor.Batches(ctx, tx, `SELEC 1`, nil, nil)
	require.ErrorAs(t, err, &qe)
	var one int
	require.NoError(t, tx.QueryRow(ctx, `SELECT 1`).Scan(&one))

	// Rows: the error is yielded once.
	n := 0
	for _, err := range cursor.Rows(ctx, pool, `SELEC 1`, nil, rowToAny, nil) {
		require.ErrorAs(t, err, &pge)
		n++
	}
	require.Equal(t, 1, n)
	require.True(t, errors.As(err, &qe))
}
