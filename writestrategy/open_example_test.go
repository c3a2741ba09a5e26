package writestrategy_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// The common case in one call: ledger, flags, resolver, an Iceberg
// catalog in the same Postgres, a facade and the Dispatcher, all on the
// service's pool. Each piece stays reachable on the returned Stack.
func ExampleOpen() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	warehouse, err := os.MkdirTemp("", "lakewrite-warehouse-") // or s3://bucket/path
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(warehouse)

	lw, err := writestrategy.Open(ctx, pool, &writestrategy.OpenConfig{
		Warehouse: warehouse,
		Migrate:   true, // or ledger.Migrate at deploy time
		Logger:    slog.New(slog.DiscardHandler),
		Dispatch:  &writestrategy.DispatchConfig{Workspace: "analytics"},
	})
	if err != nil {
		panic(err)
	}

	// A source in the row store, an output registered, the writer routed
	// to Iceberg.
	loadRows(ctx, lw.Ledger, "visits", `SELECT g::bigint AS id, 'page_' || (g % 4) AS page FROM generate_series(1, 100) g`)
	if _, err := lw.Ledger.EnsureDataset(ctx, "visits_by_page", "visits per page", nil); err != nil {
		panic(err)
	}
	if err := lw.Flags.SetWriter(ctx, sink.WriterFlags{WriterID: "analytics.daily", Default: sink.Iceberg, Max: sink.Iceberg}); err != nil {
		panic(err)
	}

	res, err := lw.Dispatcher.Write(ctx, writestrategy.Request{
		WriterID: "analytics.daily",
		Strategy: writestrategy.Transform{Output: "visits_by_page", Source: "visits", Steps: []writestrategy.Step{
			{Name: "counts", SQL: `SELECT page, count(*) AS visits FROM source GROUP BY page ORDER BY page`},
		}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res[0].DatasetID, res[0].Sink, res[0].Rows, "rows")

	// Read the table back through the facade.
	for b, err := range lw.Facade.Scan(ctx, "visits_by_page", facade.ScanOptions{Columns: []string{"page", "visits"}}) {
		if err != nil {
			panic(err)
		}
		for i := range int(b.NumRows()) {
			fmt.Println(b.Column(0).ValueStr(i), b.Column(1).ValueStr(i))
		}
	}
	// Output:
	// visits_by_page iceberg_native 4 rows
	// page_0 25
	// page_1 25
	// page_2 25
	// page_3 25
}
