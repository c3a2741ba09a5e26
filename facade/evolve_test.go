package facade_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
)

// col is one column of an evolve test write: its Arrow type and values.
type col struct {
	name string
	typ  arrow.DataType
	vals []any
}

func evolveWrite(t *testing.T, e *icebergEnv, dataset string, cols ...col) (facade.CommitResult, error) {
	t.Helper()
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: c.name, Type: c.typ, Nullable: true}
	}
	sc := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(e.mem, sc)
	defer b.Release()
	for i, c := range cols {
		for _, v := range c.vals {
			switch fb := b.Field(i).(type) {
			case *array.Int32Builder:
				fb.Append(int32(v.(int)))
			case *array.Int64Builder:
				fb.Append(int64(v.(int)))
			case *array.Float32Builder:
				fb.Append(float32(v.(float64)))
			case *array.Float64Builder:
				fb.Append(v.(float64))
			case *array.Decimal128Builder:
				fb.Append(decimal128.FromI64(int64(v.(int))))
			case *array.StringBuilder:
				fb.Append(v.(string))
			default:
				t.Fatalf("unsupported builder %T", fb)
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	return e.f.Write(context.Background(), facade.Target{DatasetID: dataset, WriterID: "w"},
		facade.WriteRequest{Mode: facade.Replace, Schema: sc, Rows: func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }})
}

func loadTbl(t *testing.T, e *icebergEnv, dataset string) *table.Table {
	t.Helper()
	tbl, err := e.f.LoadTable(context.Background(), dataset)
	require.NoError(t, err)
	return tbl
}

func fieldID(t *testing.T, tbl *table.Table, name string) int {
	t.Helper()
	f, ok := tbl.Schema().FindFieldByName(name)
	require.True(t, ok, name)
	return f.ID
}

func fieldNames(s *iceberg.Schema) []string {
	var out []string
	for _, f := range s.Fields() {
		out = append(out, f.Name)
	}
	return out
}

// requireNameMapping: schema.name-mapping.default maps the current schema.
func requireNameMapping(t *testing.T, tbl *table.Table) {
	t.Helper()
	raw, ok := tbl.Properties()[table.DefaultNameMappingKey]
	require.True(t, ok, "name mapping property missing")
	want, err := json.Marshal(tbl.Schema().NameMapping())
	require.NoError(t, err)
	assert.JSONEq(t, string(want), raw)
}

// schemaChange is the change the current snapshot recorded.
func schemaChange(t *testing.T, tbl *table.Table) map[string]any {
	t.Helper()
	snap := tbl.CurrentSnapshot()
	require.NotNil(t, snap)
	raw, ok := snap.Summary.Properties[facade.SummarySchemaChange]
	if !ok {
		return nil
	}
	var out map[string]any
	require.NoError(t, json.Unmarshal([]byte(raw), &out))
	return out
}

// scanColumns reads the current snapshot through facade Scan: column names
// and the values of each column, formatted.
func scanColumns(t *testing.T, e *icebergEnv, dataset string) ([]string, map[string][]string, map[string]arrow.DataType) {
	t.Helper()
	var names []string
	vals := map[string][]string{}
	types := map[string]arrow.DataType{}
	for rec, err := range e.f.Scan(context.Background(), dataset, facade.ScanOptions{ExcludeIdentity: true}) {
		require.NoError(t, err)
		names = names[:0]
		for i, f := range rec.Schema().Fields() {
			names = append(names, f.Name)
			types[f.Name] = f.Type
			for j := range int(rec.NumRows()) {
				vals[f.Name] = append(vals[f.Name], rec.Column(i).ValueStr(j))
			}
		}
	}
	return names, vals, types
}

func TestPromotionKeepsFieldID(t *testing.T) {
	e := newIcebergEnv(t)
	_, err := evolveWrite(t, e, "promo",
		col{"a", arrow.PrimitiveTypes.Int32, []any{1, 2}},
		col{"f", arrow.PrimitiveTypes.Float32, []any{1.5, 2.5}},
		col{"d", &arrow.Decimal128Type{Precision: 10, Scale: 2}, []any{150, 275}})
	require.NoError(t, err)
	tbl := loadTbl(t, e, "promo")
	requireNameMapping(t, tbl)
	ids := map[string]int{"a": fieldID(t, tbl, "a"), "f": fieldID(t, tbl, "f"), "d": fieldID(t, tbl, "d")}
	oldSnap := tbl.CurrentSnapshot().SnapshotID

	_, err = evolveWrite(t, e, "promo",
		col{"a", arrow.PrimitiveTypes.Int64, []any{1 << 40, 3}},
		col{"f", arrow.PrimitiveTypes.Float64, []any{0.1, 3.5}},
		col{"d", &arrow.Decimal128Type{Precision: 12, Scale: 2}, []any{12345678901, 5}})
	require.NoError(t, err)
	tbl = loadTbl(t, e, "promo")
	for name, id := range ids {
		assert.Equal(t, id, fieldID(t, tbl, name), "field id of %s", name)
	}
	a, _ := tbl.Schema().FindFieldByName("a")
	assert.Equal(t, iceberg.PrimitiveTypes.Int64, a.Type)
	d, _ := tbl.Schema().FindFieldByName("d")
	assert.Equal(t, iceberg.DecimalTypeOf(12, 2), d.Type)
	requireNameMapping(t, tbl)
	ch := schemaChange(t, tbl)
	assert.ElementsMatch(t, []any{"a", "f", "d"}, ch["promoted"])
	assert.Nil(t, ch["retyped"])

	names, vals, types := scanColumns(t, e, "promo")
	assert.Equal(t, []string{"a", "f", "d"}, names)
	assert.Equal(t, []string{"1099511627776", "3"}, vals["a"])
	assert.Equal(t, []string{"0.1", "3.5"}, vals["f"])
	assert.Equal(t, []string{"123456789.01", "0.05"}, vals["d"])
	assert.Equal(t, arrow.INT64, types["a"].ID())
	assert.Equal(t, arrow.FLOAT64, types["f"].ID())

	// iceberg-go reads the new snapshot by field id, and the old one too.
	at, err := tbl.Scan(table.WithSelectedFields("a", "d")).ToArrowTable(context.Background())
	require.NoError(t, err)
	assert.EqualValues(t, 2, at.NumRows())
	at.Release()
	old, err := tbl.Scan(table.WithSnapshotID(oldSnap), table.WithSelectedFields("a", "f", "d")).ToArrowTable(context.Background())
	require.NoError(t, err)
	assert.EqualValues(t, 2, old.NumRows())
	old.Release()
}

func TestIncompatibleRetypeNewIDOrRefused(t *testing.T) {
	e := newIcebergEnv(t)
	_, err := evolveWrite(t, e, "retype",
		col{"a", arrow.PrimitiveTypes.Int64, []any{1, 2}},
		col{"b", arrow.BinaryTypes.String, []any{"x", "y"}})
	require.NoError(t, err)
	tbl := loadTbl(t, e, "retype")
	idA := fieldID(t, tbl, "a")

	// refused: table, snapshot and data files unchanged
	strict := newIcebergEnv(t, func(c *facade.Config) { c.SchemaPolicy.RefuseIncompatible = true })
	_, err = evolveWrite(t, strict, "retype",
		col{"a", arrow.PrimitiveTypes.Int64, []any{1}},
		col{"b", arrow.BinaryTypes.String, []any{"x"}})
	require.NoError(t, err)
	before := loadTbl(t, strict, "retype")
	files := dataFiles(t, strict.warehouse)
	_, err = evolveWrite(t, strict, "retype",
		col{"b", arrow.BinaryTypes.String, []any{"z"}},
		col{"a", arrow.PrimitiveTypes.Int32, []any{7}})
	require.ErrorIs(t, err, facade.ErrSchemaChange)
	var sce *facade.SchemaChangeError
	require.ErrorAs(t, err, &sce)
	assert.Equal(t, []string{"a"}, sce.Retyped)
	assert.Contains(t, sce.Detail, "RefuseIncompatible")
	after := loadTbl(t, strict, "retype")
	assert.Equal(t, before.CurrentSnapshot().SnapshotID, after.CurrentSnapshot().SnapshotID)
	assert.Equal(t, before.Schema().ID, after.Schema().ID)
	assert.Equal(t, files, dataFiles(t, strict.warehouse))

	// allowed by default: long -> int gets a new field id; the write's
	// order (b, a) holds; the retyped column lands after the identity
	// columns (iceberg-go cannot move a column re-added under its name)
	_, err = evolveWrite(t, e, "retype",
		col{"b", arrow.BinaryTypes.String, []any{"z"}},
		col{"a", arrow.PrimitiveTypes.Int32, []any{7}})
	require.NoError(t, err)
	tbl = loadTbl(t, e, "retype")
	assert.NotEqual(t, idA, fieldID(t, tbl, "a"))
	assert.Equal(t, []string{"b", facade.ColRowIndex, facade.ColRowID, facade.ColCreatedAt, "a"}, fieldNames(tbl.Schema()))
	assert.Equal(t, []any{"a"}, schemaChange(t, tbl)["retyped"])
	requireNameMapping(t, tbl)
	names, vals, _ := scanColumns(t, e, "retype")
	assert.Equal(t, []string{"b", "a"}, names)
	assert.Equal(t, []string{"7"}, vals["a"])
}

func TestNewColumnKeepsSelectOrder(t *testing.T) {
	e := newIcebergEnv(t)
	_, err := evolveWrite(t, e, "order",
		col{"a", arrow.PrimitiveTypes.Int64, []any{1}},
		col{"b", arrow.BinaryTypes.String, []any{"x"}})
	require.NoError(t, err)
	_, err = evolveWrite(t, e, "order",
		col{"a", arrow.PrimitiveTypes.Int64, []any{1}},
		col{"n", arrow.BinaryTypes.String, []any{"new"}},
		col{"b", arrow.BinaryTypes.String, []any{"x"}})
	require.NoError(t, err)
	tbl := loadTbl(t, e, "order")
	assert.Equal(t, []string{"a", "n", "b", facade.ColRowIndex, facade.ColRowID, facade.ColCreatedAt}, fieldNames(tbl.Schema()))
	assert.Equal(t, []any{"n"}, schemaChange(t, tbl)["added"])
	assert.Nil(t, schemaChange(t, tbl)["reordered"], "a and b keep their relative order")
	requireNameMapping(t, tbl)
	names, vals, _ := scanColumns(t, e, "order")
	assert.Equal(t, []string{"a", "n", "b"}, names)
	assert.Equal(t, []string{"new"}, vals["n"])

	// only reordered: recorded, ids kept
	idB := fieldID(t, tbl, "b")
	_, err = evolveWrite(t, e, "order",
		col{"b", arrow.BinaryTypes.String, []any{"x"}},
		col{"a", arrow.PrimitiveTypes.Int64, []any{1}},
		col{"n", arrow.BinaryTypes.String, []any{"new"}})
	require.NoError(t, err)
	tbl = loadTbl(t, e, "order")
	assert.Equal(t, []string{"b", "a", "n", facade.ColRowIndex, facade.ColRowID, facade.ColCreatedAt}, fieldNames(tbl.Schema()))
	assert.Equal(t, idB, fieldID(t, tbl, "b"))
	assert.Equal(t, true, schemaChange(t, tbl)["reordered"])
	requireNameMapping(t, tbl)

	// unchanged: nothing recorded
	_, err = evolveWrite(t, e, "order",
		col{"b", arrow.BinaryTypes.String, []any{"x"}},
		col{"a", arrow.PrimitiveTypes.Int64, []any{1}},
		col{"n", arrow.BinaryTypes.String, []any{"new"}})
	require.NoError(t, err)
	assert.Nil(t, schemaChange(t, loadTbl(t, e, "order")))
}

func TestDropRecordedOrRefused(t *testing.T) {
	strict := newIcebergEnv(t, func(c *facade.Config) { c.SchemaPolicy.RefuseDrops = true })
	_, err := evolveWrite(t, strict, "drop",
		col{"a", arrow.PrimitiveTypes.Int64, []any{1}},
		col{"b", arrow.BinaryTypes.String, []any{"x"}})
	require.NoError(t, err)
	before := loadTbl(t, strict, "drop")
	dir := filepath.Join(tableDir(t, strict.f, "drop"), "data")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	_, err = evolveWrite(t, strict, "drop", col{"a", arrow.PrimitiveTypes.Int64, []any{2}})
	var sce *facade.SchemaChangeError
	require.ErrorAs(t, err, &sce)
	require.ErrorIs(t, err, facade.ErrSchemaChange)
	assert.Equal(t, []string{"b"}, sce.Dropped)
	after := loadTbl(t, strict, "drop")
	assert.Equal(t, before.CurrentSnapshot().SnapshotID, after.CurrentSnapshot().SnapshotID)
	assert.Equal(t, fieldNames(before.Schema()), fieldNames(after.Schema()))
	entries2, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Equal(t, len(entries), len(entries2), "no new files in data/")

	e := newIcebergEnv(t)
	_, err = evolveWrite(t, e, "drop",
		col{"a", arrow.PrimitiveTypes.Int64, []any{1}},
		col{"b", arrow.BinaryTypes.String, []any{"x"}})
	require.NoError(t, err)
	_, err = evolveWrite(t, e, "drop", col{"a", arrow.PrimitiveTypes.Int64, []any{2}})
	require.NoError(t, err)
	tbl := loadTbl(t, e, "drop")
	assert.Equal(t, []any{"b"}, schemaChange(t, tbl)["dropped"])
	assert.False(t, slices.Contains(fieldNames(tbl.Schema()), "b"))
	requireNameMapping(t, tbl)
}
