package facade_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/internal/contract"
	"github.com/lakewrite/lakewrite/internal/vocab"
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
	raw, ok := snap.Summary.Properties[vocab.SummarySchemaChange]
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

// parquetFieldIDs returns, per top-level column name, the Parquet field id
// and physical type a data file stores.
func parquetFieldIDs(t *testing.T, path string) map[string][2]string {
	t.Helper()
	rdr, err := file.OpenParquetFile(strings.TrimPrefix(path, "file://"), false)
	require.NoError(t, err)
	defer rdr.Close()
	sc := rdr.MetaData().Schema
	out := map[string][2]string{}
	for i := range sc.NumColumns() {
		col := sc.Column(i)
		path := col.ColumnPath()
		if len(path) != 1 {
			continue
		}
		out[path[0]] = [2]string{strconv.Itoa(int(sc.ColumnRoot(i).FieldID())), col.PhysicalType().String()}
	}
	return out
}

// TestEvolutionSequenceByFieldID runs the contract's schema evolution
// sequence on Iceberg and checks, after each step, the current schema by
// field id: kept and promoted columns keep their ids, added (and re-added)
// columns get ids never used before, identity ids never move, the name
// mapping is current, the row id version is recorded; the data files
// written before an append's promotion still store the column as int32
// under the same field id, and iceberg-go reads them, by id, as the
// promoted type with the right values; a refused step leaves the
// snapshot, the schema and the files as they were.
func TestEvolutionSequenceByFieldID(t *testing.T) {
	pols := &contract.Policies{}
	e := newIcebergEnv(t, func(c *facade.Config) { c.SchemaPolicyFor = pols.For })
	env := &contract.Env{LH: e.f, Mem: e.mem, Policies: pols}
	defer e.mem.AssertSize(t, 0)
	ctx := context.Background()
	var (
		prev       map[string]iceberg.NestedField
		identity   map[string]int
		everIDs    = map[int]string{}
		prevSnap   int64
		prevSchema int
		prevFiles  []string
		lastColumn int
	)
	contract.RunEvolution(t, env, func(t *testing.T, step contract.EvolutionStep, res *facade.CommitResult) {
		tbl := loadTbl(t, e, contract.EvolutionDataset)
		if res == nil {
			assert.Equal(t, prevSnap, tbl.CurrentSnapshot().SnapshotID, "%s: no snapshot", step.Name)
			assert.Equal(t, prevSchema, tbl.Schema().ID, "%s: schema unchanged", step.Name)
			assert.Equal(t, prevFiles, dataFiles(t, e.warehouse), "%s: no file written", step.Name)
			return
		}
		defer func() {
			prev = map[string]iceberg.NestedField{}
			for _, f := range tbl.Schema().Fields() {
				if !slices.Contains([]string{facade.ColRowIndex, facade.ColRowID, facade.ColCreatedAt}, f.Name) {
					prev[f.Name] = f
				}
			}
			prevSnap, prevSchema, prevFiles = tbl.CurrentSnapshot().SnapshotID, tbl.Schema().ID, dataFiles(t, e.warehouse)
		}()
		requireNameMapping(t, tbl)
		assert.Equal(t, facade.RowIDVersion, tbl.Properties()[facade.PropertyRowIDVersion])
		assert.Equal(t, facade.RowIDVersion, tbl.CurrentSnapshot().Summary.Properties[vocab.SummaryRowIDVersion])
		cur := map[string]iceberg.NestedField{}
		for _, f := range tbl.Schema().Fields() {
			cur[f.Name] = f
		}
		if identity == nil {
			identity = map[string]int{}
			for _, n := range []string{facade.ColRowIndex, facade.ColRowID, facade.ColCreatedAt} {
				identity[n] = cur[n].ID
			}
		}
		for n, id := range identity {
			assert.Equal(t, id, cur[n].ID, "%s: identity column %s keeps its id", step.Name, n)
		}
		gone := append(slices.Clone(step.Want.Dropped), step.Want.Retyped...)
		for n, f := range prev {
			if slices.Contains(gone, n) {
				if g, ok := cur[n]; ok {
					assert.NotEqual(t, f.ID, g.ID, "%s: %s", step.Name, n)
				}
				continue
			}
			assert.Equal(t, f.ID, cur[n].ID, "%s: %s keeps its field id", step.Name, n)
			if slices.Contains(step.Want.Promoted, n) {
				assert.False(t, f.Type.Equals(cur[n].Type), "%s: %s promoted", step.Name, n)
			} else {
				assert.True(t, f.Type.Equals(cur[n].Type), "%s: %s keeps its type", step.Name, n)
			}
		}
		for _, n := range step.Want.Added {
			id := cur[n].ID
			_, used := everIDs[id]
			assert.False(t, used, "%s: %s got a fresh field id %d", step.Name, n, id)
			assert.Greater(t, id, lastColumn, "%s: %s", step.Name, n)
			assert.False(t, cur[n].Required, "%s: %s optional", step.Name, n)
		}
		for _, f := range tbl.Schema().Fields() {
			everIDs[f.ID] = f.Name
		}
		lastColumn = tbl.Metadata().LastColumnID()

		// iceberg-go by field id: every live data file stores each of its
		// columns under the current field id of that name, and the scan
		// maps each file's values to the current columns by id.
		tasks, err := tbl.Scan().PlanFiles(ctx)
		require.NoError(t, err)
		physical := map[string]bool{}
		for _, task := range tasks {
			for n, idType := range parquetFieldIDs(t, task.File.FilePath()) {
				f, ok := cur[n]
				require.True(t, ok, "%s: file column %s is in the schema", step.Name, n)
				assert.Equal(t, strconv.Itoa(f.ID), idType[0], "%s: file column %s by id", step.Name, n)
				if n == "qty" {
					physical[idType[1]] = true
				}
			}
		}
		if step.Name == "append promotes" {
			assert.Equal(t, map[string]bool{"INT32": true, "INT64": true}, physical,
				"the files before the promotion store qty as int32 under the same field id")
		}
		if _, ok := cur["qty"]; !ok {
			return
		}
		at, err := tbl.Scan(table.WithSelectedFields("id", "qty")).ToArrowTable(ctx)
		require.NoError(t, err)
		defer at.Release()
		tr := array.NewTableReader(at, 0)
		defer tr.Release()
		rows := 0
		defer func() {
			assert.Equal(t, tbl.CurrentSnapshot().Summary.Properties["total-records"], strconv.Itoa(rows))
		}()
		for tr.Next() {
			rec := tr.RecordBatch()
			ids, qty := rec.Column(0), rec.Column(1)
			for i := range int(rec.NumRows()) {
				id, err := strconv.Atoi(ids.ValueStr(i))
				require.NoError(t, err)
				assert.Equal(t, strconv.Itoa(id*10), qty.ValueStr(i), "%s: qty of row %d read by id", step.Name, id)
				rows++
			}
		}
	})
}

