package identity

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/lakewrite/lakewrite/internal/vocab"
)

// Identity column names stamped on every row (re-exported by facade).
const (
	ColRowIndex  = "__row_index"  // int64: order written; 0..n-1 (replace), on from the next row index (append, rows a merge writes)
	ColRowID     = "__row_id"     // int64: hash of dataset id, first index, row content and ordinal among equal rows
	ColCreatedAt = "__created_at" // timestamp[us, UTC]: the write's time
)

// PlanSchema returns the table schema (Arrow, identity columns included,
// Postgres types as field metadata) a write of reqSchema in mode produces
// over a table whose schema is current (nil when the table is new), and
// the schema change it makes, decided under policy exactly as the Iceberg
// backend decides it. It returns the same typed errors
// (*UnsupportedTypeError, *SchemaMismatchError, *SchemaChangeError,
// ErrInvalidRequest). Arrow schemas carry no field ids: a column retyped
// incompatibly keeps its place in the write's order here.
func PlanSchema(datasetID string, mode vocab.WriteMode, policy SchemaPolicy, current, reqSchema *arrow.Schema) (*arrow.Schema, SchemaChange, error) {
	cols, _, _, err := RequestColumns(reqSchema)
	if err != nil {
		return nil, SchemaChange{}, err
	}
	if len(cols) == 0 {
		return nil, SchemaChange{}, fmt.Errorf("%w: no business columns", ErrInvalidRequest)
	}
	if current == nil {
		sc, err := arrowTableSchema(NewTableSchema(cols))
		return sc, SchemaChange{}, err
	}
	var cur []TableCol
	curCols := map[string]Column{}
	id := 0
	for _, f := range current.Fields() {
		if IsIdentity(f.Name) {
			cur = append(cur, TableCol{Name: f.Name, Required: true})
			continue
		}
		t, err := icebergType(f, func() int { id++; return id })
		if err != nil {
			return nil, SchemaChange{}, err
		}
		cur = append(cur, TableCol{Name: f.Name, Type: t, Required: !f.Nullable})
		curCols[f.Name] = Column{Field: f, Type: t, Required: !f.Nullable, PGType: pgTypeOf(f)}
	}
	ch, err := PlanChange(datasetID, mode, policy, cur, cols)
	if err != nil {
		return nil, SchemaChange{}, err
	}
	if mode == vocab.Append {
		if ch.Empty() {
			return current, ch, nil
		}
		req := map[string]Column{}
		for _, c := range cols {
			req[c.Field.Name] = c
		}
		var next []Column
		for _, f := range current.Fields() {
			c, ok := curCols[f.Name]
			if !ok {
				continue
			}
			if slices.Contains(ch.Promoted, f.Name) {
				c = req[f.Name]
				c.Required = !f.Nullable
			}
			next = append(next, c)
		}
		for _, name := range ch.Added {
			c := req[name]
			c.Required = false
			next = append(next, c)
		}
		sc, err := arrowTableSchema(NewTableSchema(next))
		return sc, ch, err
	}
	// keep nullability relaxed for columns that were optional before
	for i, c := range cols {
		if old, ok := curCols[c.Field.Name]; ok && !old.Required {
			cols[i].Required = false
		}
	}
	sc, err := arrowTableSchema(NewTableSchema(cols))
	return sc, ch, err
}

func arrowTableSchema(isc *iceberg.Schema) (*arrow.Schema, error) {
	sc, err := table.SchemaToArrowSchema(isc, nil, false, false)
	if err != nil {
		return nil, err
	}
	return WithPgMetadata(sc, isc), nil
}

// WithPgMetadata returns sc with field-id metadata dropped and the
// Postgres type recorded in the Iceberg docs restored as field metadata.
func WithPgMetadata(sc *arrow.Schema, isc *iceberg.Schema) *arrow.Schema {
	fields := make([]arrow.Field, sc.NumFields())
	for i, fld := range sc.Fields() {
		fld.Metadata = arrow.Metadata{}
		if nf, ok := isc.FindFieldByName(fld.Name); ok && strings.HasPrefix(nf.Doc, docPrefix) {
			pg := strings.TrimPrefix(nf.Doc, docPrefix)
			if pg == "json" || pg == "jsonb" {
				fld.Metadata = arrow.NewMetadata([]string{metaPGType, metaJSON}, []string{pg, "true"})
			} else {
				fld.Metadata = arrow.NewMetadata([]string{metaPGType}, []string{pg})
			}
		}
		fields[i] = fld
	}
	return arrow.NewSchema(fields, nil)
}

// NewTableStamper stamps batches of reqSchema into tableSchema (from
// PlanSchema), numbering rows from base, exactly as the Iceberg backend
// stamps them (with DefaultOrdinalSlots).
func NewTableStamper(mem memory.Allocator, datasetID string, reqSchema, tableSchema *arrow.Schema, base int64, createdAt time.Time) (*Stamper, error) {
	_, rowIDIdx, createdIdx, err := RequestColumns(reqSchema)
	if err != nil {
		return nil, err
	}
	required := map[string]bool{}
	for _, f := range tableSchema.Fields() {
		if !f.Nullable && !IsIdentity(f.Name) {
			required[f.Name] = true
		}
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return NewStamper(mem, datasetID, reqSchema, tableSchema, required, rowIDIdx, createdIdx,
		base, createdAt.UTC().Truncate(time.Microsecond).UnixMicro(), DefaultOrdinalSlots), nil
}
