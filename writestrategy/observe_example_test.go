package writestrategy_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// phasePrinter is an Observer printing each phase as it ends. A tracing
// observer would start a span in PhaseStart and return its context, and
// end it in PhaseEnd; a metrics one would record ev.Duration by ev.Phase.
type phasePrinter struct{}

func (phasePrinter) PhaseStart(ctx context.Context, ev writestrategy.PhaseEvent) context.Context {
	return ctx
}

func (phasePrinter) PhaseEnd(ctx context.Context, ev writestrategy.PhaseEvent) {
	fmt.Printf("%-14s %-11s rows=%d err=%v\n", ev.Phase, strings.Join(ev.DatasetIDs, ","), ev.Rows, ev.Err)
}

// Progress makes the Dispatcher report each batch streamed.
func (phasePrinter) Progress(ctx context.Context, ev writestrategy.ProgressEvent) {
	if ev.Rows%1000 == 0 {
		fmt.Printf("  %s: %d rows so far\n", ev.DatasetID, ev.Rows)
	}
}

// Observing a write: the phases of an Iceberg write on the Postgres
// catalog, with the rows streamed so far, then a parity check of the
// output against a fresh compute.
func ExampleObserver() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	warehouse, err := os.MkdirTemp("", "lakewrite-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(warehouse)

	l, err := ledger.New(pool, nil)
	if err != nil {
		panic(err)
	}
	flags, err := sink.NewFlags(pool, nil)
	if err != nil {
		panic(err)
	}
	resolver, err := sink.NewResolver(flags, nil)
	if err != nil {
		panic(err)
	}
	cat, err := facade.NewPostgresCatalog(ctx, pool, facade.CatalogConfig{Warehouse: warehouse})
	if err != nil {
		panic(err)
	}
	lake, err := facade.New(cat, nil)
	if err != nil {
		panic(err)
	}
	d, err := writestrategy.NewDispatcher(pool, &writestrategy.DispatchConfig{
		Ledger: l, Resolver: resolver, Lakehouse: lake, Cursor: &cursor.Options{BatchSize: 1000}, Observer: phasePrinter{}})
	if err != nil {
		panic(err)
	}

	// A source of 3000 rows in the row store, and an output on Iceberg.
	for _, id := range []string{"obs_events", "obs_copy"} {
		if _, err := l.EnsureDataset(ctx, id, id, nil); err != nil {
			panic(err)
		}
	}
	_, err = l.WithTx(ctx, ledger.OpenParams{DatasetID: "obs_events", WriterID: "loader", Sink: sink.Postgres, WriteMode: facade.Replace},
		func(ctx context.Context, tx pgx.Tx, in *ledger.Intent) (ledger.Outcome, error) {
			n, cols, err := writestrategy.RowStoreInsert(ctx, tx, nil, "obs_events", in.ID,
				`SELECT g::bigint AS id, g % 7 AS kind FROM generate_series(1, 3000) g`)
			return ledger.Outcome{RowCount: n, CommittedAt: time.Now(), Schema: cols.JSON()}, err
		})
	if err != nil {
		panic(err)
	}
	if err := flags.SetWriter(ctx, sink.WriterFlags{WriterID: "example.writer", Default: sink.Iceberg, Max: sink.Iceberg}); err != nil {
		panic(err)
	}

	req := writestrategy.Request{WriterID: "example.writer", Strategy: writestrategy.Transform{Output: "obs_copy", Source: "obs_events"}}
	if _, err := d.Write(ctx, req); err != nil {
		panic(err)
	}
	ps, err := d.Verify(ctx, req)
	if err != nil {
		panic(err)
	}
	fmt.Println("parity:", ps[0].DatasetID, ps[0].Sink, ps[0].Stored.Rows, ps[0].OK())
	// Output:
	// resolve        obs_copy    rows=0 err=<nil>
	// open           obs_copy    rows=0 err=<nil>
	// compute        obs_copy    rows=0 err=<nil>
	//   obs_copy: 1000 rows so far
	//   obs_copy: 2000 rows so far
	//   obs_copy: 3000 rows so far
	// stream         obs_copy    rows=3000 err=<nil>
	// catalog_commit obs_copy    rows=3000 err=<nil>
	// ledger_commit  obs_copy    rows=3000 err=<nil>
	// write          obs_copy    rows=3000 err=<nil>
	// parity: obs_copy iceberg_native 3000 true
}
