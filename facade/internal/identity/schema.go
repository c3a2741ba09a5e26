package identity

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/iceberg-go"

	"github.com/lakewrite/lakewrite/internal/vocab"
)

// The Arrow field metadata keys the facade reads are the cursor's
// (cursor.MetaPGType, cursor.MetaJSON), defined once in package vocab.
const (
	metaPGType = vocab.MetaPGType
	metaJSON   = vocab.MetaJSON
)

// docPrefix marks the Postgres type in an Iceberg field's doc, so the type
// survives the round trip through the table and comes back as metadata.
const docPrefix = "lakewrite.pg_type="

func pgTypeOf(f arrow.Field) string {
	if v, ok := f.Metadata.GetValue(metaPGType); ok {
		return v
	}
	return ""
}

// isUUIDField reports whether f holds UUIDs (extension type, or fixed[16] /
// string tagged pg_type=uuid).
func isUUIDField(f arrow.Field) bool {
	if _, ok := f.Type.(*extensions.UUIDType); ok {
		return true
	}
	if pgTypeOf(f) != "uuid" {
		return false
	}
	switch t := f.Type.(type) {
	case *arrow.FixedSizeBinaryType:
		return t.ByteWidth == 16
	case *arrow.StringType:
		return true
	}
	return false
}

// icebergType maps an Arrow field to an Iceberg type. nextID assigns ids to
// nested fields (list elements).
func icebergType(f arrow.Field, nextID func() int) (iceberg.Type, error) {
	unsupported := &UnsupportedTypeError{Column: f.Name, Type: f.Type.String()}
	if isUUIDField(f) {
		return iceberg.PrimitiveTypes.UUID, nil
	}
	switch t := f.Type.(type) {
	case *arrow.BooleanType:
		return iceberg.PrimitiveTypes.Bool, nil
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Uint8Type, *arrow.Uint16Type:
		return iceberg.PrimitiveTypes.Int32, nil
	case *arrow.Int64Type, *arrow.Uint32Type:
		return iceberg.PrimitiveTypes.Int64, nil
	case *arrow.Float32Type:
		return iceberg.PrimitiveTypes.Float32, nil
	case *arrow.Float64Type:
		return iceberg.PrimitiveTypes.Float64, nil
	case *arrow.Decimal128Type:
		if t.Precision < 1 || t.Precision > 38 || t.Scale < 0 || t.Scale > t.Precision {
			return nil, unsupported
		}
		return iceberg.DecimalTypeOf(int(t.Precision), int(t.Scale)), nil
	case *arrow.StringType:
		return iceberg.PrimitiveTypes.String, nil
	case *arrow.BinaryType:
		return iceberg.PrimitiveTypes.Binary, nil
	case *arrow.FixedSizeBinaryType:
		return iceberg.FixedTypeOf(t.ByteWidth), nil
	case *arrow.Date32Type:
		return iceberg.PrimitiveTypes.Date, nil
	case *arrow.TimestampType:
		if t.Unit != arrow.Microsecond {
			return nil, unsupported
		}
		if t.TimeZone == "" {
			return iceberg.PrimitiveTypes.Timestamp, nil
		}
		// Arrow stores UTC instants whatever the zone label.
		return iceberg.PrimitiveTypes.TimestampTz, nil
	case *arrow.Time64Type:
		if t.Unit != arrow.Microsecond {
			return nil, unsupported
		}
		return iceberg.PrimitiveTypes.Time, nil
	case *arrow.ListType:
		elem := t.ElemField()
		elem.Name = f.Name + ".element"
		et, err := icebergType(elem, nextID)
		if err != nil {
			var ut *UnsupportedTypeError
			if ok := asUnsupported(err, &ut); ok {
				return nil, &UnsupportedTypeError{Column: f.Name, Type: f.Type.String()}
			}
			return nil, err
		}
		return &iceberg.ListType{ElementID: nextID(), Element: et, ElementRequired: false}, nil
	}
	return nil, unsupported
}

func asUnsupported(err error, target **UnsupportedTypeError) bool {
	ut, ok := err.(*UnsupportedTypeError)
	if ok {
		*target = ut
	}
	return ok
}

// Column is one business column of a write.
type Column struct {
	Field    arrow.Field
	Type     iceberg.Type
	Required bool // Arrow field declared non-nullable
	PGType   string
}

