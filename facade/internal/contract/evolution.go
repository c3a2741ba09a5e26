package contract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/internal/identity"
	"github.com/lakewrite/lakewrite/internal/vocab"
)

// Policies holds per-dataset schema policies a test sets as it goes; wire
// For into Config.SchemaPolicyFor.
type Policies struct {
	mu sync.Mutex
	m  map[string]facade.SchemaPolicy
}

// For returns the policy set for datasetID, if any.
func (p *Policies) For(datasetID string) (facade.SchemaPolicy, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pol, ok := p.m[datasetID]
	return pol, ok
}

// Set sets the policy of datasetID for the writes that follow.
func (p *Policies) Set(datasetID string, pol facade.SchemaPolicy) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]facade.SchemaPolicy{}
	}
	p.m[datasetID] = pol
}

// EvolutionDataset is the dataset RunEvolution writes.
const EvolutionDataset = "evolve"

// Col is one column of an evolution step: its name and Arrow type, and its
// Postgres type.
type Col struct {
	Name   string
	Type   arrow.DataType
	PgType string
}

// EvolutionStep is one write of the schema evolution sequence.
type EvolutionStep struct {
	Name   string
	Mode   facade.WriteMode
	Policy facade.SchemaPolicy // the dataset's policy for this write
	Cols   []Col
	From   int // the rows written have ids From, From+1, From+2
	// Want is the change recorded in the snapshot summary (successful
	// steps).
	Want identity.SchemaChange
	// Names are the table's business columns after the step, in order.
	Names []string
	// Refused is the error a refused step returns (errors.Is for
	// ErrSchemaChange; *SchemaMismatchError otherwise); nil for a write
	// that lands. Refused lists the columns the error names.
	Refused        error
	RefusedColumns []string
}

var (
	int4   = Col{"id", arrow.PrimitiveTypes.Int32, "int4"}
	int8   = Col{"id", arrow.PrimitiveTypes.Int64, "int8"}
	qty4   = Col{"qty", arrow.PrimitiveTypes.Int32, "int4"}
	qty8   = Col{"qty", arrow.PrimitiveTypes.Int64, "int8"}
	real4  = Col{"amount", arrow.PrimitiveTypes.Float32, "float4"}
	real8  = Col{"amount", arrow.PrimitiveTypes.Float64, "float8"}
	dec10  = Col{"price", &arrow.Decimal128Type{Precision: 10, Scale: 2}, "numeric"}
	dec12  = Col{"price", &arrow.Decimal128Type{Precision: 12, Scale: 2}, "numeric"}
	name   = Col{"name", arrow.BinaryTypes.String, "text"}
	note   = Col{"note", arrow.BinaryTypes.String, "text"}
	title  = Col{"title", arrow.BinaryTypes.String, "text"}
	extra  = Col{"extra", arrow.BinaryTypes.String, "text"}
	more   = Col{"more", arrow.BinaryTypes.String, "text"}
	qtyTxt = Col{"qty", arrow.BinaryTypes.String, "text"}
	amtTxt = Col{"amount", arrow.BinaryTypes.String, "text"}
)

// errMismatch stands for *facade.SchemaMismatchError in EvolutionStep.Refused.
var errMismatch = errors.New("schema mismatch")

