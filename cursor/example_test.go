package cursor_test

import (
	"context"
	"fmt"
	"os"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/cursor"
)

// Stream a query as Arrow record batches of at most BatchSize rows.
func ExampleBatches() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	s, err := cursor.Batches(ctx, pool,
		`SELECT g AS id, (g * 1.25)::numeric(12,2) AS amount, $1::text AS region
		   FROM generate_series(1, 25000) g`, []any{"eu"},
		&cursor.Options{BatchSize: 10_000, MaxRows: 50_000_000, Allocator: memory.DefaultAllocator})
	if err != nil {
		panic(err) // invalid SQL (*cursor.QueryError) or an unsupported column type
	}
	for _, f := range s.Schema().Fields() {
		fmt.Println(f.Name, f.Type)
	}
	for batch, err := range s.All() {
		if err != nil {
			panic(err) // yielded once, after the connection went back to the pool
		}
		fmt.Println(batch.NumRows())
		batch.Release() // the consumer owns each batch
	}
	// Output:
	// id int32
	// amount decimal(12, 2)
	// region utf8
	// 10000
	// 10000
	// 5000
}

// Stream rows mapped by a pgx row mapper, in the caller's transaction.
func ExampleRows() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, os.Getenv("DATABASE_URL"))
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
	for o, err := range cursor.Rows(ctx, tx, `SELECT g::int8 AS id, 'eu' AS region FROM generate_series(1, 3) g`, nil, pgx.RowToStructByName[order], nil) {
		if err != nil {
			panic(err)
		}
		fmt.Println(o.ID, o.Region)
	}
	// Output:
	// 1 eu
	// 2 eu
	// 3 eu
}
