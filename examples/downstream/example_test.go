package downstream_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/examples/downstream"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
)

// In production the Lakehouse is the Iceberg facade (facade.New over a
// catalog); in tests, facadetest.New. The ledger's schema is migrated at
// deploy time (ledger.Migrate).
func Example() {
	ctx := context.Background()
	var (
		pool *pgxpool.Pool    // the pipeline's database
		lake facade.Lakehouse // e.g. facade.New(catalog, cfg)
	)
	l, err := ledger.New(pool, nil)
	if err != nil {
		panic(err)
	}
	p, err := downstream.New(downstream.Config{Lakehouse: lake, Ledger: l})
	if err != nil {
		panic(err)
	}
	res, err := p.Publish(ctx, []downstream.Order{{Customer: "acme", AmountCents: 1250}})
	if err != nil {
		panic(err) // an unknown outcome also matches ledger.ErrOutcomeUnknown: reconcile with l.Recover(ctx, id, age, p.Lookup)
	}
	fmt.Println(res.Rows, res.SnapshotID)
}
