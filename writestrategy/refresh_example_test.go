package writestrategy_test

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// A GROUP BY over a tracked table declares that each total depends only
// on the rows of its region: after the first runs, a run recomputes only
// the regions its changes touch.
func ExampleTransform_depends() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	d, l := rowStoreDispatcher(ctx, pool)
	if _, err := pool.Exec(ctx, `CREATE TABLE ex_orders (id bigint PRIMARY KEY, region text, amount numeric(10,2));
		CREATE INDEX ON ex_orders (region);
		INSERT INTO ex_orders VALUES (1, 'north', 10), (2, 'south', 5), (3, 'north', 2.5), (4, 'east', 1)`); err != nil {
		panic(err)
	}
	if _, err := writestrategy.RegisterRelation(ctx, pool, nil, "ex_orders", "ex_orders"); err != nil {
		panic(err)
	}
	if err := d.Track(ctx, "ex_orders", "region"); err != nil {
		panic(err)
	}
	if _, err := l.EnsureDataset(ctx, "ex_region_totals", "region totals", nil); err != nil {
		panic(err)
	}
	totals := writestrategy.Request{WriterID: "loader", Strategy: writestrategy.Transform{
		Output: "ex_region_totals", Source: "ex_orders",
		Steps: []writestrategy.Step{{Name: "t", SQL: `SELECT region, sum(amount) AS total FROM source GROUP BY region`}},
		// The totals of a region depend only on the orders of that region.
		// Full above half of the orders changed (this table is tiny).
		Depends: &incremental.Dependency{Key: []string{"region"}, Sources: map[string][]string{"ex_orders": {"region"}}, MaxShare: 0.5},
	}}
	run := func() {
		res, err := d.Write(ctx, totals)
		if err != nil {
			panic(err)
		}
		r := res[0].Refresh
		fmt.Println(r.Mode, "keys:", r.Keys, "rows:", res[0].Rows)
	}
	run() // the first run is full
	run() // nothing changed
	if _, err := pool.Exec(ctx, `UPDATE ex_orders SET region = 'south' WHERE id = 3`); err != nil {
		panic(err)
	}
	run() // north and south recomputed, east kept as it is
	ps, err := d.Verify(ctx, totals)
	if err != nil {
		panic(err)
	}
	fmt.Println(ps[0].OK())
	// Output:
	// full keys: 0 rows: 3
	// incremental keys: 0 rows: 3
	// incremental keys: 2 rows: 3
	// true
}
