package cursor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgbuiltin"
	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// TestBuiltinTypesMatchCatalog proves the static table against pg_type:
// every row of builtinTypes is what the lookup would have read.
func TestBuiltinTypesMatchCatalog(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	oids := make([]uint32, 0, len(builtinTypes))
	for o := range builtinTypes {
		oids = append(oids, o)
	}
	got := map[uint32]*pgType{}
	var ids []int64
	for _, o := range oids {
		ids = append(ids, int64(o))
	}
	rows, err := pool.Query(ctx, `SELECT oid::int8, typname::text, typtype::text, typelem::int8, typbasetype::int8, typtypmod, typcategory::text
FROM pg_catalog.pg_type WHERE oid::int8 = ANY($1)`, ids)
	require.NoError(t, err)
	for rows.Next() {
		var oid, elem, base int64
		var name, typtype, cat string
		var typmod int32
		require.NoError(t, rows.Scan(&oid, &name, &typtype, &elem, &base, &typmod, &cat))
		got[uint32(oid)] = &pgType{oid: uint32(oid), name: name, typtype: typtype[0], elem: uint32(elem), base: uint32(base), typmod: typmod, category: cat[0]}
	}
	require.NoError(t, rows.Err())
	require.Len(t, got, len(builtinTypes))
	for o, want := range builtinTypes {
		require.Equal(t, *got[o], *want, "oid %d", o)
		if want.elem != 0 && want.category == 'A' {
			require.Contains(t, builtinTypes, want.elem, "element of %s", want.name)
		}
	}

	// A result of built-in types needs no lookup: a nil querier is never asked.
	types, err := lookupTypes(ctx, nil, []uint32{20, 1231, 3807, 25})
	require.NoError(t, err)
	require.Len(t, types, 4+2)
}

// TestSharedBuiltinTableMatchesCatalog proves every field of the shared
// built-in table (internal/pgbuiltin), typlen included, against pg_type.
func TestSharedBuiltinTableMatchesCatalog(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	var ids []int64
	for _, o := range pgbuiltin.OIDs() {
		ids = append(ids, int64(o))
	}
	rows, err := pool.Query(ctx, `SELECT oid::int8, typname::text, typtype::text, typelem::int8, typcategory::text, typlen
FROM pg_catalog.pg_type WHERE oid::int8 = ANY($1)`, ids)
	require.NoError(t, err)
	n := 0
	for rows.Next() {
		var oid, elem int64
		var name, typtype, cat string
		var length int16
		require.NoError(t, rows.Scan(&oid, &name, &typtype, &elem, &cat, &length))
		want, ok := pgbuiltin.Lookup(uint32(oid))
		require.True(t, ok)
		require.Equal(t, want, pgbuiltin.Type{Name: name, Type: typtype[0], Elem: uint32(elem), Category: cat[0], Len: length}, "oid %d", oid)
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, len(ids), n)
}
