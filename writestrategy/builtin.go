package writestrategy

import (
	"fmt"
	"regexp"
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

func builtinScalar(name string, keyword bool, category byte, length int16) builtinType {
	return builtinType{row: pgTypeRow{typtype: 'b', category: category, length: length}, name: name, keyword: keyword}
}

func builtinArray(elem uint32) builtinType {
	return builtinType{row: pgTypeRow{typtype: 'b', elem: elem, category: 'A', length: -1}}
}

var builtinTypes = map[uint32]builtinType{
	16:   builtinScalar("boolean", true, 'B', 1),
	17:   builtinScalar("bytea", false, 'U', -1),
	20:   builtinScalar("bigint", true, 'N', 8),
	21:   builtinScalar("smallint", true, 'N', 2),
	23:   builtinScalar("integer", true, 'N', 4),
	25:   builtinScalar("text", false, 'S', -1),
	114:  builtinScalar("json", false, 'U', -1),
	700:  builtinScalar("real", true, 'N', 4),
	701:  builtinScalar("double precision", true, 'N', 8),
	1043: builtinScalar("character varying", true, 'S', -1),
	1082: builtinScalar("date", false, 'D', 4),
	1114: builtinScalar("timestamp without time zone", true, 'D', 8),
	1184: builtinScalar("timestamp with time zone", true, 'D', 8),
	1700: builtinScalar("numeric", true, 'N', -1),
	2950: builtinScalar("uuid", false, 'U', 16),
	3802: builtinScalar("jsonb", false, 'U', -1),

	199:  builtinArray(114),
	1000: builtinArray(16),
	1001: builtinArray(17),
	1005: builtinArray(21),
	1007: builtinArray(23),
	1009: builtinArray(25),
	1015: builtinArray(1043),
	1016: builtinArray(20),
	1021: builtinArray(700),
	1022: builtinArray(701),
	1115: builtinArray(1114),
	1182: builtinArray(1082),
	1185: builtinArray(1184),
	1231: builtinArray(1700),
	2951: builtinArray(2950),
	3807: builtinArray(3802),
}

// builtinVisibleSQL is true when every built-in type above whose name is
// not a keyword is visible in the search path (so format_type prints, and
// to_regtype reads, its bare name as that type).
const builtinVisibleSQL = `(SELECT coalesce(bool_and(pg_catalog.pg_type_is_visible(o)), false) FROM unnest('{17,25,114,1082,2950,3802}'::oid[]) o)`

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
