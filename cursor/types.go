package cursor

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lakewrite/lakewrite/internal/vocab"
)

// Arrow field metadata keys set on every field of a Stream's schema, and read
// by the facade when it maps a schema to an Iceberg table. Their values are
// "lakewrite.pg_type" and "lakewrite.json".
const (
	// MetaPGType holds the PostgreSQL type name of the column as in
	// pg_type.typname ("int8", "numeric", "_int4" for an int4 array, the enum's
	// own name for an enum). For a domain it is the name of the domain's base
	// type.
	MetaPGType = vocab.MetaPGType
	// MetaJSON is "true" on json and jsonb fields (and on the element field of
	// json/jsonb arrays), whose Arrow type is string.
	MetaJSON = vocab.MetaJSON
)

type kind uint8

const (
	kBool kind = iota + 1
	kInt2
	kInt4
	kInt8
	kFloat4
	kFloat8
	kNumeric
	kString // text, varchar, bpchar, name, enum, json (binary = text)
	kJSONB
	kUUID
	kBytea
	kDate
	kTimestamp
	kTimestamptz
	kTime
	kText // unsupported type streamed as text (text format)
	kList
)

// pgType is one row of pg_type, as much as the mapping needs.
type pgType struct {
	oid      uint32
	name     string
	typtype  byte   // b base, e enum, d domain, ...
	elem     uint32 // element type of an array
	base     uint32 // base type of a domain
	typmod   int32  // domain typmod
	category byte
}

// column is the plan for one result column.
type column struct {
	name       string
	oid        uint32 // as reported in the row description
	typeName   string // MetaPGType
	kind       kind
	elem       kind // element kind when kind == kList
	format     int16
	numericFit // numeric, and lists of numeric
	field      arrow.Field
}

