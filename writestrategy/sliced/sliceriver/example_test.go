package sliceriver_test

import (
	"context"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
	"github.com/lakewrite/lakewrite/writestrategy/sliced/sliceriver"
)

// Example wires both sides on one database: worker processes run a River
// client with the slice Worker; the process that writes gives its
// Dispatcher a Coordinator, and a write with Request.Slices > 1 then has
// its slices written by the workers, committed once, with the ledger.
// (Both sides are in one function here; in production they are separate
// programs sharing the database and the warehouse.)
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := sliceriver.Migrate(ctx, pool, ""); err != nil {
		log.Fatal(err)
	}
	cat, err := facade.NewPostgresCatalog(ctx, pool, facade.CatalogConfig{Warehouse: "s3://bucket/warehouse"})
	if err != nil {
		log.Fatal(err)
	}
	lake, err := facade.New(cat, nil) // the same configuration in every process
	if err != nil {
		log.Fatal(err)
	}

	// A worker process.
	wk, err := sliceriver.NewWorker(sliceriver.WorkerConfig{Lake: lake, DB: pool, Timeout: 10 * time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, wk)
	workerClient, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		Workers:              workers,
		JobTimeout:           10 * time.Minute,
		RescueStuckJobsAfter: 15 * time.Minute,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := workerClient.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer func() { _ = workerClient.Stop(ctx) }()

	// The writing process: an insert-only client is enough.
	inserter, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		log.Fatal(err)
	}
	coord, err := sliceriver.NewCoordinator(sliceriver.CoordinatorConfig{Client: inserter, DB: pool})
	if err != nil {
		log.Fatal(err)
	}
	l, err := ledger.New(pool, nil)
	if err != nil {
		log.Fatal(err)
	}
	flags, err := sink.NewFlags(pool, nil)
	if err != nil {
		log.Fatal(err)
	}
	res, err := sink.NewResolver(flags, nil)
	if err != nil {
		log.Fatal(err)
	}
	d, err := writestrategy.NewDispatcher(pool, &writestrategy.DispatchConfig{Ledger: l, Resolver: res, Lakehouse: lake,
		StageSlices: coord.Stage, SliceDeadline: time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	out, err := d.Write(ctx, writestrategy.Request{WriterID: "pipeline.output", Slices: 8,
		Strategy: writestrategy.Transform{Output: "orders_clean", Source: "orders", Steps: []writestrategy.Step{{Name: "clean",
			SQL: `SELECT id, lower(email) AS email, amount FROM source WHERE amount > 0`}}}})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("%d rows in %d slices", out[0].Rows, out[0].Slices)
}
