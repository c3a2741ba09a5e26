package facade_test

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestSmoke(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cat, err := facade.OpenSQLCatalog(ctx, facade.SQLCatalogConfig{DatabaseURL: pgtest.URL(t), Warehouse: t.TempDir()})
	require.NoError(t, err)
	defer cat.Close()
	f, err := facade.New(cat, &facade.Config{Allocator: mem})
	require.NoError(t, err)
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := array.NewRecordBuilder(mem, sc)
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"a", "b", "a"}, nil)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	rows := func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
	res, err := f.Write(ctx, facade.Target{DatasetID: "ds1", WriterID: "pipeline.output"}, facade.WriteRequest{Mode: facade.Replace, Schema: sc, Rows: rows, TxnID: "t1"})
	require.NoError(t, err)
	t.Logf("%+v", res)
	for rec, err := range f.Scan(ctx, "ds1", facade.ScanOptions{}) {
		require.NoError(t, err)
		t.Logf("%v", rec)
	}
	res2, err := f.Write(ctx, facade.Target{DatasetID: "ds1", WriterID: "pipeline.output"}, facade.WriteRequest{Mode: facade.Append, Schema: sc, Rows: rows, TxnID: "t2"})
	require.NoError(t, err)
	t.Logf("%+v", res2)
	for rec, err := range f.Scan(ctx, "ds1", facade.ScanOptions{}) {
		require.NoError(t, err)
		t.Logf("%v", rec)
	}
	r, found, err := f.FindTxn(ctx, "ds1", "t1")
	require.NoError(t, err)
	t.Logf("%v %+v", found, r)
}
