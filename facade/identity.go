package facade

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// RowIDVersion is the version of the row hash behind __row_id (and
// Checksum) that this library computes. Every table the facade writes
// records it as the table property PropertyRowIDVersion, and every
// snapshot under SummaryRowIDVersion. A change to how __row_id is computed
// must bump it: the tables written with another version are then refused
// (*RowIDVersionError) instead of silently mixing row ids of two functions,
// and moving a table to the new version is a deliberate migration.
const RowIDVersion = "1"

// PropertyRowIDVersion is the table property recording the RowIDVersion a
// table's __row_id values were computed with. A table without it was
// written before it was recorded, by version 1.
const PropertyRowIDVersion = "lakewrite.row-id-version"

// SummaryRowIDVersion is the snapshot summary key recording the
// RowIDVersion of the write.
const SummaryRowIDVersion = "lakewrite.row-id-version"

// ErrRowIDVersion: the table records a row id version this library does not
// compute (a newer library wrote it). Nothing was written.
var ErrRowIDVersion = errors.New("facade: unknown row id version")

// RowIDVersionError names the dataset and the version its table records.
// It matches ErrRowIDVersion.
type RowIDVersionError struct {
	Dataset string
	Version string // the table's PropertyRowIDVersion
}

func (e *RowIDVersionError) Error() string {
	return fmt.Sprintf("%v: dataset %q records %s=%q, this library computes version %s: "+
		"writing would mix two row id functions (upgrade the library or migrate the table)",
		ErrRowIDVersion, e.Dataset, PropertyRowIDVersion, e.Version, RowIDVersion)
}

// Is reports whether target is ErrRowIDVersion.
func (e *RowIDVersionError) Is(target error) bool { return target == ErrRowIDVersion }

// checkRowIDVersion refuses a table whose recorded version is not ours.
func checkRowIDVersion(dataset string, props iceberg.Properties) error {
	if v, ok := props[PropertyRowIDVersion]; ok && v != RowIDVersion {
		return &RowIDVersionError{Dataset: dataset, Version: v}
	}
	return nil
}

// PlanSchema returns the table schema (Arrow, identity columns included,
// Postgres types as field metadata) a write of reqSchema in mode produces
// over a table whose schema is current (nil when the table is new), and
// the schema change it makes, decided under policy exactly as the Iceberg
// backend decides it. It returns the same typed errors
// (*UnsupportedTypeError, *SchemaMismatchError, *SchemaChangeError,
// ErrInvalidRequest). Arrow schemas carry no field ids: a column retyped
// incompatibly keeps its place in the write's order here.
// Exported so other implementations of Lakehouse (facadetest) behave alike.
func PlanSchema(datasetID string, mode WriteMode, policy SchemaPolicy, current, reqSchema *arrow.Schema) (*arrow.Schema, SchemaChange, error) {
	cols, _, _, err := requestColumns(reqSchema)
	if err != nil {
		return nil, SchemaChange{}, err
	}
	if len(cols) == 0 {
		return nil, SchemaChange{}, fmt.Errorf("%w: no business columns", ErrInvalidRequest)
	}
	if current == nil {
		sc, err := arrowTableSchema(newTableSchema(cols))
		return sc, SchemaChange{}, err
	}
	var cur []tableCol
	curCols := map[string]column{}
	id := 0
	for _, f := range current.Fields() {
		if isIdentity(f.Name) {
			cur = append(cur, tableCol{name: f.Name, required: true})
			continue
		}
		t, err := icebergType(f, func() int { id++; return id })
		if err != nil {
			return nil, SchemaChange{}, err
		}
		cur = append(cur, tableCol{name: f.Name, typ: t, required: !f.Nullable})
		curCols[f.Name] = column{field: f, typ: t, required: !f.Nullable, pgType: pgTypeOf(f)}
	}
	ch, err := planChange(datasetID, mode, policy, cur, cols)
	if err != nil {
		return nil, SchemaChange{}, err
	}
	if mode == Append {
		if ch.Empty() {
			return current, ch, nil
		}
		req := map[string]column{}
		for _, c := range cols {
			req[c.field.Name] = c
		}
		var next []column
		for _, f := range current.Fields() {
			c, ok := curCols[f.Name]
			if !ok {
				continue
			}
			if slices.Contains(ch.Promoted, f.Name) {
				c = req[f.Name]
				c.required = !f.Nullable
			}
			next = append(next, c)
		}
		for _, name := range ch.Added {
			c := req[name]
			c.required = false
			next = append(next, c)
		}
		sc, err := arrowTableSchema(newTableSchema(next))
		return sc, ch, err
	}
	// keep nullability relaxed for columns that were optional before
	for i, c := range cols {
		if old, ok := curCols[c.field.Name]; ok && !old.required {
			cols[i].required = false
		}
	}
	sc, err := arrowTableSchema(newTableSchema(cols))
	return sc, ch, err
}

func arrowTableSchema(isc *iceberg.Schema) (*arrow.Schema, error) {
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
