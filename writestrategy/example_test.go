package writestrategy_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/facade"
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

	// Lakehouse: iceberg-go's SQL catalog in the same Postgres, a local
	// warehouse (or S3/R2 with facade.S3Properties, or a REST catalog with
	// facade.OpenRESTCatalog).
	cat, err := facade.OpenSQLCatalog(ctx, facade.SQLCatalogConfig{DatabaseURL: url, Warehouse: "./lakewrite-data"})
	if err != nil {
		panic(err)
	}
	defer cat.Close()
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