// EvolutionSteps is the sequence RunEvolution writes: replaces that add a
// column, promote int to bigint, float to double and decimal(10,2) to
// decimal(12,2), reorder the SELECT, drop a column, re-add it, rename one
// (drop and add); appends that add a nullable column, promote a type and
// write a narrower type; and refused changes (an incompatible retype and
// an append's new column under policy, an append's incompatible type).
func EvolutionSteps() []EvolutionStep {
	return []EvolutionStep{
		{Name: "create", Mode: facade.Replace, Cols: []Col{int4, real4, dec10, name, note}, From: 0,
			Names: []string{"id", "amount", "price", "name", "note"}},
		{Name: "add column", Mode: facade.Replace, Cols: []Col{int4, qty4, real4, dec10, name, note}, From: 10,
			Want:  identity.SchemaChange{Added: []string{"qty"}},
			Names: []string{"id", "qty", "amount", "price", "name", "note"}},
		{Name: "promote int to bigint", Mode: facade.Replace, Cols: []Col{int8, qty4, real4, dec10, name, note}, From: 20,
			Want:  identity.SchemaChange{Promoted: []string{"id"}},
			Names: []string{"id", "qty", "amount", "price", "name", "note"}},
		{Name: "promote float to double", Mode: facade.Replace, Cols: []Col{int8, qty4, real8, dec10, name, note}, From: 30,
			Want:  identity.SchemaChange{Promoted: []string{"amount"}},
			Names: []string{"id", "qty", "amount", "price", "name", "note"}},
		{Name: "widen decimal", Mode: facade.Replace, Cols: []Col{int8, qty4, real8, dec12, name, note}, From: 40,
			Want:  identity.SchemaChange{Promoted: []string{"price"}},
			Names: []string{"id", "qty", "amount", "price", "name", "note"}},
		{Name: "reorder select", Mode: facade.Replace, Cols: []Col{name, int8, qty4, real8, dec12, note}, From: 50,
			Want:  identity.SchemaChange{Reordered: true},
			Names: []string{"name", "id", "qty", "amount", "price", "note"}},
		{Name: "drop column", Mode: facade.Replace, Cols: []Col{name, int8, qty4, real8, dec12}, From: 60,
			Want:  identity.SchemaChange{Dropped: []string{"note"}},
			Names: []string{"name", "id", "qty", "amount", "price"}},
		{Name: "re-add column", Mode: facade.Replace, Cols: []Col{name, int8, qty4, real8, dec12, note}, From: 70,
			Want:  identity.SchemaChange{Added: []string{"note"}},
			Names: []string{"name", "id", "qty", "amount", "price", "note"}},
		{Name: "rename by drop and add", Mode: facade.Replace, Cols: []Col{title, int8, qty4, real8, dec12, note}, From: 80,
			Want:  identity.SchemaChange{Added: []string{"title"}, Dropped: []string{"name"}},
			Names: []string{"title", "id", "qty", "amount", "price", "note"}},
		{Name: "append new nullable column", Mode: facade.Append, Cols: []Col{title, int8, qty4, real8, dec12, note, extra}, From: 90,
			Want:  identity.SchemaChange{Added: []string{"extra"}},
			Names: []string{"title", "id", "qty", "amount", "price", "note", "extra"}},
		{Name: "append promotes", Mode: facade.Append, Cols: []Col{title, int8, qty8, real8, dec12, note}, From: 100,
			Want:  identity.SchemaChange{Promoted: []string{"qty"}},
			Names: []string{"title", "id", "qty", "amount", "price", "note", "extra"}},
		{Name: "append narrower types", Mode: facade.Append, Cols: []Col{int4, qty4, real4, dec10, extra}, From: 110,
			Names: []string{"title", "id", "qty", "amount", "price", "note", "extra"}},
		{Name: "refused retype", Mode: facade.Replace, Policy: facade.SchemaPolicy{RefuseIncompatible: true},
			Cols: []Col{title, int8, qtyTxt, real8, dec12, note, extra}, From: 120,
			Names:   []string{"title", "id", "qty", "amount", "price", "note", "extra"},
			Refused: facade.ErrSchemaChange, RefusedColumns: []string{"qty"}},
		{Name: "refused append add", Mode: facade.Append, Policy: facade.SchemaPolicy{RefuseAppendAdds: true},
			Cols: []Col{title, int8, more}, From: 130,
			Names:   []string{"title", "id", "qty", "amount", "price", "note", "extra"},
			Refused: errMismatch, RefusedColumns: []string{"more"}},
		{Name: "refused append retype", Mode: facade.Append, Cols: []Col{title, int8, amtTxt}, From: 140,
			Names:   []string{"title", "id", "qty", "amount", "price", "note", "extra"},
			Refused: errMismatch, RefusedColumns: []string{"amount"}},
	}
}