// RequestColumns splits a request schema into business columns (mapped to
// Iceberg types) and the indices of the optional identity-preserving
// columns (-1 when absent).
func RequestColumns(sc *arrow.Schema) (cols []Column, rowIDIdx, createdIdx int, err error) {
	rowIDIdx, createdIdx = -1, -1
	seen := map[string]bool{}
	id := 0
	nextID := func() int { id++; return id }
	for i, f := range sc.Fields() {
		if f.Name == "" {
			return nil, 0, 0, fmt.Errorf("%w: column %d has no name", ErrInvalidRequest, i)
		}
		if seen[f.Name] {
			return nil, 0, 0, fmt.Errorf("%w: duplicate column %q", ErrInvalidRequest, f.Name)
		}
		seen[f.Name] = true
		switch f.Name {
		case ColRowIndex:
			return nil, 0, 0, fmt.Errorf("%w: column %s is stamped by the facade and cannot be supplied", ErrInvalidRequest, ColRowIndex)
		case ColRowID:
			if f.Type.ID() != arrow.INT64 {
				return nil, 0, 0, fmt.Errorf("%w: preserved %s must be int64, got %s", ErrInvalidRequest, ColRowID, f.Type)
			}
			rowIDIdx = i
			continue
		case ColCreatedAt:
			if ts, ok := f.Type.(*arrow.TimestampType); !ok || ts.Unit != arrow.Microsecond || ts.TimeZone == "" {
				return nil, 0, 0, fmt.Errorf("%w: preserved %s must be timestamp[us, UTC], got %s", ErrInvalidRequest, ColCreatedAt, f.Type)
			}
			createdIdx = i
			continue
		}
		t, err := icebergType(f, nextID)
		if err != nil {
			return nil, 0, 0, err
		}
		cols = append(cols, Column{Field: f, Type: t, Required: !f.Nullable, PGType: pgTypeOf(f)})
	}
	return cols, rowIDIdx, createdIdx, nil
}

// IdentityFields are the Iceberg fields of the identity columns, ids unset.
func IdentityFields() []iceberg.NestedField {
	return []iceberg.NestedField{
		{Name: ColRowIndex, Type: iceberg.PrimitiveTypes.Int64, Required: true, Doc: "lakewrite identity: output ordinal"},
		{Name: ColRowID, Type: iceberg.PrimitiveTypes.Int64, Required: true, Doc: "lakewrite identity: deterministic row id"},
		{Name: ColCreatedAt, Type: iceberg.PrimitiveTypes.TimestampTz, Required: true, Doc: "lakewrite identity: commit time"},
	}
}

// IsIdentity reports whether name is one of the identity columns.
func IsIdentity(name string) bool {
	return name == ColRowIndex || name == ColRowID || name == ColCreatedAt
}

// DocFor is the Iceberg field doc recording c's Postgres type.
func DocFor(c Column) string {
	if c.PGType == "" {
		return ""
	}
	return docPrefix + c.PGType
}

// NewTableSchema builds the Iceberg schema of a new table: business
// columns then identity columns, with fresh ids.
func NewTableSchema(cols []Column) *iceberg.Schema {
	id := 0
	nextID := func() int { id++; return id }
	fields := make([]iceberg.NestedField, 0, len(cols)+3)
	for _, c := range cols {
		fields = append(fields, iceberg.NestedField{ID: nextID(), Name: c.Field.Name, Required: c.Required, Doc: DocFor(c)})
	}
	for _, f := range IdentityFields() {
		f.ID = nextID()
		fields = append(fields, f)
	}
	// Nested ids come after the top-level ones.
	for i, c := range cols {
		t, _ := icebergType(c.Field, nextID)
		fields[i].Type = t
	}
	return iceberg.NewSchema(0, fields...)
}

// sameType compares Iceberg types ignoring nested field ids.
func sameType(a, b iceberg.Type) bool {
	la, okA := a.(*iceberg.ListType)
	lb, okB := b.(*iceberg.ListType)
	if okA || okB {
		return okA && okB && sameType(la.Element, lb.Element)
	}
	return a.Equals(b)
}

// TableCol is one column of the current table schema.
type TableCol struct {
	Name     string
	Type     iceberg.Type
	Required bool
}

