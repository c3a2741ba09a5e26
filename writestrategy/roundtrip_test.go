package writestrategy_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/facadetest"
	"github.com/lakewrite/lakewrite/writestrategy"

	"github.com/lakewrite/lakewrite/sink"
)

// Every column type a pipeline output may have, with edge values, survives
// the whole trip: row store -> compute -> cursor -> facade -> Iceberg ->
// Scan -> hydrated back into Postgres -> row store, every value with the
// same Postgres text form; the facade's in-memory double makes the same
// trip.
func TestTypesRoundTripThroughIceberg(t *testing.T) {
	t.Parallel()
	t.Run("iceberg-go", func(t *testing.T) { t.Parallel(); roundTripTypes(t, nil) })
	t.Run("double", func(t *testing.T) { t.Parallel(); roundTripTypes(t, facadetest.New(nil)) })
}

func roundTripTypes(t *testing.T, lake facade.Lakehouse) {
	w := newWorld(t, lake)
	schema := writestrategy.Schema{Columns: []writestrategy.Column{
		{Name: "b", Type: "boolean"}, {Name: "i2", Type: "smallint"}, {Name: "i4", Type: "integer"}, {Name: "i8", Type: "bigint"},
		{Name: "f4", Type: "real"}, {Name: "f8", Type: "double precision"},
		{Name: "n", Type: "numeric(38,10)"}, {Name: "nu", Type: "numeric"},
		{Name: "tx", Type: "text"}, {Name: "vc", Type: "character varying(8)"},
		{Name: "d", Type: "date"}, {Name: "ts", Type: "timestamp without time zone"}, {Name: "tz", Type: "timestamp with time zone"},
		{Name: "tm", Type: "time without time zone"},
		{Name: "j", Type: "jsonb"}, {Name: "u", Type: "uuid"},
		{Name: "ai", Type: "integer[]"}, {Name: "at", Type: "text[]"},
	}}
	values := `(VALUES
		(true, '-32768'::smallint, 2147483647, '-9223372036854775808'::bigint, 1.5::real, -2.5e300::float8,
		 '-9999999999999999999999999999.9999999999'::numeric(38,10), 12345678901234567890.123456789012345678::numeric,
		 'héllo "quoted" \ tab	end', 'eight ch', date '4713-01-01 BC', timestamp '0001-01-01 00:00:00',
		 timestamptz '9999-12-31 23:59:59.999999+00', time '23:59:59.999999',
		 '{"a": [1, 2.50, null], "ü": {"x": "\\u00e9"}}'::jsonb, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid,
		 ARRAY[1, NULL, -3], ARRAY['x', NULL, '']),
		(false, 0::smallint, 0, 0::bigint, 'NaN'::real, 'Infinity'::float8,
		 0::numeric(38,10), '-0.000000000000000001'::numeric,
		 '', '', date '2000-02-29', timestamp '1999-12-31 23:59:59.999999',
		 timestamptz '1900-01-01 00:00:00+05:30', time '00:00:00',
		 '[]'::jsonb, '00000000-0000-0000-0000-000000000000'::uuid,
		 ARRAY[]::integer[], ARRAY[]::text[]),
		(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)
	) v(b, i2, i4, i8, f4, f8, n, nu, tx, vc, d, ts, tz, tm, j, u, ai, at)`
	src := typedSelect(schema, values)
	seedRowStore(t, w.pool, "src", schema, src)
	ensureOutputs(t, w.pool, "mid", "back")
	w.iceberg("mid")
	mid := w.mustWrite(writestrategy.Transform{Output: "mid", Source: "src"})[0]
	require.Equal(t, sink.Iceberg, mid.Sink)
	require.EqualValues(t, 3, mid.Rows)
	back := w.mustWrite(writestrategy.Transform{Output: "back", Source: "mid"})[0]
	require.Equal(t, sink.Postgres, back.Sink)

	want := w.sourceText(schema, src)
	require.Len(t, want, 3)
	for _, id := range []string{"src", "mid", "back"} {
		require.Equal(t, want, w.datasetText(schema, id), id)
	}
	require.Equal(t, w.checksum("src"), w.checksum("back"))
}