// value is the text of column c in row r, as Arrow's ValueStr renders it
// whatever the column's width.
func value(c string, r int) string {
	switch c {
	case "id", "qty":
		return fmt.Sprint(intValue(c, r))
	case "amount":
		return fmt.Sprint(float64(r) + 0.5)
	case "price":
		return fmt.Sprintf("%d.25", r)
	}
	return fmt.Sprintf("%s-%d", c, r)
}

func intValue(c string, r int) int {
	if c == "qty" {
		return r * 10
	}
	return r
}

// StepBatch builds rows step.From..From+2 of the step's columns.
func StepBatch(e *Env, step EvolutionStep) arrow.RecordBatch {
	fields := make([]arrow.Field, len(step.Cols))
	for i, c := range step.Cols {
		fields[i] = arrow.Field{Name: c.Name, Type: c.Type, Nullable: true, Metadata: meta(c.PgType)}
	}
	sc := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(e.Mem, sc)
	defer b.Release()
	for r := step.From; r < step.From+3; r++ {
		for i, c := range step.Cols {
			switch fb := b.Field(i).(type) {
			case *array.Int32Builder:
				fb.Append(int32(intValue(c.Name, r)))
			case *array.Int64Builder:
				fb.Append(int64(intValue(c.Name, r)))
			case *array.Float32Builder:
				fb.Append(float32(r) + 0.5)
			case *array.Float64Builder:
				fb.Append(float64(r) + 0.5)
			case *array.Decimal128Builder:
				fb.Append(decimal128.FromI64(int64(r)*100 + 25))
			case *array.StringBuilder:
				fb.Append(value(c.Name, r))
			}
		}
	}
	return b.NewRecordBatch()
}

// EvolutionRead is the table as the sequence read it after a step.
type EvolutionRead struct {
	SnapshotID int64
	Names      []string          // business columns in order
	Types      map[string]string // column -> Arrow type
	Rows       []string          // sorted "col=value,..." over Names
}

// readTable scans a snapshot (0 = current) of the evolution dataset.
func readTable(t *testing.T, e *Env, snap int64) EvolutionRead {
	t.Helper()
	out := EvolutionRead{SnapshotID: snap, Types: map[string]string{}}
	for rec, err := range e.LH.Scan(context.Background(), EvolutionDataset, facade.ScanOptions{SnapshotID: snap, ExcludeIdentity: true}) {
		require.NoError(t, err)
		out.Names = out.Names[:0]
		for _, f := range rec.Schema().Fields() {
			out.Names = append(out.Names, f.Name)
			out.Types[f.Name] = f.Type.String()
		}
		for r := range int(rec.NumRows()) {
			var parts []string
			for c, f := range rec.Schema().Fields() {
				parts = append(parts, f.Name+"="+rec.Column(c).ValueStr(r))
			}
			slices.Sort(parts)
			out.Rows = append(out.Rows, strings.Join(parts, ","))
		}
	}
	slices.Sort(out.Rows)
	return out
}

// expectRows renders rows from..from+2 over names; columns the write did
// not carry read NULL.
func expectRows(names []string, written []Col, from int) []string {
	var out []string
	for r := from; r < from+3; r++ {
		var parts []string
		for _, n := range names {
			v := array.NullValueStr
			if slices.ContainsFunc(written, func(c Col) bool { return c.Name == n }) {
				v = value(n, r)
			}
			parts = append(parts, n+"="+v)
		}
		slices.Sort(parts)
		out = append(out, strings.Join(parts, ","))
	}
	return out
}

