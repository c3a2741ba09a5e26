package facade

import (
	"fmt"
	"slices"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/lakewrite/lakewrite/facade/internal/identity"
)

// prepareSchema evolves the table schema in txn for the write's business
// columns (as identity.PlanChange decides, under the dataset's
// SchemaPolicy), keeps the table's schema.name-mapping.default current,
// and returns what changed.
//
// A replace keeps a column's field id when its type is promoted the way
// Iceberg allows (int to long, float to double, decimal precision
// widening); any other type change deletes the column and adds it again
// under a new field id (a replace rewrites every row), unless the
// SchemaPolicy refuses it. The business columns end up in the write's
// order, before the identity columns, except incompatibly retyped ones,
// which land after them. An append promotes in place and adds the columns
// the table lacks as optional columns, before the identity columns.
func (f *Facade) prepareSchema(txn *table.Transaction, cur *iceberg.Schema, dataset string, mode WriteMode, cols []identity.Column) (identity.SchemaChange, error) {
	plan, err := identity.PlanChange(dataset, mode, identity.SchemaPolicy(f.schemaPolicy(dataset)), identity.IcebergCols(cur), cols)
	ch := plan
	if err != nil {
		return ch, err
	}
	want := map[string]identity.Column{}
	for _, c := range cols {
		want[c.Field.Name] = c
	}
	if mode == Append {
		var missing []string
		for _, id := range identity.IdentityFields() {
			if _, ok := cur.FindFieldByName(id.Name); !ok {
				missing = append(missing, id.Name)
			}
		}
		if len(missing) > 0 {
			return ch, &SchemaMismatchError{Dataset: dataset, Columns: missing, Detail: "identity columns missing from the table (replace first)"}
		}
		if !ch.Empty() {
			upd := txn.UpdateSchema(true, false)
			for _, name := range ch.Promoted {
				c := want[name]
				upd.UpdateColumn([]string{name}, table.ColumnUpdate{
					FieldType: iceberg.Optional[iceberg.Type]{Val: c.Type, Valid: true},
					Doc:       iceberg.Optional[string]{Val: identity.DocFor(c), Valid: true},
				})
			}
			for _, name := range ch.Added {
				c := want[name]
				// optional: the rows already in the table read NULL
				upd.AddColumn([]string{name}, c.Type, identity.DocFor(c), false, nil)
				upd.MoveBefore([]string{name}, []string{ColRowIndex})
			}
			if err := upd.Commit(); err != nil {
				return ch, fmt.Errorf("facade: evolve schema of %q: %w", dataset, err)
			}
		}
		return ch, f.syncNameMapping(txn, dataset)
	}
	readd := map[string]bool{}
	for _, name := range ch.Retyped {
		readd[name] = true
	}

	// The order the update leaves without moves: the table's fields less
	// the deleted ones, then the added ones in the write's order.
	var identityMissing bool
	var order []string
	for _, fld := range cur.Fields() {
		_, ok := want[fld.Name]
		if identity.IsIdentity(fld.Name) || (ok && !readd[fld.Name]) {
			order = append(order, fld.Name)
		}
	}
	for _, c := range cols {
		if _, ok := cur.FindFieldByName(c.Field.Name); !ok || readd[c.Field.Name] {
			order = append(order, c.Field.Name)
		}
	}
	for _, id := range identity.IdentityFields() {
		if _, ok := cur.FindFieldByName(id.Name); !ok {
			order = append(order, id.Name)
			identityMissing = true
		}
	}
	target := make([]string, 0, len(cols)+3)
	for _, c := range cols {
		target = append(target, c.Field.Name)
	}
	for _, fld := range cur.Fields() {
		if identity.IsIdentity(fld.Name) {
			target = append(target, fld.Name)
		}
	}
	for _, id := range identity.IdentityFields() {
		if _, ok := cur.FindFieldByName(id.Name); !ok {
			target = append(target, id.Name)
		}
	}
	reorder := !slices.Equal(order, target)

	upd := txn.UpdateSchema(true, true)
	changed := false
	for _, name := range ch.Dropped {
		upd.DeleteColumn([]string{name})
		changed = true
	}
	for _, name := range ch.Retyped {
		upd.DeleteColumn([]string{name})
		changed = true
	}
	for _, name := range ch.Promoted {
		c := want[name]
		u := table.ColumnUpdate{
			FieldType: iceberg.Optional[iceberg.Type]{Val: c.Type, Valid: true},
			Doc:       iceberg.Optional[string]{Val: identity.DocFor(c), Valid: true},
		}
		if fld, _ := cur.FindFieldByName(name); fld.Required && !c.Required {
			u.Required = iceberg.Optional[bool]{Val: false, Valid: true}
		}
		upd.UpdateColumn([]string{name}, u)
		changed = true
	}
	for _, name := range ch.Relaxed {
		upd.UpdateColumn([]string{name}, table.ColumnUpdate{Required: iceberg.Optional[bool]{Val: false, Valid: true}})
		changed = true
	}
	for _, c := range cols {
		if _, ok := cur.FindFieldByName(c.Field.Name); ok && !readd[c.Field.Name] {
			continue
		}
		upd.AddColumn([]string{c.Field.Name}, c.Type, identity.DocFor(c), c.Required, nil)
		changed = true
	}
	if identityMissing {
		for _, id := range identity.IdentityFields() {
			if _, ok := cur.FindFieldByName(id.Name); !ok {
				upd.AddColumn([]string{id.Name}, id.Type, id.Doc, true, nil)
			}
		}
		changed = true
	}
	// iceberg-go cannot move (or move next to) a column deleted and added
	// again under the same name in one update, and a second update in the
	// same transaction asserts the staged schema id, which the catalog
	// rejects. So a retyped column stays where the update adds it: after
	// the identity columns; every other column takes its place.
	if reorder {
		movable := slices.DeleteFunc(slices.Clone(target), func(n string) bool { return readd[n] })
		moveTo(upd, movable)
		changed = true
	}
	if changed {
		if err := upd.Commit(); err != nil {
			return ch, fmt.Errorf("facade: evolve schema of %q: %w", dataset, err)
		}
	}
	return ch, f.syncNameMapping(txn, dataset)
}

// moveTo orders the top-level columns as target.
func moveTo(upd *table.UpdateSchema, target []string) {
	for i, name := range target {
		if i == 0 {
			upd.MoveFirst([]string{name})
		} else {
			upd.MoveAfter([]string{name}, []string{target[i-1]})
		}
	}
}

// syncNameMapping sets schema.name-mapping.default to the mapping of the
// schema staged in txn when it differs.
func (f *Facade) syncNameMapping(txn *table.Transaction, dataset string) error {
	staged, err := txn.StagedTable()
	if err != nil {
		return fmt.Errorf("facade: stage schema of %q: %w", dataset, err)
	}
	nm, err := nameMappingJSON(staged.Schema())
	if err != nil {
		return err
	}
	if staged.Properties()[table.DefaultNameMappingKey] == nm {
		return nil
	}
	if err := txn.SetProperties(iceberg.Properties{table.DefaultNameMappingKey: nm}); err != nil {
		return fmt.Errorf("facade: set name mapping of %q: %w", dataset, err)
	}
	return nil
}
