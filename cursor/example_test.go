package cursor_test

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/cursor"
)

// Stream a query as Arrow record batches. It needs a database, so it is
// compiled but not run.
func ExampleBatches() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://localhost/app")
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	s, err := cursor.Batches(ctx, pool,
		`SELECT id, amount, created_at FROM orders WHERE region = $1`, []any{"eu"},
		&cursor.Options{BatchSize: 10_000, MaxRows: 50_000_000, Allocator: memory.DefaultAllocator})
	if err != nil {
		panic(err) // invalid SQL (*cursor.QueryError) or an unsupported column type
	}
	fmt.Println(s.Schema())
	for batch, err := range s.All() {
		if err != nil {
			panic(err) // yielded once, after the connection went back to the pool
		}
		fmt.Println(batch.NumRows())
		batch.Release() // the consumer owns each batch
	}
}

// Stream rows mapped by a pgx row mapper, in the caller's transaction.
func ExampleRows() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, "postgres://localhost/app")
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		panic(err)
	}
	defer tx.Rollback(ctx)

	type order struct {
		ID     int64
		Region string
	}
	for o, err := range cursor.Rows(ctx, tx, `SELECT id, region FROM orders`, nil, pgx.RowToStructByName[order], nil) {
		if err != nil {
			panic(err)
		}
		fmt.Println(o.ID, o.Region)
	}
}
