package changelog_test

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/incremental/changelog"
	"github.com/lakewrite/lakewrite/ledger"
)

// A run reads what its source changed since its last run, in the
// transaction whose snapshot it recomputes with, and stores where it read
// up to when it commits.
func ExampleLog_Window() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	if _, err := ledger.Migrate(ctx, pool, ""); err != nil {
		panic(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE example_orders (id int PRIMARY KEY, customer text, amount numeric)`); err != nil {
		panic(err)
	}
	log := changelog.New("")
	if err := log.Track(ctx, pool, "orders", "example_orders", []string{"customer"}); err != nil {
		panic(err)
	}

	run := func() {
		err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
			positions, err := log.Positions(ctx, tx, "revenue_by_customer")
			if err != nil {
				return err
			}
			w, err := log.Window(ctx, tx, "orders", changelog.Position(positions["orders"]))
			if err != nil {
				return err
			}
			if !w.Known {
				fmt.Println("full run:", w.Reason)
			} else {
				rows, err := tx.Query(ctx, `SELECT DISTINCT image->>'customer' FROM (`+w.SQL+`) w ORDER BY 1`, w.Args...)
				if err != nil {
					return err
				}
				customers, err := pgx.CollectRows(rows, pgx.RowTo[string])
				if err != nil {
					return err
				}
				fmt.Println("recompute", customers, "from", w.Images, "images")
			}
			// ... recompute, write the output, then in the committing transaction:
			return log.SavePosition(ctx, tx, "revenue_by_customer", "orders", string(w.Position))
		})
		if err != nil {
			panic(err)
		}
	}

	run()
	if _, err := pool.Exec(ctx, `INSERT INTO example_orders VALUES (1, 'ada', 10), (2, 'bob', 5), (3, 'ada', 7)`); err != nil {
		panic(err)
	}
	run()
	if _, err := pool.Exec(ctx, `UPDATE example_orders SET customer = 'cy' WHERE id = 2`); err != nil {
		panic(err)
	}
	run()
	run()
	// Output:
	// full run: no earlier position
	// recompute [ada bob] from 3 images
	// recompute [bob cy] from 2 images
	// recompute [] from 0 images
}
