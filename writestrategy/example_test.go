package writestrategy_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// Embedding lakewrite in a pipeline service, constructor by constructor:
// the service owns the pool, the catalog and the logger; lakewrite
// composes them per output. (Open does the same wiring in one call.)
func ExampleDispatcher() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	logger := slog.New(slog.DiscardHandler) // the service's logger
	// The table data: a local directory here, or s3://bucket/path with
	// facade.S3Properties in the catalog's Props.
	warehouse, err := os.MkdirTemp("", "lakewrite-warehouse-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(warehouse)

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
	// pool (snapshots and ledger commit in one transaction). A REST
	// catalog (facade.OpenRESTCatalog) or any iceberg-go catalog works
	// with facade.New too.
	cat, err := facade.NewPostgresCatalog(ctx, pool, facade.CatalogConfig{Warehouse: warehouse})
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

	// A source dataset, as an earlier pipeline step leaves it in the row
	// store: 30 orders over 3 days.
	loadRows(ctx, l, "orders", `SELECT g::bigint AS id, (g * 10)::numeric(12,2) AS amount,
		timestamptz '2026-01-01 12:00:00+00' + (g % 3) * interval '1 day' AS ts FROM generate_series(1, 30) g`)
	// Outputs are registered datasets too (once, at deploy), and the
	// operator routes the writer's outputs to Iceberg (the default sink
	// is Postgres).
	if _, err := l.EnsureDataset(ctx, "daily_revenue", "revenue per day", nil); err != nil {
		panic(err)
	}
	if err := flags.SetWriter(ctx, sink.WriterFlags{WriterID: "pipeline.output", Default: sink.Iceberg, Max: sink.Iceberg}); err != nil {
		panic(err)
	}

	// One call per output: sink resolved by the writer's flags, intent,
	// compute, write, commit.
	req := writestrategy.Request{
		WriterID: "pipeline.output",
		Strategy: writestrategy.Transform{Output: "daily_revenue", Source: "orders", Steps: []writestrategy.Step{
			{Name: "revenue", SQL: `SELECT date_trunc('day', ts) AS day, sum(amount) AS revenue FROM source GROUP BY 1 ORDER BY 1`},
		}},
	}
	res, err := d.Write(ctx, req)
	if err != nil {
		panic(err)
	}
	fmt.Println(res[0].DatasetID, res[0].Sink, res[0].Mode, res[0].Rows, "rows")

	// Parity: the stored output against a fresh compute (rows, checksum).
	ps, err := d.Verify(ctx, req)
	if err != nil {
		panic(err)
	}
	fmt.Println("parity:", ps[0].Stored.Rows, "rows, checksums equal:", ps[0].OK())
	// Output:
	// daily_revenue iceberg_native replace 3 rows
	// parity: 3 rows, checksums equal: true
}

// loadRows replaces dataset id in the row store with the rows of
// selectSQL, as a loader does (see ExampleRowStoreInsert).
func loadRows(ctx context.Context, l *ledger.Ledger, id, selectSQL string) {
	if _, err := l.EnsureDataset(ctx, id, id, nil); err != nil {
		panic(err)
	}
	_, err := l.WithTx(ctx, ledger.OpenParams{DatasetID: id, WriterID: "seed", Sink: sink.Postgres, WriteMode: facade.Replace},
		func(ctx context.Context, tx pgx.Tx, in *ledger.Intent) (ledger.Outcome, error) {
			n, cols, err := writestrategy.RowStoreInsert(ctx, tx, nil, id, in.ID, selectSQL)
			return ledger.Outcome{RowCount: n, CommittedAt: time.Now(), Schema: cols.JSON()}, err
		})
	if err != nil {
		panic(err)
	}
}

// A writer composing facade and ledger itself (as the manual-table handler
// does): stage the write under the intent, let CommitStaged ask the
// ledger's expectations before the snapshot becomes visible, then commit
// the intent with the commit result. Here an expectation refuses an empty
// upload: the second upload is vetoed and the table keeps the first.
func ExampleCommitStaged() {
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
	cat, err := facade.NewPostgresCatalog(ctx, pool, facade.CatalogConfig{Warehouse: warehouse})
	if err != nil {
		panic(err)
	}
	lake, err := facade.New(cat, nil) // any facade.Lakehouse, e.g. facadetest.New in unit tests
	if err != nil {
		panic(err)
	}
	if _, err := l.EnsureDataset(ctx, "uploads", "uploaded prices", nil); err != nil {
		panic(err)
	}

	schema := arrow.NewSchema([]arrow.Field{
		{Name: "sku", Type: arrow.BinaryTypes.String},
		{Name: "price", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}},
	}, nil)
	upload := func(rows [][]any) error {
		target := facade.Target{DatasetID: "uploads", WriterID: "manual.table"}
		_, err := l.With(ctx, ledger.OpenParams{DatasetID: "uploads", WriterID: "manual.table", Sink: sink.Iceberg, WriteMode: facade.Replace},
			func(ctx context.Context, in *ledger.Intent) (ledger.Outcome, error) {
				batches := facade.FromRows(memory.DefaultAllocator, schema, 1024, func(yield func([]any, error) bool) {
					for _, r := range rows { // the upload, row by row
						if !yield(r, nil) {
							return
						}
					}
				})
				staged, err := lake.Stage(ctx, target, facade.WriteRequest{Mode: facade.Replace, Schema: schema, Rows: batches, TxnID: in.ID})
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
				// row count, snapshot id, watermark and the declared schema
				// (here the one the table gives), as a Dispatcher write records them
				return writestrategy.CommitOutcome(res, nil), nil
			})
		return err
	}

	err = upload([][]any{{"apple", "1.20"}, {"pear", "0.95"}})
	fmt.Println("first upload:", err)
	err = upload(nil)
	fmt.Println("empty upload vetoed:", errors.Is(err, ledger.ErrVetoed))

	sum, err := lake.Checksum(ctx, "uploads", 0)
	if err != nil {
		panic(err)
	}
	fmt.Println("rows in the table:", sum.Rows)
	// Output:
	// first upload: <nil>
	// empty upload vetoed: true
	// rows in the table: 2
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
	// The loader's own staging table.
	if _, err := pool.Exec(ctx, `CREATE TABLE staging_rates (day date, code text, rate numeric, meta jsonb);
		INSERT INTO staging_rates VALUES ('2026-01-02', 'USD', 1.0842, '{"src": "ecb"}'), ('2026-01-02', 'GBP', 0.8612, '{"src": "ecb"}'),
			('2026-01-02', 'JPY', 170.31, NULL), ('2026-01-03', 'USD', 1.0851, '{"src": "ecb"}')`); err != nil {
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
			fmt.Println(n, "rows")
			for _, c := range cols.Columns {
				fmt.Println(c.Name, c.Type)
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
	// Output:
	// 3 rows
	// code text
	// rate double precision
	// meta json
}
