package facade

import (
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"
)

// PlanSchema returns the table schema (Arrow, identity columns included,
// Postgres types as field metadata) a write of reqSchema in mode produces
// over a table whose schema is current (nil when the table is new or
// empty of columns). It returns the same typed errors as the Iceberg
// backend (*UnsupportedTypeError, *SchemaMismatchError, ErrInvalidRequest).
// Exported so other implementations of Lakehouse (facadetest) behave alike.
func PlanSchema(datasetID string, mode Mode, current, reqSchema *arrow.Schema) (*arrow.Schema, error) {
	cols, _, _, err := requestColumns(reqSchema)
	if err != nil {
		return nil, err
	}
	if mode == Append && current != nil {
		var curCols []column
		id := 0
		for _, f := range current.Fields() {
			if isIdentity(f.Name) {
				continue
			}
			t, err := icebergType(f, func() int { id++; return id })
			if err != nil {
				return nil, err
			}
			curCols = append(curCols, column{field: f, typ: t, required: !f.Nullable, pgType: pgTypeOf(f)})
		}
		if err := appendMismatch(datasetID, newTableSchema(curCols), cols); err != nil {
			return nil, err
		}
		return current, nil
	}
	isc := newTableSchema(cols)
	if current != nil {
		// keep nullability relaxed for columns that were optional before
		for i, c := range cols {
			if f, ok := current.FieldsByName(c.field.Name); ok && len(f) > 0 && f[0].Nullable {
				cols[i].required = false
			}
		}
		isc = newTableSchema(cols)
	}
	sc, err := table.SchemaToArrowSchema(isc, nil, false, false)
	if err != nil {
		return nil, err
	}
	return withPgMetadata(sc, isc), nil
}

// IdentityStamper converts request batches to a table schema and stamps
// the identity columns exactly as the Iceberg backend does. Exported for
// other Lakehouse implementations (facadetest).
type IdentityStamper struct{ s *stamper }

// NewIdentityStamper stamps batches of reqSchema into tableSchema (from
// PlanSchema), numbering rows from base.
func NewIdentityStamper(mem memory.Allocator, datasetID string, reqSchema, tableSchema *arrow.Schema, base int64, createdAt time.Time) (*IdentityStamper, error) {
	_, rowIDIdx, createdIdx, err := requestColumns(reqSchema)
	if err != nil {
		return nil, err
	}
	required := map[string]bool{}
	for _, f := range tableSchema.Fields() {
		if !f.Nullable && !isIdentity(f.Name) {
			required[f.Name] = true
		}
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return &IdentityStamper{newStamper(mem, datasetID, reqSchema, tableSchema, required, rowIDIdx, createdIdx,
		base, createdAt.UTC().Truncate(time.Microsecond).UnixMicro(), DefaultOrdinalSlots)}, nil
}

// Stamp returns the stamped batch (owned by the caller) for rec (borrowed).
// Typed errors: *NullInRequiredError, ErrInvalidRequest.
func (s *IdentityStamper) Stamp(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	return s.s.stamp(rec)
}

// Checksum of the business columns of the rows stamped so far.
func (s *IdentityStamper) Checksum() Checksum { return s.s.sum }

// Next is the __row_index the next stamped row gets.
func (s *IdentityStamper) Next() int64 { return s.s.next }
