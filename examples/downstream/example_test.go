package downstream_test

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/examples/downstream"
	"github.com/lakewrite/lakewrite/facade/facadetest"
	"github.com/lakewrite/lakewrite/ledger"
)

// In production the Lakehouse is the Iceberg facade (facade.New over a
// catalog); in tests, as here, the in-memory facadetest double. The
// ledger's schema is migrated at deploy time (ledger.Migrate).
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL")) // the pipeline's database
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
	lake := facadetest.New(nil) // e.g. facade.New(catalog, cfg) in production
	defer lake.Close()
	p, err := downstream.New(downstream.Config{Lakehouse: lake, Ledger: l})
	if err != nil {
		panic(err)
	}
	res, err := p.Publish(ctx, []downstream.Order{{Customer: "acme", AmountCents: 1250}, {Customer: "acme", AmountCents: 50}})
	if err != nil {
		panic(err) // an unknown outcome also matches ledger.ErrOutcomeUnknown: reconcile with l.Recover(ctx, id, age, p.Lookup)
	}
	fmt.Println(res.Rows, res.SnapshotID != 0)
	// Output: 1 true
}
