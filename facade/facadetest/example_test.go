package facadetest_test

import (
	"context"
	"fmt"
	"iter"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/facadetest"
)

func Example() {
	ctx := context.Background()
	lh := facadetest.New(nil)
	defer lh.Close()

	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	rows := func(vals ...[]any) iter.Seq2[[]any, error] {
		return func(yield func([]any, error) bool) {
			for _, v := range vals {
				if !yield(v, nil) {
					return
				}
			}
		}
	}
	target := facade.Target{DatasetID: "orders", WriterID: "pipeline.output"}
	res, err := lh.Write(ctx, target, facade.WriteRequest{Mode: facade.Replace, Schema: sc, TxnID: "txn-1",
		Rows: facade.FromRows(nil, sc, 0, rows([]any{1, "a"}, []any{2, "b"}))})
	if err != nil {
		panic(err)
	}
	fmt.Println("replace rows:", res.Rows)

	app := facade.WriteRequest{Mode: facade.Append, Schema: sc, TxnID: "txn-2",
		Rows: facade.FromRows(nil, sc, 0, rows([]any{3, nil}))}
	res, _ = lh.Write(ctx, target, app)
	again, _ := lh.Write(ctx, target, app) // same txn id: not written twice
	fmt.Println("append rows:", res.Rows, "replayed:", again.Replayed, again.SnapshotID == res.SnapshotID)

	found, ok, _ := lh.FindTxn(ctx, "orders", "txn-1")
	fmt.Println("txn-1 found:", ok, found.Rows)

	for b, err := range lh.Scan(ctx, "orders", facade.ScanOptions{Columns: []string{"id", facade.ColRowIndex}}) {
		if err != nil {
			panic(err)
		}
		fmt.Println(b.Column(0), b.Column(1))
	}
	sum, _ := lh.Checksum(ctx, "orders", 0)
	fmt.Println("rows in checksum:", sum.Rows)
	// Output:
	// replace rows: 2
	// append rows: 1 replayed: true true
	// txn-1 found: true 2
	// [1 2] [0 1]
	// [3] [2]
	// rows in checksum: 3
}
