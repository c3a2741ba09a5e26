package writestrategy

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// builtinColumns is a SELECT of a column of every static built-in type,
// with and without modifiers, arrays included.
const builtinColumns = `SELECT NULL::boolean c1, NULL::bytea c2, NULL::bigint c3, NULL::smallint c4, NULL::integer c5,
	NULL::text c6, NULL::json c7, NULL::real c8, NULL::double precision c9, NULL::varchar c10, NULL::varchar(20) c11,
	NULL::date c12, NULL::timestamp c13, NULL::timestamp(3) c14, NULL::timestamptz c15, NULL::timestamptz(0) c16,
	NULL::numeric c17, NULL::numeric(12,2) c18, NULL::numeric(5,-2) c19, NULL::uuid c20, NULL::jsonb c21,
	NULL::json[] c22, NULL::boolean[] c23, NULL::bytea[] c24, NULL::smallint[] c25, NULL::integer[] c26, NULL::text[] c27,
	NULL::varchar(7)[] c28, NULL::bigint[] c29, NULL::real[] c30, NULL::double precision[] c31, NULL::timestamp(6)[] c32,
	NULL::date[] c33, NULL::timestamptz[] c34, NULL::numeric(3,1)[] c35, NULL::uuid[] c36, NULL::jsonb[] c37`

// The static table is what the catalog says: the pg_type rows, the names
// format_type prints and the types to_regtype reads them as; describeTypes
// gives the same answer with and without it.
func TestBuiltinTypesMatchCatalog(t *testing.T) {
	ctx := context.Background()
	conn := pgtest.Conn(t, pgtest.URL(t))
	for o, bt := range builtinTypes {
		var typtype, cat string
		var base, elem uint32
		var length int16
		require.NoError(t, conn.QueryRow(ctx, `SELECT typtype::text, typbasetype, typelem, typcategory::text, typlen FROM pg_type WHERE oid = $1`, o).
			Scan(&typtype, &base, &elem, &cat, &length))
		require.Equal(t, pgTypeRow{typtype: typtype[0], base: base, elem: elem, category: cat[0], length: length}, bt.row, "oid %d", o)
	}

	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	var visible bool
	require.NoError(t, tx.QueryRow(ctx, `SELECT `+builtinVisibleSQL).Scan(&visible))
	require.True(t, visible)
	sd, err := tx.Conn().PgConn().Prepare(ctx, "", builtinColumns, nil)
	require.NoError(t, err)
	for _, f := range sd.Fields {
		var want string
		var back uint32
		require.NoError(t, tx.QueryRow(ctx, `SELECT format_type($1, $2), to_regtype(format_type($1, $2))::oid`, f.DataTypeOID, f.TypeModifier).Scan(&want, &back))
		got, ok := builtinName(f.DataTypeOID, f.TypeModifier, true)
		require.True(t, ok, "%s: oid %d", f.Name, f.DataTypeOID)
		require.Equal(t, want, got, "%s", f.Name)
		o, ok := builtinOID(got, true)
		require.True(t, ok, got)
		require.Equal(t, back, o, got)
		require.Equal(t, f.DataTypeOID, o, got)
	}
	fast, fastOIDs, fastTypes, err := describeTypes(ctx, tx, builtinColumns, true)
	require.NoError(t, err)
	slow, slowOIDs, slowTypes, err := describeTypes(ctx, tx, builtinColumns, false)
	require.NoError(t, err)
	require.Equal(t, slow, fast)
	require.Equal(t, slowOIDs, fastOIDs)
	require.Equal(t, slowTypes, fastTypes)

	for _, name := range []string{"int", "TEXT", "public.text", "numeric(12, 2)", "character(3)", "name", "interval"} {
		_, ok := builtinOID(name, true)
		require.False(t, ok, name)
	}
}

// A session where a bare built-in name means something else (here a
// domain named uuid in a schema searched before pg_catalog) gets no static
// answer for those names: the catalog is asked, and the declared type
// stays exact.
func TestBuiltinTypesShadowed(t *testing.T) {
	ctx := context.Background()
	conn := pgtest.Conn(t, pgtest.URL(t))
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, `CREATE SCHEMA shadow; CREATE DOMAIN shadow.uuid AS integer; SET LOCAL search_path = shadow, pg_catalog`)
	require.NoError(t, err)
	var visible bool
	require.NoError(t, tx.QueryRow(ctx, `SELECT `+builtinVisibleSQL).Scan(&visible))
	require.False(t, visible)
	s, _, _, err := describeTypes(ctx, tx, `SELECT gen_random_uuid() AS u, 1::bigint AS n`, visible)
	require.NoError(t, err)
	require.Equal(t, "pg_catalog.uuid", s.Columns[0].Type)
	require.Equal(t, "bigint", s.Columns[1].Type)
	_, ok := builtinJSONColumns(Schema{Columns: []Column{{Name: "u", Type: "uuid"}}}, visible)
	require.False(t, ok)
	_, ok = builtinOID("uuid", visible)
	require.False(t, ok)
	jc, ok := builtinJSONColumns(Schema{Columns: []Column{{Name: "n", Type: "bigint"}, {Name: "ts", Type: "timestamp(3) with time zone"}}}, visible)
	require.True(t, ok, "keyword names never depend on the search path")
	require.Empty(t, jc)
}