// RunEvolution writes EvolutionSteps to EvolutionDataset and checks after
// each step the current schema (names, order), the rows read back (rows
// already in the table read NULL in added columns and their values in
// promoted ones), the recorded change and row id version, and that a
// refused step changed nothing. After the last step every earlier
// snapshot still reads as it did. check, when set, runs after each step
// (res is nil for a refused step) for backend-specific checks.
func RunEvolution(t *testing.T, e *Env, check func(t *testing.T, step EvolutionStep, res *facade.CommitResult)) {
	require.NotNil(t, e.Policies, "Env.Policies must be wired into the backend's SchemaPolicyFor")
	ctx := context.Background()
	var rows []string // the model of the table
	var reads []EvolutionRead
	var prevNames []string
	for _, step := range EvolutionSteps() {
		e.Policies.Set(EvolutionDataset, step.Policy)
		rec := StepBatch(e, step)
		res, err := e.LH.Write(ctx, facade.Target{DatasetID: EvolutionDataset, WriterID: "evolve"},
			facade.WriteRequest{Mode: step.Mode, Schema: rec.Schema(), Rows: Seq([]arrow.RecordBatch{rec}), TxnID: step.Name})
		rec.Release()
		if step.Refused != nil {
			switch {
			case errors.Is(step.Refused, facade.ErrSchemaChange):
				require.ErrorIs(t, err, facade.ErrSchemaChange, step.Name)
				var sce *facade.SchemaChangeError
				require.ErrorAs(t, err, &sce, step.Name)
				assert.Equal(t, step.RefusedColumns, append(sce.Dropped, sce.Retyped...), step.Name)
			default:
				var sm *facade.SchemaMismatchError
				require.ErrorAs(t, err, &sm, step.Name)
				assert.Equal(t, step.RefusedColumns, sm.Columns, step.Name)
			}
			_, found, ferr := e.LH.FindTxn(ctx, EvolutionDataset, step.Name)
			require.NoError(t, ferr)
			assert.False(t, found, "%s: no snapshot", step.Name)
			got := readTable(t, e, 0)
			assert.Equal(t, prevNames, got.Names, "%s: schema unchanged", step.Name)
			assert.Equal(t, rows, got.Rows, "%s: rows unchanged", step.Name)
			if check != nil {
				check(t, step, nil)
			}
			continue
		}
		require.NoError(t, err, step.Name)
		if step.Mode == facade.Replace {
			rows = nil
		} else {
			// the rows already in the table gain the added columns as NULL
			for i, r := range rows {
				parts := strings.Split(r, ",")
				for _, a := range step.Want.Added {
					parts = append(parts, a+"="+array.NullValueStr)
				}
				slices.Sort(parts)
				rows[i] = strings.Join(parts, ",")
			}
		}
		rows = append(rows, expectRows(step.Names, step.Cols, step.From)...)
		slices.Sort(rows)

		var business []string
		for _, f := range res.Schema.Fields() {
			if f.Name != facade.ColRowIndex && f.Name != facade.ColRowID && f.Name != facade.ColCreatedAt {
				business = append(business, f.Name)
			}
		}
		assert.Equal(t, step.Names, business, "%s: result schema", step.Name)
		raw, ok := res.Summary[vocab.SummarySchemaChange]
		if step.Want.Empty() {
			assert.False(t, ok, "%s: no change recorded, got %s", step.Name, raw)
		} else {
			var got identity.SchemaChange
			require.True(t, ok, "%s: change recorded", step.Name)
			require.NoError(t, json.Unmarshal([]byte(raw), &got))
			assert.Equal(t, step.Want, got, step.Name)
		}
		assert.Equal(t, facade.RowIDVersion, res.Summary[vocab.SummaryRowIDVersion], step.Name)

		got := readTable(t, e, 0)
		assert.Equal(t, step.Names, got.Names, "%s: scan columns", step.Name)
		assert.Equal(t, rows, got.Rows, "%s: rows", step.Name)
		got.SnapshotID = res.SnapshotID
		reads = append(reads, got)
		prevNames = step.Names
		if check != nil {
			check(t, step, &res)
		}
	}
	// the final types: every promotion held
	final := readTable(t, e, 0)
	assert.Equal(t, map[string]string{
		"title": "utf8", "id": "int64", "qty": "int64", "amount": "float64",
		"price": "decimal(12, 2)", "note": "utf8", "extra": "utf8",
	}, final.Types)
	// time travel: each snapshot still reads as it did, under its own schema
	for _, r := range reads {
		again := readTable(t, e, r.SnapshotID)
		again.SnapshotID = r.SnapshotID
		assert.Equal(t, r, again, "snapshot %d", r.SnapshotID)
	}
}

func testEvolutionSequence(t *testing.T, e *Env) { RunEvolution(t, e, nil) }