// IcebergCols lists the columns of s.
func IcebergCols(s *iceberg.Schema) []TableCol {
	out := make([]TableCol, 0, len(s.Fields()))
	for _, f := range s.Fields() {
		out = append(out, TableCol{Name: f.Name, Type: f.Type, Required: f.Required})
	}
	return out
}

// ErrSchemaChange: a write would change the table schema in a way the
// dataset's SchemaPolicy refuses. Nothing was written.
var ErrSchemaChange = errors.New("facade: schema change refused")

// SchemaPolicy restricts how a write may change a table's schema
// (facade.SchemaPolicy has the same fields and converts to it). The zero
// value allows every change a write can make: a replace may add, drop,
// promote, retype and reorder columns (it rewrites every row); an append
// may add nullable columns (existing rows read NULL) and promote types.
// An append never drops a column (a column it leaves out reads NULL,
// unless it is required) and never retypes one incompatibly: those are a
// *SchemaMismatchError whatever the policy.
type SchemaPolicy struct {
	// RefuseDrops refuses a replace that leaves out a column of the table.
	RefuseDrops bool
	// RefuseIncompatible refuses a replace that changes a column's type in a
	// way Iceberg cannot promote (anything but int to long, float to
	// double, and decimal precision widening with the same scale). Such a
	// column otherwise gets a new field id.
	RefuseIncompatible bool
	// RefuseAppendAdds refuses an append that brings a column the table
	// does not have, with a *SchemaMismatchError naming it (by default the
	// column is added as an optional column).
	RefuseAppendAdds bool
}

// SchemaChangeError reports the columns a replace would drop or retype
// against the dataset's SchemaPolicy. It matches ErrSchemaChange.
type SchemaChangeError struct {
	Dataset string
	Dropped []string // columns the write leaves out (RefuseDrops)
	Retyped []string // columns with an incompatible new type (RefuseIncompatible)
	Detail  string
}

func (e *SchemaChangeError) Error() string {
	return fmt.Sprintf("%v: dataset %q: %s", ErrSchemaChange, e.Dataset, e.Detail)
}

// Is reports whether target is ErrSchemaChange.
func (e *SchemaChangeError) Is(target error) bool { return target == ErrSchemaChange }

// SchemaChange is what a write changed in the table schema, as recorded
// under lakewrite.schema-change (JSON; the facade package documentation
// lists its fields) and logged. Column names only. The JSON is read by
// other engines: its field names must never change.
type SchemaChange struct {
	// Added columns: new field ids. An append adds them as optional.
	Added []string `json:"added,omitempty"`
	// Dropped columns (replace only).
	Dropped []string `json:"dropped,omitempty"`
	// Promoted columns: type widened in place (int to long, float to
	// double, decimal precision), field id kept.
	Promoted []string `json:"promoted,omitempty"`
	// Retyped columns: incompatible new type, deleted and added again under
	// a new field id (replace only).
	Retyped []string `json:"retyped,omitempty"`
	// Relaxed columns: required to optional (replace only).
	Relaxed []string `json:"relaxed,omitempty"`
	// Reordered: the columns the write kept changed their relative order
	// (replace only).
	Reordered bool `json:"reordered,omitempty"`
}

// Empty reports whether the write left the schema as it was.
func (c SchemaChange) Empty() bool {
	return len(c.Added)+len(c.Dropped)+len(c.Promoted)+len(c.Retyped)+len(c.Relaxed) == 0 && !c.Reordered
}

// String is the JSON recorded under lakewrite.schema-change.
func (c SchemaChange) String() string {
	b, _ := json.Marshal(c)
	return string(b)
}

// promotable reports whether Iceberg allows promoting from to to in place
// (same field id): int to long, float to double, decimal(P,S) to
// decimal(P2,S) with P2 > P.
func promotable(from, to iceberg.Type) bool {
	switch f := from.(type) {
	case iceberg.Int32Type:
		_, ok := to.(iceberg.Int64Type)
		return ok
	case iceberg.Float32Type:
		_, ok := to.(iceberg.Float64Type)
		return ok
	case iceberg.DecimalType:
		t, ok := to.(iceberg.DecimalType)
		return ok && t.Scale() == f.Scale() && t.Precision() > f.Precision()
	}
	return false
}

