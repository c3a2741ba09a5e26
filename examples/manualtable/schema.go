package manualtable

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// Column is one declared column: its name and its Postgres type as
// format_type prints it ("bigint", "numeric(12,2)", "timestamp with time
// zone", ...).
type Column = writestrategy.Column

// Schema is the declared schema of a manual table, stored as JSON
// {"columns":[{"name":"id","type":"bigint"}, ...]} in datasets.schema: the
// format writestrategy reads, so a manual table is readable as a source.
type Schema = writestrategy.Schema

// kind is the value domain of a supported Postgres type.
type kind int

const (
	kindInt16 kind = iota + 1
	kindInt32
	kindInt64
	kindFloat32
	kindFloat64
	kindNumeric
	kindBool
	kindText
	kindDate
	kindTimestamptz
	kindTimestamp
	kindJSON
	kindUUID
)

// pgType is a supported Postgres column type.
type pgType struct {
	kind      kind
	name      string // as format_type prints it
	typname   string // pg_type.typname, recorded as lakewrite.pg_type
	precision int32  // numeric only
	scale     int32  // numeric only
}

// simpleType maps a normalized declaration (canonical name or alias) to
// its type.
func simpleType(norm string) (pgType, bool) {
	switch norm {
	case "smallint", "int2":
		return pgType{kind: kindInt16, name: "smallint", typname: "int2"}, true
	case "integer", "int", "int4":
		return pgType{kind: kindInt32, name: "integer", typname: "int4"}, true
	case "bigint", "int8":
		return pgType{kind: kindInt64, name: "bigint", typname: "int8"}, true
	case "real", "float4":
		return pgType{kind: kindFloat32, name: "real", typname: "float4"}, true
	case "double precision", "float8":
		return pgType{kind: kindFloat64, name: "double precision", typname: "float8"}, true
	case "boolean", "bool":
		return pgType{kind: kindBool, name: "boolean", typname: "bool"}, true
	case "text":
		return pgType{kind: kindText, name: "text", typname: "text"}, true
	case "date":
		return pgType{kind: kindDate, name: "date", typname: "date"}, true
	case "timestamp with time zone", "timestamptz":
		return pgType{kind: kindTimestamptz, name: "timestamp with time zone", typname: "timestamptz"}, true
	case "timestamp without time zone", "timestamp":
		return pgType{kind: kindTimestamp, name: "timestamp without time zone", typname: "timestamp"}, true
	case "jsonb":
		return pgType{kind: kindJSON, name: "jsonb", typname: "jsonb"}, true
	case "json":
		return pgType{kind: kindJSON, name: "json", typname: "json"}, true
	case "uuid":
		return pgType{kind: kindUUID, name: "uuid", typname: "uuid"}, true
	}
	return pgType{}, false
}

var numericRE = regexp.MustCompile(`^(?:numeric|decimal)\s*\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)$`)

// parsePGType parses a declared type, case-insensitively, accepting the
// usual aliases (int8, bool, timestamptz, decimal(p,s), ...).
func parsePGType(s string) (pgType, error) {
	norm := strings.Join(strings.Fields(strings.ToLower(s)), " ")
	if t, ok := simpleType(norm); ok {
		return t, nil
	}
	if m := numericRE.FindStringSubmatch(norm); m != nil {
		p, _ := strconv.Atoi(m[1])
		sc := 0
		if m[2] != "" {
			sc, _ = strconv.Atoi(m[2])
		}
		if p < 1 || p > 38 || sc > p {
			return pgType{}, fmt.Errorf("type %q: numeric needs 1 <= precision <= 38 and 0 <= scale <= precision", s)
		}
		return pgType{kind: kindNumeric, name: fmt.Sprintf("numeric(%d,%d)", p, sc), typname: "numeric",
			precision: int32(p), scale: int32(sc)}, nil
	}
	if norm == "numeric" || norm == "decimal" {
		return pgType{}, fmt.Errorf("type %q: declare a precision and scale, e.g. numeric(12,2) (at most 38 digits), so values are stored exactly", s)
	}
	return pgType{}, fmt.Errorf("type %q is not supported (use smallint, integer, bigint, real, double precision, numeric(p,s), boolean, text, date, timestamp with time zone, timestamp without time zone, json, jsonb or uuid)", s)
}

