// Package pgbuiltin holds the pg_type facts of the PostgreSQL built-in
// types lakewrite reads and writes without a catalog lookup. Their oids and
// rows are fixed in every PostgreSQL release (pg_type.dat); the cursor and
// writestrategy tests compare every row with a live catalog.
package pgbuiltin

// Type is the part of a built-in type's pg_type row lakewrite uses.
type Type struct {
	Name     string // typname
	Type     byte   // typtype ('b' for every type here)
	Elem     uint32 // typelem: the element type of an array, else 0
	Category byte   // typcategory
	Len      int16  // typlen
}

// Lookup returns the row of the built-in type oid, if it is one of the
// types here.
func Lookup(oid uint32) (Type, bool) {
	t, ok := types[oid]
	return t, ok
}

// OIDs returns the oids of every type here, in no particular order.
func OIDs() []uint32 {
	out := make([]uint32, 0, len(types))
	for o := range types {
		out = append(out, o)
	}
	return out
}

func scalar(name string, category byte, length int16) Type {
	return Type{Name: name, Type: 'b', Category: category, Len: length}
}

func array(name string, elem uint32) Type {
	return Type{Name: name, Type: 'b', Elem: elem, Category: 'A', Len: -1}
}

// types is read only.
var types = map[uint32]Type{
	16:   scalar("bool", 'B', 1),
	17:   scalar("bytea", 'U', -1),
	19:   {Name: "name", Type: 'b', Elem: 18, Category: 'S', Len: 64},
	20:   scalar("int8", 'N', 8),
	21:   scalar("int2", 'N', 2),
	23:   scalar("int4", 'N', 4),
	25:   scalar("text", 'S', -1),
	114:  scalar("json", 'U', -1),
	700:  scalar("float4", 'N', 4),
	701:  scalar("float8", 'N', 8),
	1042: scalar("bpchar", 'S', -1),
	1043: scalar("varchar", 'S', -1),
	1082: scalar("date", 'D', 4),
	1083: scalar("time", 'D', 8),
	1114: scalar("timestamp", 'D', 8),
	1184: scalar("timestamptz", 'D', 8),
	1700: scalar("numeric", 'N', -1),
	2950: scalar("uuid", 'U', 16),
	3802: scalar("jsonb", 'U', -1),

	199:  array("_json", 114),
	1000: array("_bool", 16),
	1001: array("_bytea", 17),
	1005: array("_int2", 21),
	1007: array("_int4", 23),
	1009: array("_text", 25),
	1014: array("_bpchar", 1042),
	1015: array("_varchar", 1043),
	1016: array("_int8", 20),
	1021: array("_float4", 700),
	1022: array("_float8", 701),
	1115: array("_timestamp", 1114),
	1182: array("_date", 1082),
	1183: array("_time", 1083),
	1185: array("_timestamptz", 1184),
	1231: array("_numeric", 1700),
	2951: array("_uuid", 2950),
	3807: array("_jsonb", 3802),
}