func setTableProps(t *testing.T, e *icebergEnv, dataset string, set iceberg.Properties, remove ...string) {
	t.Helper()
	txn := loadTbl(t, e, dataset).NewTransaction()
	if len(set) > 0 {
		require.NoError(t, txn.SetProperties(set))
	}
	if len(remove) > 0 {
		require.NoError(t, txn.RemoveProperties(remove))
	}
	_, err := txn.Commit(context.Background())
	require.NoError(t, err)
}

// TestRowIDVersionRecordedAndRefused: tables and snapshots record the row
// id version; a table recording another version is refused for replace
// and append alike before any file is written; a table written before the
// version was recorded gets it on its next write.
func TestRowIDVersionRecordedAndRefused(t *testing.T) {
	e := newIcebergEnv(t)
	res, err := evolveWrite(t, e, "rowidv", col{"a", arrow.PrimitiveTypes.Int64, []any{1, 2}})
	require.NoError(t, err)
	assert.Equal(t, facade.RowIDVersion, res.Summary[vocab.SummaryRowIDVersion])
	assert.Equal(t, "1", loadTbl(t, e, "rowidv").Properties()[facade.PropertyRowIDVersion])

	for _, v := range []string{"2", "0", "x"} {
		setTableProps(t, e, "rowidv", iceberg.Properties{facade.PropertyRowIDVersion: v})
		before := loadTbl(t, e, "rowidv")
		files := dataFiles(t, e.warehouse)
		for _, mode := range []facade.WriteMode{facade.Replace, facade.Append} {
			rec := contract.StepBatch(&contract.Env{Mem: e.mem}, contract.EvolutionStep{Cols: []contract.Col{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}})
			_, err := e.f.Write(context.Background(), facade.Target{DatasetID: "rowidv"},
				facade.WriteRequest{Mode: mode, Schema: rec.Schema(), Rows: contract.Seq([]arrow.RecordBatch{rec})})
			rec.Release()
			require.ErrorIs(t, err, facade.ErrRowIDVersion, "%s over version %s", mode, v)
			assert.Contains(t, err.Error(), `dataset "rowidv" records `+facade.PropertyRowIDVersion+"="+strconv.Quote(v))
		}
		after := loadTbl(t, e, "rowidv")
		assert.Equal(t, before.CurrentSnapshot().SnapshotID, after.CurrentSnapshot().SnapshotID)
		assert.Equal(t, files, dataFiles(t, e.warehouse), "no file written")
	}

	// a table from before the version was recorded: same function, so
	// written, and the version recorded in the same commit
	setTableProps(t, e, "rowidv", nil, facade.PropertyRowIDVersion)
	require.NotContains(t, loadTbl(t, e, "rowidv").Properties(), facade.PropertyRowIDVersion)
	_, err = evolveWrite(t, e, "rowidv", col{"a", arrow.PrimitiveTypes.Int64, []any{3}})
	require.NoError(t, err)
	assert.Equal(t, facade.RowIDVersion, loadTbl(t, e, "rowidv").Properties()[facade.PropertyRowIDVersion])
}

