package writestrategy

import (
	"encoding/json"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/pgbuiltin"
	"github.com/lakewrite/lakewrite/ledger"
)

// CommitOutcome is the ledger outcome that records a committed lakehouse
// write as a Dispatcher write records it: the row count, snapshot id and
// committed-at (which becomes the dataset's watermark) of res, and the
// declared schema, or, when schema is nil, the one res.Schema, the
// snapshot's table schema, gives (its business columns with the Postgres
// types the table recorded; see Dispatcher.Lookup). A writer composing
// facade.Stage and CommitStaged itself commits its intent with it, so the
// dataset can be read as a source by a Dispatcher write afterwards.
func CommitOutcome(res facade.CommitResult, schema json.RawMessage) ledger.Outcome {
	if schema == nil {
		schema = landedSchema(res.Schema)
	}
	return ledger.Outcome{RowCount: res.Rows, SnapshotID: res.SnapshotID, CommittedAt: res.CommittedAt, Schema: schema}
}

// landedSchema is the declared schema of a dataset as its landed snapshot
// tells it (sc: the snapshot's table schema, facade.CommitResult.Schema),
// for a roll-forward of a write that did not record its declared schema in
// the snapshot summary (one composed from facade.Stage and CommitStaged
// rather than by a Dispatcher): the business columns of the table, in
// order, each with the Postgres type the table recorded for it
// (cursor.MetaPGType) when that is a built-in type, else the type a load of
// the column's Arrow type stores (numeric(p,s) from the Iceberg decimal,
// text for an enum or a string). A varchar's length is not kept: it reads
// back as character varying. Nil when a column has no type it can declare
// (an Arrow type no load stores), or no column is left.
func landedSchema(sc *arrow.Schema) json.RawMessage {
	if sc == nil {
		return nil
	}
	var s Schema
	for _, f := range sc.Fields() {
		switch f.Name {
		case facade.ColRowIndex, facade.ColRowID, facade.ColCreatedAt:
			continue
		}
		typ, ok := recordedType(f)
		if !ok {
			var err error
			if typ, err = pgTypeOf(f.Name, f.Type); err != nil {
				return nil
			}
		}
		s.Columns = append(s.Columns, Column{Name: f.Name, Type: typ})
	}
	raw := s.JSON()
	if _, err := ParseSchema(raw); err != nil {
		return nil
	}
	return raw
}

// recordedType is the name (as format_type prints it without a type
// modifier) of the built-in Postgres type recorded on f, or of an array of
// one. Numeric is left to the Arrow type, which has its precision and
// scale.
func recordedType(f arrow.Field) (string, bool) {
	typname, ok := f.Metadata.GetValue(cursor.MetaPGType)
	if !ok {
		return "", false
	}
	elem, array := strings.CutPrefix(typname, "_")
	for oid, t := range builtinTypes {
		if t.name == "" || oid == 1700 {
			continue
		}
		if b, _ := pgbuiltin.Lookup(oid); b.Name == elem {
			if array {
				return t.name + "[]", true
			}
			return t.name, true
		}
	}
	return "", false
}