// lookupTypes loads the pg_type rows for oids, following domains and array
// elements, in as few round trips as the nesting needs: none when every
// type is one of builtinTypes.
func lookupTypes(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, oids []uint32) (map[uint32]*pgType, error) {
	types := map[uint32]*pgType{}
	want := oids
	for len(want) > 0 {
		ids := make([]int64, 0, len(want))
		for _, o := range want {
			if _, ok := types[o]; ok || o == 0 {
				continue
			}
			if t, ok := builtinTypes[o]; ok {
				types[o] = t
				if e := builtinTypes[t.elem]; e != nil && t.category == 'A' {
					types[e.oid] = e // the element of a built-in array is built in
				}
				continue
			}
			ids = append(ids, int64(o))
		}
		if len(ids) == 0 {
			break
		}
		rows, err := q.Query(ctx, `SELECT oid::pg_catalog.int8, typname::pg_catalog.text, typtype::pg_catalog.text, typelem::pg_catalog.int8, typbasetype::pg_catalog.int8, typtypmod, typcategory::pg_catalog.text
FROM pg_catalog.pg_type WHERE oid::pg_catalog.int8 = ANY($1)`, ids)
		if err != nil {
			return nil, err
		}
		want = want[:0:0]
		for rows.Next() {
			var oid, elem, base int64
			var name, typtype, cat string
			var typmod int32
			if err := rows.Scan(&oid, &name, &typtype, &elem, &base, &typmod, &cat); err != nil {
				rows.Close()
				return nil, err
			}
			t := &pgType{oid: uint32(oid), name: name, typtype: typtype[0], elem: uint32(elem), base: uint32(base), typmod: typmod, category: cat[0]}
			types[t.oid] = t
			if t.typtype == 'd' {
				want = append(want, t.base)
			}
			if t.category == 'A' && t.elem != 0 {
				want = append(want, t.elem)
			}
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return types, nil
}

// resolve follows domains to their base type, carrying the domain's typmod
// when the column has none.
func resolve(types map[uint32]*pgType, oid uint32, typmod int32) (*pgType, int32) {
	t := types[oid]
	for i := 0; t != nil && t.typtype == 'd' && i < 16; i++ {
		if typmod < 0 {
			typmod = t.typmod
		}
		t = types[t.base]
	}
	return t, typmod
}

func scalarKind(t *pgType) (kind, arrow.DataType) {
	if t.typtype == 'e' {
		return kString, arrow.BinaryTypes.String
	}
	switch t.name {
	case "bool":
		return kBool, arrow.FixedWidthTypes.Boolean
	case "int2":
		return kInt2, arrow.PrimitiveTypes.Int16
	case "int4":
		return kInt4, arrow.PrimitiveTypes.Int32
	case "int8":
		return kInt8, arrow.PrimitiveTypes.Int64
	case "float4":
		return kFloat4, arrow.PrimitiveTypes.Float32
	case "float8":
		return kFloat8, arrow.PrimitiveTypes.Float64
	case "numeric":
		return kNumeric, nil // type depends on typmod
	case "text", "varchar", "bpchar", "name", "json":
		return kString, arrow.BinaryTypes.String
	case "jsonb":
		return kJSONB, arrow.BinaryTypes.String
	case "uuid":
		return kUUID, &arrow.FixedSizeBinaryType{ByteWidth: 16}
	case "bytea":
		return kBytea, arrow.BinaryTypes.Binary
	case "date":
		return kDate, arrow.FixedWidthTypes.Date32
	case "timestamp":
		return kTimestamp, &arrow.TimestampType{Unit: arrow.Microsecond}
	case "timestamptz":
		return kTimestamptz, &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	case "time":
		return kTime, arrow.FixedWidthTypes.Time64us
	}
	return 0, nil
}

// numericType maps a numeric typmod to decimal128(p, s).
func numericType(typmod int32, defaultScale int) (prec, scale int32, err error) {
	if typmod < 4 {
		return 38, int32(defaultScale), nil
	}
	p := ((typmod - 4) >> 16) & 0xffff
	s := (typmod - 4) & 0x7ff
	if s&0x400 != 0 { // negative scale (PG15+), e.g. numeric(5,-2)
		return 0, 0, fmt.Errorf("numeric(%d,%d) has a negative scale", p, s-0x800)
	}
	if p > 38 {
		return 0, 0, fmt.Errorf("numeric(%d,%d) exceeds decimal128's precision 38", p, s)
	}
	return p, s, nil
}

// planColumns maps a row description to Arrow fields and decoders.
func planColumns(fds []pgconn.FieldDescription, types map[uint32]*pgType, o *Options) ([]column, *arrow.Schema, error) {
	cols := make([]column, len(fds))
	fields := make([]arrow.Field, len(fds))
	for i, fd := range fds {
		c := column{name: fd.Name, oid: fd.DataTypeOID, format: pgx.BinaryFormatCode}
		t, typmod := resolve(types, fd.DataTypeOID, fd.TypeModifier)
		typeName := fmt.Sprintf("oid %d", fd.DataTypeOID)
		if t != nil {
			typeName = t.name
		}
		c.typeName = typeName
		md := map[string]string{MetaPGType: typeName}
		var dt arrow.DataType
		unsupported := t == nil
		if t != nil && t.category == 'A' && t.elem != 0 && t.name != "name" {
			et, _ := resolve(types, t.elem, -1)
			if et != nil {
				ek, edt := scalarKind(et)
				if ek == kNumeric {
					p, s, err := numericType(typmod, o.NumericScale)
					if err != nil {
						return nil, nil, &unsupportedTypeError{Column: fd.Name, Index: i, TypeName: typeName + ": " + err.Error(), OID: fd.DataTypeOID}
					}
					c.numericFit = numericFit{prec: p, scale: s, strict: o.Numeric == NumericStrict}
					edt = &arrow.Decimal128Type{Precision: p, Scale: s}
				}
				if ek != 0 {
					c.kind, c.elem = kList, ek
					ef := arrow.Field{Name: "item", Type: edt, Nullable: true}
					if ek == kJSONB || et.name == "json" {
						ef.Metadata = arrow.NewMetadata([]string{MetaJSON}, []string{"true"})
					}
					dt = arrow.ListOfField(ef)
				}
			}
			unsupported = c.kind == 0
		} else if t != nil {
			k, sdt := scalarKind(t)
			switch k {
			case 0:
				unsupported = true
			case kNumeric:
				p, s, err := numericType(typmod, o.NumericScale)
				if err != nil {
					return nil, nil, &unsupportedTypeError{Column: fd.Name, Index: i, TypeName: typeName + ": " + err.Error(), OID: fd.DataTypeOID}
				}
				c.kind, c.numericFit = k, numericFit{prec: p, scale: s, strict: o.Numeric == NumericStrict}
				dt = &arrow.Decimal128Type{Precision: p, Scale: s}
			default:
				c.kind, dt = k, sdt
				if k == kJSONB || t.name == "json" {
					md[MetaJSON] = "true"
				}
			}
		}
		if unsupported {
			if !o.UnknownAsText {
				return nil, nil, &unsupportedTypeError{Column: fd.Name, Index: i, TypeName: typeName, OID: fd.DataTypeOID}
			}
			c.kind, c.format, dt = kText, pgx.TextFormatCode, arrow.BinaryTypes.String
		}
		keys := make([]string, 0, len(md))
		vals := make([]string, 0, len(md))
		for _, k := range []string{MetaPGType, MetaJSON} {
			if v, ok := md[k]; ok {
				keys, vals = append(keys, k), append(vals, v)
			}
		}
		c.field = arrow.Field{Name: fd.Name, Type: dt, Nullable: true, Metadata: arrow.NewMetadata(keys, vals)}
		cols[i], fields[i] = c, c.field
	}
	return cols, arrow.NewSchema(fields, nil), nil
}