// TestSchemaChangeLogged: a committed schema change is logged at Info with
// the dataset, the schema ids before and after and the change; a write
// that changes nothing logs none.
func TestSchemaChangeLogged(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(&lockedWriter{w: &buf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	e := newIcebergEnv(t, func(c *facade.Config) { c.Logger = logger })
	_, err := evolveWrite(t, e, "logged", col{"a", arrow.PrimitiveTypes.Int32, []any{1}})
	require.NoError(t, err)
	_, err = evolveWrite(t, e, "logged", col{"a", arrow.PrimitiveTypes.Int32, []any{1}})
	require.NoError(t, err)
	_, err = evolveWrite(t, e, "logged", col{"a", arrow.PrimitiveTypes.Int64, []any{1}}, col{"b", arrow.BinaryTypes.String, []any{"x"}})
	require.NoError(t, err)
	tbl := loadTbl(t, e, "logged")
	mu.Lock()
	defer mu.Unlock()
	var logged []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		if m["msg"] == "facade: schema change" {
			logged = append(logged, m)
		}
	}
	require.Len(t, logged, 1, buf.String())
	m := logged[0]
	assert.Equal(t, "INFO", m["level"])
	assert.Equal(t, "logged", m["dataset"])
	assert.Equal(t, "replace", m["mode"])
	assert.EqualValues(t, tbl.Schema().ID, m["to_schema_id"])
	assert.Less(t, m["from_schema_id"], m["to_schema_id"])
	assert.JSONEq(t, `{"added":["b"],"promoted":["a"]}`, m["change"].(string))
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
