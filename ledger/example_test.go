package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/ledger"

	"github.com/lakewrite/lakewrite/facade"
)

// The raw SQL of the control-plane schema, for teams that run their own
// migration tool.
func ExampleMigrations() {
	ms, err := ledger.Migrations()
	if err != nil {
		panic(err)
	}
	fmt.Println(ms[0].Version, ms[0].Name)
	// Output: 1 001_control_plane.sql
}

// One write wrapped in an intent: opened, run, committed with the outcome
// of the write, or aborted if the write fails.
func ExampleLedger_With() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	if _, err := ledger.Migrate(ctx, pool, ""); err != nil {
		panic(err)
	}
	l, err := ledger.New(pool, nil)
	if err != nil {
		panic(err)
	}
	if _, err := l.EnsureDataset(ctx, "orders_daily", "Orders per day", nil); err != nil {
		panic(err)
	}
	out, err := l.With(ctx, ledger.OpenParams{
		DatasetID: "orders_daily", WriterID: "pipeline.output", Sink: "iceberg_native", WriteMode: facade.Replace,
	}, func(ctx context.Context, in *ledger.Intent) (ledger.Outcome, error) {
		// Write the output here, carrying in.ID into the snapshot summary,
		// and report what the commit result says.
		return ledger.Outcome{RowCount: 1000, SnapshotID: 42, CommittedAt: time.Now()}, nil
	})
	if err != nil {
		panic(err)
	}
	ds, err := l.Dataset(ctx, "orders_daily")
	if err != nil {
		panic(err)
	}
	fmt.Println(out.RowCount, ds.RowCount)
	// Output: 1000 1000
}

// A Postgres row-store write: the rows and the ledger commit land in one
// transaction, or neither does.
func ExampleLedger_WithTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	l, err := ledger.New(pool, nil)
	if err != nil {
		panic(err)
	}
	if _, err := l.EnsureDataset(ctx, "orders_by_region", "Orders per region", nil); err != nil {
		panic(err)
	}
	out, err := l.WithTx(ctx, ledger.OpenParams{
		DatasetID: "orders_by_region", WriterID: "pipeline.output", Sink: "pg", WriteMode: facade.Replace,
		IdempotencyKey: "deploy-42", // a retry finds this write with FindByKey
	}, func(ctx context.Context, tx pgx.Tx, in *ledger.Intent) (ledger.Outcome, error) {
		tag, err := tx.Exec(ctx, `INSERT INTO lakewrite.dataset_rows (dataset_id, row_index, data, txn_id)
			SELECT 'orders_by_region', g, jsonb_build_object('n', g), $1 FROM generate_series(1, 10) g`, in.ID)
		if err != nil {
			return ledger.Outcome{}, err
		}
		var now time.Time
		if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
			return ledger.Outcome{}, err
		}
		return ledger.Outcome{RowCount: tag.RowsAffected(), CommittedAt: now}, nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(out.RowCount)

	// The same request again (a retry after a timeout) finds the write.
	txn, found, err := l.FindByKey(ctx, "orders_by_region", "deploy-42")
	if err != nil {
		panic(err)
	}
	fmt.Println(found, txn.Status, txn.RowCount)
	// Output:
	// 10
	// true committed 10
}

// A manual table and a pipeline output of the same id cannot overwrite each
// other once the manual writer claims its dataset.
func ExampleLedger_ClaimDataset() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	l, err := ledger.New(pool, nil)
	if err != nil {
		panic(err)
	}
	if _, err := l.EnsureDataset(ctx, "budget_2027", "Budget 2027 (uploaded)", nil); err != nil {
		panic(err)
	}
	if err := l.ClaimDataset(ctx, "budget_2027", "manual.table"); err != nil {
		panic(err) // ErrNotOwner when another writer owns it
	}
	_, err = l.Open(ctx, ledger.OpenParams{DatasetID: "budget_2027", WriterID: "pipeline.output",
		Sink: "iceberg_native", WriteMode: facade.Replace})
	fmt.Println(errors.Is(err, ledger.ErrNotOwner))
	// Output: true
}