// arrowType is the Arrow type a column is written as.
func (t pgType) arrowType() arrow.DataType {
	switch t.kind {
	case kindInt16:
		return arrow.PrimitiveTypes.Int16
	case kindInt32:
		return arrow.PrimitiveTypes.Int32
	case kindInt64:
		return arrow.PrimitiveTypes.Int64
	case kindFloat32:
		return arrow.PrimitiveTypes.Float32
	case kindFloat64:
		return arrow.PrimitiveTypes.Float64
	case kindNumeric:
		return &arrow.Decimal128Type{Precision: t.precision, Scale: t.scale}
	case kindBool:
		return arrow.FixedWidthTypes.Boolean
	case kindDate:
		return arrow.FixedWidthTypes.Date32
	case kindTimestamptz:
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	case kindTimestamp:
		return &arrow.TimestampType{Unit: arrow.Microsecond}
	case kindUUID:
		return &arrow.FixedSizeBinaryType{ByteWidth: 16}
	default: // text, json
		return arrow.BinaryTypes.String
	}
}

// table is a validated declared schema.
type table struct {
	cols  []Column // canonical types
	types []pgType
	index map[string]int
}

var columnNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// validateSchema checks s and returns it with canonical type names.
func validateSchema(s Schema) (*table, error) {
	if len(s.Columns) == 0 {
		return nil, fmt.Errorf("no columns declared")
	}
	t := &table{index: make(map[string]int, len(s.Columns))}
	// lakewrite's one name rule, the one both sinks apply: no "__" prefix
	// (the identity columns'), no two names equal up to case ("a" and "A"
	// are one column in Spark and Trino).
	names := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		names[i] = c.Name
	}
	if err := facade.CheckColumnNames(names...); err != nil {
		var ne *facade.NameError
		if errors.As(err, &ne) {
			return nil, fmt.Errorf("column %q: %s", ne.Name, ne.Reason)
		}
		return nil, err
	}
	for i, c := range s.Columns {
		if !columnNameRE.MatchString(c.Name) {
			return nil, fmt.Errorf("column %d: name %q: want 1-63 characters of [A-Za-z0-9_], not starting with a digit", i+1, c.Name)
		}
		pt, err := parsePGType(c.Type)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", c.Name, err)
		}
		t.index[c.Name] = i
		t.cols = append(t.cols, Column{Name: c.Name, Type: pt.name})
		t.types = append(t.types, pt)
	}
	return t, nil
}

// parseSchema reads a stored declared schema.
func parseSchema(raw json.RawMessage) (*table, error) {
	var s Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("declared schema is not {\"columns\":[...]}: %w", err)
	}
	return validateSchema(s)
}

// schemaJSON is the canonical JSON stored in datasets.schema.
func (t *table) schemaJSON() json.RawMessage {
	b, _ := json.Marshal(Schema{Columns: t.cols})
	return b
}

// arrowSchema is the write schema: every column nullable, tagged with its
// Postgres typname (and lakewrite.json for json/jsonb).
func (t *table) arrowSchema() *arrow.Schema {
	fields := make([]arrow.Field, len(t.cols))
	for i, c := range t.cols {
		keys, vals := []string{cursor.MetaPGType}, []string{t.types[i].typname}
		if t.types[i].kind == kindJSON {
			keys, vals = append(keys, cursor.MetaJSON), append(vals, "true")
		}
		fields[i] = arrow.Field{Name: c.Name, Type: t.types[i].arrowType(), Nullable: true,
			Metadata: arrow.NewMetadata(keys, vals)}
	}
	return arrow.NewSchema(fields, nil)
}
