package facadetest_test

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/facadetest"
)

func ExampleWrap() {
	ctx := context.Background()
	mem := facadetest.New(nil)
	defer mem.Close()

	// The first write of "orders" fails after two rows of its stream; the
	// next one lands, but the caller hears "commit state unknown", as if the
	// process had lost the catalog's answer.
	lh := facadetest.Wrap(mem,
		facadetest.Fault{Point: facadetest.MidStream, Dataset: "orders", AfterRows: 2, Times: 1,
			Err: errors.New("producer died")},
		facadetest.Fault{Point: facadetest.AfterCommit, Dataset: "orders", Times: 1,
			Err: errors.New("process died")},
	)

	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	rows := func(n int) iter.Seq2[[]any, error] {
		return func(yield func([]any, error) bool) {
			for i := range n {
				if !yield([]any{i}, nil) {
					return
				}
			}
		}
	}
	write := func(txn string) error {
		_, err := lh.Write(ctx, facade.Target{DatasetID: "orders", WriterID: "pipeline.output"},
			facade.WriteRequest{Mode: facade.Replace, Schema: sc, TxnID: txn, Rows: facade.FromRows(nil, sc, 0, rows(5))})
		return err
	}

	err := write("txn-1")
	fmt.Println("mid-stream:", err)
	_, found, _ := lh.FindTxn(ctx, "orders", "txn-1")
	fmt.Println("txn-1 landed:", found)

	err = write("txn-2")
	fmt.Println("after commit, state unknown:", errors.Is(err, facade.ErrCommitStateUnknown))
	res, found, _ := lh.FindTxn(ctx, "orders", "txn-2")
	fmt.Println("txn-2 landed:", found, res.Rows)

	fmt.Println("third write:", write("txn-3"))
	// Output:
	// mid-stream: producer died
	// txn-1 landed: false
	// after commit, state unknown: true
	// txn-2 landed: true 5
	// third write: <nil>
}
