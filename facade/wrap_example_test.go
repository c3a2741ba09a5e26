package facade_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/facade"
)

// timedLakehouse is an embedding service's wrapper (tracing, metrics) that
// keeps the one-transaction commit: when the wrapped Staged is a
// facade.TxStaged, so is the one it returns.
type timedLakehouse struct {
	facade.Lakehouse
	commits int // a metric: the commits seen
}

type timedStaged struct {
	facade.Staged
	lh *timedLakehouse
}

func (s *timedStaged) Commit(ctx context.Context) (facade.CommitResult, error) {
	defer s.observe(time.Now())
	return s.Staged.Commit(ctx)
}

func (s *timedStaged) observe(time.Time) { s.lh.commits++ } // record the span / histogram here

// timedTxStaged adds CommitTx, forwarding it, for wrapped TxStaged writes.
type timedTxStaged struct {
	*timedStaged
	tx facade.TxStaged
}

func (s *timedTxStaged) CommitTx(ctx context.Context, tx pgx.Tx) (facade.CommitResult, error) {
	defer s.observe(time.Now())
	return s.tx.CommitTx(ctx, tx)
}

func (l *timedLakehouse) Stage(ctx context.Context, t facade.Target, req facade.WriteRequest) (facade.Staged, error) {
	st, err := l.Lakehouse.Stage(ctx, t, req)
	if err != nil {
		return nil, err
	}
	w := &timedStaged{Staged: st, lh: l}
	if tx, ok := st.(facade.TxStaged); ok {
		return &timedTxStaged{timedStaged: w, tx: tx}, nil // keeps the capability
	}
	return w, nil
}

// Wrapping a Lakehouse without losing the one-transaction commit: the
// wrapper's staged writes implement facade.TxStaged whenever the wrapped
// ones do, so package writestrategy still commits each snapshot and its
// ledger intent in one Postgres transaction. (A wrapper that returns only
// a facade.Staged is refused by the Dispatcher with
// writestrategy.ErrTxCommitLost unless DispatchConfig.AcceptTwoCommits is
// set: StageInfo.CommitsInTx says the capability was there.)
func ExampleTxStaged_wrapping() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	warehouse, err := os.MkdirTemp("", "lakewrite-warehouse-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(warehouse)
	cat, err := facade.NewPostgresCatalog(ctx, pool, facade.CatalogConfig{Name: "wrap_example", Warehouse: warehouse})
	if err != nil {
		panic(err)
	}
	f, err := facade.New(cat, nil)
	if err != nil {
		panic(err)
	}
	lake := &timedLakehouse{Lakehouse: f}

	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	st, err := lake.Stage(ctx, facade.Target{DatasetID: "wrapped_cities", WriterID: "example.writer"},
		facade.WriteRequest{Mode: facade.Replace, Schema: schema, Rows: facade.FromRows(nil, schema, 0, rowsOf([]any{1}, []any{2})), TxnID: "txn-w1"})
	if err != nil {
		panic(err)
	}
	txs, ok := st.(facade.TxStaged)
	fmt.Println("keeps TxStaged:", ok, "facade staged it in tx:", st.Info().CommitsInTx)

	// The snapshot becomes visible with the caller's transaction (where
	// the ledger commits too).
	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	res, err := txs.CommitTx(ctx, tx)
	if err != nil {
		panic(err)
	}
	if err := tx.Commit(ctx); err != nil {
		panic(err)
	}
	_, found, err := lake.FindTxn(ctx, "wrapped_cities", "txn-w1")
	if err != nil {
		panic(err)
	}
	fmt.Println("rows:", res.Rows, "landed:", found, "commits observed:", lake.commits)
	// Output:
	// keeps TxStaged: true facade staged it in tx: true
	// rows: 2 landed: true commits observed: 1
}
