package writestrategy

import (
	"fmt"
	"regexp"

	"github.com/lakewrite/lakewrite/internal/pgbuiltin"
)

// The built-in types whose pg_type rows and names the row store's encoding
// and the declared schemas need are known without a catalog lookup: their
// oids and rows are fixed in every PostgreSQL release (pg_type.dat). Only
// the names of some depend on the session: format_type prints a type that
// has no SQL keyword of its own ("text", "date", "uuid", ...) by its bare
// name only while it is visible in the search path (a temporary table or a
// type of that name earlier in the path shadows it), and to_regtype reads
// such a name through the search path. Those are used only when the
// transaction's read of the datasets found them all visible
// (builtinVisibleSQL); every other type is looked up.

// builtinType is the part of pg_type the encoding needs, and the type's
// name without a type modifier.
type builtinType struct {
	row     pgTypeRow
	name    string
	keyword bool // name is SQL syntax of its own: its meaning never depends on the search path
}

// builtinScalar is a built-in type of the table (its row from
// internal/pgbuiltin) printed as name by format_type.
func builtinScalar(oid uint32, name string, keyword bool) builtinType {
	t, _ := pgbuiltin.Lookup(oid)
	return builtinType{row: pgTypeRow{typtype: t.Type, elem: t.Elem, category: t.Category, length: t.Len}, name: name, keyword: keyword}
}

// builtinArray is the array type oid of a built-in type of the table.
func builtinArray(oid uint32) builtinType {
	return builtinScalar(oid, "", false)
}

var builtinTypes = map[uint32]builtinType{
	16:   builtinScalar(16, "boolean", true),
	17:   builtinScalar(17, "bytea", false),
	20:   builtinScalar(20, "bigint", true),
	21:   builtinScalar(21, "smallint", true),
	23:   builtinScalar(23, "integer", true),
	25:   builtinScalar(25, "text", false),
	114:  builtinScalar(114, "json", false),
	700:  builtinScalar(700, "real", true),
	701:  builtinScalar(701, "double precision", true),
	1043: builtinScalar(1043, "character varying", true),
	1082: builtinScalar(1082, "date", false),
	1114: builtinScalar(1114, "timestamp without time zone", true),
	1184: builtinScalar(1184, "timestamp with time zone", true),
	1700: builtinScalar(1700, "numeric", true),
	2950: builtinScalar(2950, "uuid", false),
	3802: builtinScalar(3802, "jsonb", false),

	199:  builtinArray(199),
	1000: builtinArray(1000),
	1001: builtinArray(1001),
	1005: builtinArray(1005),
	1007: builtinArray(1007),
	1009: builtinArray(1009),
	1015: builtinArray(1015),
	1016: builtinArray(1016),
	1021: builtinArray(1021),
	1022: builtinArray(1022),
	1115: builtinArray(1115),
	1182: builtinArray(1182),
	1185: builtinArray(1185),
	1231: builtinArray(1231),
	2951: builtinArray(2951),
	3807: builtinArray(3807),
}

// builtinVisibleSQL is true when every built-in type above whose name is
// not a keyword is visible in the search path (so format_type prints, and
// to_regtype reads, its bare name as that type).
const builtinVisibleSQL = `(SELECT coalesce(bool_and(pg_catalog.pg_type_is_visible(o)), false) FROM unnest('{17,25,114,1082,2950,3802}'::pg_catalog.oid[]) o)`

// varlenHeader is VARHDRSZ, which type modifiers of numeric and varchar
// include.
const varlenHeader = 4

// builtinName is format_type(oid, typmod) for a built-in type of the table,
// when it can tell (visible: builtinVisibleSQL held).
func builtinName(oid uint32, typmod int32, visible bool) (string, bool) {
	t, ok := builtinTypes[oid]
	if !ok {
		return "", false
	}
	if t.row.elem != 0 {
		n, ok := builtinName(t.row.elem, typmod, visible)
		return n + "[]", ok
	}
	if !t.keyword && !visible {
		return "", false
	}
	if typmod == -1 {
		return t.name, true
	}
	switch oid {
	case 1700:
		if typmod < varlenHeader {
			return "", false
		}
		m := typmod - varlenHeader
		prec, scale := (m>>16)&0xffff, ((m&0x7ff)^1024)-1024
		return fmt.Sprintf("numeric(%d,%d)", prec, scale), true
	case 1043:
		if typmod <= varlenHeader {
			return "", false
		}
		return fmt.Sprintf("character varying(%d)", typmod-varlenHeader), true
	case 1114, 1184:
		if typmod < 0 {
			return "", false
		}
		zone := " without time zone"
		if oid == 1184 {
			zone = " with time zone"
		}
		return fmt.Sprintf("timestamp(%d)%s", typmod, zone), true
	}
	return "", false
}

// builtinDescribe returns the names (format_type) and pg_type rows of
// columns of types oids with modifiers mods, when all are built-in types
// of the table it can name.
func builtinDescribe(oids []uint32, mods []int32, visible bool) ([]string, map[uint32]*pgTypeRow, bool) {
	names := make([]string, len(oids))
	types := map[uint32]*pgTypeRow{}
	for i, o := range oids {
		n, ok := builtinName(o, mods[i], visible)
		if !ok {
			return nil, nil, false
		}
		names[i] = n
		addBuiltinRow(types, o)
	}
	return names, types, true
}

func addBuiltinRow(types map[uint32]*pgTypeRow, o uint32) {
	t := builtinTypes[o]
	row := t.row
	types[o] = &row
	if row.elem != 0 {
		addBuiltinRow(types, row.elem)
	}
}

// builtinOIDByName is the reverse of the names without modifiers.
var builtinOIDByName = func() map[string]uint32 {
	m := map[string]uint32{}
	for o, t := range builtinTypes {
		if t.row.elem == 0 {
			m[t.name] = o
		}
	}
	return m
}()

// builtinModified matches the names with a modifier that builtinName
// prints.
var builtinModified = regexp.MustCompile(`^(?:numeric\((\d+),(-?\d+)\)|character varying\((\d+)\)|timestamp\((\d)\) with(?:out)? time zone)$`)

// builtinOID is to_regtype(name) for a name builtinName prints (visible:
// builtinVisibleSQL held); false for any other name.
func builtinOID(name string, visible bool) (uint32, bool) {
	array := false
	if n := len(name); n > 2 && name[n-2:] == "[]" {
		name, array = name[:n-2], true
	}
	o, ok := builtinOIDByName[name]
	if !ok {
		sm := builtinModified.FindStringSubmatch(name)
		switch {
		case sm == nil:
			return 0, false
		case sm[1] != "":
			o = 1700
		case sm[3] != "":
			o = 1043
		case name[len(name)-len(" without time zone"):] == " without time zone":
			o = 1114
		default:
			o = 1184
		}
	}
	if t := builtinTypes[o]; !t.keyword && !visible {
		return 0, false
	}
	if !array {
		return o, true
	}
	for ao, t := range builtinTypes {
		if t.row.elem == o {
			return ao, true
		}
	}
	return 0, false
}

// builtinJSONColumns is jsonColumns without a catalog lookup, when every
// declared type of s is a built-in type builtinOID reads.
func builtinJSONColumns(s Schema, visible bool) (map[string]bool, bool) {
	out := map[string]bool{}
	for _, c := range s.Columns {
		o, ok := builtinOID(c.Type, visible)
		if !ok {
			return nil, false
		}
		if o == 114 || o == 3802 {
			out[c.Name] = true
		}
	}
	return out, true
}
