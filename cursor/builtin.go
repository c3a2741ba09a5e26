package cursor

import "github.com/lakewrite/lakewrite/internal/pgbuiltin"

// builtinTypes are the pg_type rows of the built-in types the cursor
// decodes natively, and of their arrays (internal/pgbuiltin), so a result
// whose columns all have one of these types needs no catalog lookup.
var builtinTypes = func() map[uint32]*pgType {
	m := map[uint32]*pgType{}
	for _, o := range pgbuiltin.OIDs() {
		t, _ := pgbuiltin.Lookup(o)
		m[o] = &pgType{oid: o, name: t.Name, typtype: t.Type, elem: t.Elem, typmod: -1, category: t.Category}
	}
	return m
}()