// PlanChange classifies how a write of cols changes the table whose
// columns are cur (identity columns ignored) and applies the policy: the
// one place both backends decide what a write may do to a schema.
//
// An append adds the columns the table lacks (optional), promotes the ones
// whose type Iceberg can widen to the write's, and writes a narrower type
// that widens to the table's as the table's type; any other type, or a
// required table column the write leaves out, is a *SchemaMismatchError.
func PlanChange(dataset string, mode vocab.WriteMode, p SchemaPolicy, cur []TableCol, cols []Column) (SchemaChange, error) {
	var ch SchemaChange
	have := map[string]TableCol{}
	for _, f := range cur {
		if !IsIdentity(f.Name) {
			have[f.Name] = f
		}
	}
	want := map[string]Column{}
	for _, c := range cols {
		want[c.Field.Name] = c
	}
	if mode == vocab.Append {
		var bad, details []string
		for _, c := range cols {
			name := c.Field.Name
			f, ok := have[name]
			switch {
			case !ok && p.RefuseAppendAdds:
				bad = append(bad, name)
				details = append(details, name+": not in table (SchemaPolicy.RefuseAppendAdds)")
			case !ok:
				ch.Added = append(ch.Added, name)
			case sameType(f.Type, c.Type), promotable(c.Type, f.Type):
				// written as the table's type
			case promotable(f.Type, c.Type):
				ch.Promoted = append(ch.Promoted, name)
			default:
				bad = append(bad, name)
				details = append(details, fmt.Sprintf("%s: table %s, write %s", name, f.Type, c.Type))
			}
		}
		for _, f := range cur {
			if _, ok := want[f.Name]; !ok && f.Required && !IsIdentity(f.Name) {
				bad = append(bad, f.Name)
				details = append(details, f.Name+": required in table, missing in write")
			}
		}
		if len(bad) > 0 {
			slices.Sort(bad)
			slices.Sort(details)
			return SchemaChange{}, &SchemaMismatchError{Dataset: dataset, Columns: bad, Detail: strings.Join(details, "; ")}
		}
		return ch, nil
	}
	for _, f := range cur {
		if IsIdentity(f.Name) {
			continue
		}
		c, ok := want[f.Name]
		switch {
		case !ok:
			ch.Dropped = append(ch.Dropped, f.Name)
		case sameType(f.Type, c.Type):
			if f.Required && !c.Required {
				ch.Relaxed = append(ch.Relaxed, f.Name)
			}
		case promotable(f.Type, c.Type):
			ch.Promoted = append(ch.Promoted, f.Name)
		default:
			ch.Retyped = append(ch.Retyped, f.Name)
		}
	}
	var keptOld, keptNew []string
	for _, f := range cur {
		if _, ok := want[f.Name]; ok && !slices.Contains(ch.Retyped, f.Name) {
			keptOld = append(keptOld, f.Name)
		}
	}
	for _, c := range cols {
		if _, ok := have[c.Field.Name]; !ok {
			ch.Added = append(ch.Added, c.Field.Name)
		} else if !slices.Contains(ch.Retyped, c.Field.Name) {
			keptNew = append(keptNew, c.Field.Name)
		}
	}
	// Reordered: the columns the write keeps (same field id) change their
	// relative order.
	ch.Reordered = !slices.Equal(keptOld, keptNew)
	if err := checkPolicy(dataset, p, ch); err != nil {
		return SchemaChange{}, err
	}
	return ch, nil
}

// checkPolicy refuses a replace's change when the policy says so.
func checkPolicy(dataset string, p SchemaPolicy, c SchemaChange) error {
	e := &SchemaChangeError{Dataset: dataset}
	var details []string
	if p.RefuseDrops && len(c.Dropped) > 0 {
		e.Dropped = c.Dropped
		details = append(details, "drops columns "+strings.Join(c.Dropped, ", ")+" (SchemaPolicy.RefuseDrops)")
	}
	if p.RefuseIncompatible && len(c.Retyped) > 0 {
		e.Retyped = c.Retyped
		details = append(details, "changes the type of columns "+strings.Join(c.Retyped, ", ")+
			" incompatibly (SchemaPolicy.RefuseIncompatible)")
	}
	if len(details) == 0 {
		return nil
	}
	e.Detail = "the write " + strings.Join(details, "; ")
	return e
}
