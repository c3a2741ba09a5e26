package writestrategy_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/facadetest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// Embedding lakewrite in a pipeline service: the service owns the pool, the
// catalog and the logger; lakewrite composes them per output.
func ExampleDispatcher() {
	ctx := context.Background()
	url := os.Getenv("DATABASE_URL")
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))

	// Control plane: ledger schema, writer flags.
	if _, err := ledger.Migrate(ctx, pool, ""); err != nil {
		panic(err)
	}
	l, err := ledger.New(pool, &ledger.Config{Logger: logger})
	if err != nil {
		panic(err)
	}
	flags, err := sink.NewFlags(pool, nil)
	if err != nil {
		panic(err)
	}
	resolver, err := sink.NewResolver(flags, &sink.ResolverConfig{Logger: logger})
	if err != nil {
		panic(err)
	}

	// Lakehouse: the Iceberg catalog in the same Postgres, on the same
	// pool (snapshots and ledger commit in one transaction), a local
	// warehouse (or S3/R2 with facade.S3Properties, or a REST catalog with
	// facade.OpenRESTCatalog).
	cat, err := facade.NewPostgresCatalog(ctx, pool, facade.PostgresCatalogConfig{Warehouse: "./lakewrite-data"})
	if err != nil {
		panic(err)
	}
	lake, err := facade.New(cat, &facade.Config{Logger: logger})
	if err != nil {
		panic(err)
	}

	d, err := writestrategy.NewDispatcher(pool, &writestrategy.DispatchConfig{
		Ledger: l, Resolver: resolver, Lakehouse: lake, Logger: logger})
	if err != nil {
		panic(err)
	}
	// One call per output: sink resolved by the writer's flags, intent,
	// compute, write, commit.
	res, err := d.Write(ctx, writestrategy.Request{
		WriterID: "pipeline.output",
		Strategy: writestrategy.Transform{Output: "daily_revenue", Source: "orders", Steps: []writestrategy.Step{
			{Name: "revenue", SQL: `SELECT date_trunc('day', ts) AS day, sum(amount) AS revenue FROM source GROUP BY 1 ORDER BY 1`},
		}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res[0].Sink, res[0].Rows, res[0].SnapshotID, res[0].CommittedAt)
}

// A writer composing facade and ledger itself (as the manual-table handler
// does): stage the write under the intent, let CommitStaged ask the
// ledger's expectations before the snapshot becomes visible, then commit
// the intent with the commit result.
func ExampleCommitStaged() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	l, err := ledger.New(pool, &ledger.Config{Expectations: []ledger.Expectation{
		func(ctx context.Context, tx pgx.Tx, c ledger.Commit) error {
			if c.Outcome.RowCount == 0 {
				return errors.New("an empty upload replaces nothing")
			}
			return nil
		},
	}})
	if err != nil {
		panic(err)
	}
	lake := facadetest.New(nil)                  // or a *facade.Facade
	var rows iter.Seq2[arrow.RecordBatch, error] // the upload, batch by batch
	var schema *arrow.Schema

	_, err = l.With(ctx, ledger.OpenParams{DatasetID: "uploads", WriterID: "manual.table", Sink: sink.Iceberg, WriteMode: facade.Replace},
		func(ctx context.Context, in *ledger.Intent) (ledger.Outcome, error) {
			staged, err := lake.Stage(ctx, facade.Target{DatasetID: "uploads", WriterID: "manual.table"},
				facade.WriteRequest{Mode: facade.Replace, Schema: schema, Rows: rows, TxnID: in.ID})
			if err != nil {
				return ledger.Outcome{}, err
			}
			res, err := writestrategy.CommitStaged(ctx, l, in, staged, nil)
			if errors.Is(err, facade.ErrCommitStateUnknown) {
				return ledger.Outcome{}, fmt.Errorf("%w: %w", ledger.ErrOutcomeUnknown, err) // left open for Recover
			}
			if err != nil {
				return ledger.Outcome{}, err // a veto matches ledger.ErrVetoed; nothing is visible
			}
			return ledger.Outcome{RowCount: res.Rows, SnapshotID: res.SnapshotID, CommittedAt: res.CommittedAt}, nil
		})
	if err != nil {
		fmt.Println(err)
	}
}

// A source loader of your own seeding a dataset in the Postgres row store:
// RowStoreInsert stores the rows as the Postgres sink does (every value
// reads back exactly) and returns the columns to declare as the schema, all
// inside the transaction that commits the ledger intent.
func ExampleRowStoreInsert() {
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
	if _, err := l.EnsureDataset(ctx, "rates", "FX rates", nil); err != nil {
		panic(err)
	}
	_, err = l.WithTx(ctx, ledger.OpenParams{DatasetID: "rates", WriterID: "rates.loader", Sink: sink.Postgres, WriteMode: facade.Replace},
		func(ctx context.Context, tx pgx.Tx, in *ledger.Intent) (ledger.Outcome, error) {
			// A replace: delete the current rows first.
			if _, err := tx.Exec(ctx, `DELETE FROM lakewrite.dataset_rows WHERE dataset_id = 'rates'`); err != nil {
				return ledger.Outcome{}, err
			}
			n, cols, err := writestrategy.RowStoreInsert(ctx, tx, nil, "rates", in.ID,
				`SELECT code, rate::float8, meta::json FROM staging_rates WHERE day = $1 ORDER BY code`, "2026-01-02")
			if err != nil {
				return ledger.Outcome{}, err // errors.Is(err, writestrategy.ErrUnsupportedType): cast the column
			}
			var now time.Time
			if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
				return ledger.Outcome{}, err
			}
			return ledger.Outcome{RowCount: n, CommittedAt: now, Schema: cols.JSON()}, nil
		})
	if err != nil {
		panic(err)
	}
}
