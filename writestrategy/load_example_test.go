package writestrategy_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// rowStoreDispatcher is a dispatcher whose writer "loader" writes to the
// row store (no lakehouse configured).
func rowStoreDispatcher(ctx context.Context, pool *pgxpool.Pool) (*writestrategy.Dispatcher, *ledger.Ledger) {
	l, err := ledger.New(pool, nil)
	if err != nil {
		panic(err)
	}
	flags, err := sink.NewFlags(pool, nil)
	if err != nil {
		panic(err)
	}
	if err := flags.SetWriter(ctx, sink.WriterFlags{WriterID: "loader", Default: sink.Postgres, Max: sink.Postgres}); err != nil {
		panic(err)
	}
	resolver, err := sink.NewResolver(flags, nil)
	if err != nil {
		panic(err)
	}
	d, err := writestrategy.NewDispatcher(pool, &writestrategy.DispatchConfig{Ledger: l, Resolver: resolver})
	if err != nil {
		panic(err)
	}
	return d, l
}

// printRows prints a row-store dataset's rows in order.
func printRows(ctx context.Context, pool *pgxpool.Pool, id string) {
	rows, err := pool.Query(ctx, `SELECT (data - '')::text FROM lakewrite.dataset_rows WHERE dataset_id = $1 ORDER BY row_index`, id)
	if err != nil {
		panic(err)
	}
	texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		panic(err)
	}
	for _, t := range texts {
		fmt.Println(" ", t)
	}
}

// Loading rows into a dataset: a query replaces its contents, Arrow record
// batches are appended. Each load is one ledger intent, routed by the
// writer's flags (here to the row store; an Iceberg route writes one
// snapshot instead).
func ExampleDispatcher_Load() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	d, l := rowStoreDispatcher(ctx, pool)
	if _, err := l.EnsureDataset(ctx, "ex_cities", "cities", nil); err != nil {
		panic(err)
	}

	res, err := d.Load(ctx, writestrategy.LoadRequest{WriterID: "loader", DatasetID: "ex_cities",
		SQL: `SELECT * FROM (VALUES (1::bigint, 'Lisbon'), (2, 'Oslo')) v(id, name) WHERE id <= $1`, Args: []any{2}})
	if err != nil {
		panic(err)
	}
	// The load stamped the columns it wrote as the dataset's declared schema.
	ds, err := l.Dataset(ctx, "ex_cities")
	if err != nil {
		panic(err)
	}
	declared, err := writestrategy.ParseSchema(ds.Schema)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Sink, res.Mode, res.Rows, declared)

	// Arrow batches: the caller owns them (released after the load).
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "name", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{3, 4}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"Quito", "Hanoi"}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	rr, err := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
	if err != nil {
		panic(err)
	}
	defer rr.Release()
	res, err = d.Load(ctx, writestrategy.LoadRequest{WriterID: "loader", DatasetID: "ex_cities", Reader: rr, Mode: facade.Append})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Sink, res.Mode, res.Rows)
	printRows(ctx, pool, "ex_cities")

	// Bad input is refused before anything is written.
	_, err = d.Load(ctx, writestrategy.LoadRequest{WriterID: "loader", DatasetID: "ex_cities"})
	fmt.Println(errors.Is(err, writestrategy.ErrInvalid))
	// Output:
	// pg replace 2 {[{id bigint} {name text}]}
	// pg append 2
	//   {"id": 1, "name": "Lisbon"}
	//   {"id": 2, "name": "Oslo"}
	//   {"id": 3, "name": "Quito"}
	//   {"id": 4, "name": "Hanoi"}
	// true
}

// Using an existing Postgres view as a source, read in place: every write
// reads the view as it is then; the registered dataset itself cannot be
// written.
func ExampleRegisterRelation() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	d, l := rowStoreDispatcher(ctx, pool)
	if _, err := pool.Exec(ctx, `CREATE TABLE ex_sales (region text, amount numeric(10,2));
		INSERT INTO ex_sales VALUES ('north', 10), ('south', 5), ('north', 2.5);
		CREATE VIEW ex_sales_view AS SELECT region, amount FROM ex_sales WHERE amount > 3`); err != nil {
		panic(err)
	}
	schema, err := writestrategy.RegisterRelation(ctx, pool, nil, "ex_sales", "ex_sales_view")
	if err != nil {
		panic(err)
	}
	fmt.Println("declared:", schema)
	if _, err := l.EnsureDataset(ctx, "ex_totals", "totals", nil); err != nil {
		panic(err)
	}
	totals := writestrategy.Request{WriterID: "loader", Strategy: writestrategy.Transform{Output: "ex_totals", Source: "ex_sales",
		Steps: []writestrategy.Step{{Name: "t", SQL: `SELECT region, sum(amount) AS total FROM source GROUP BY region ORDER BY region`}}}}
	if _, err := d.Write(ctx, totals); err != nil {
		panic(err)
	}
	printRows(ctx, pool, "ex_totals")

	// The next write sees the view's new rows.
	if _, err := pool.Exec(ctx, `INSERT INTO ex_sales VALUES ('south', 7)`); err != nil {
		panic(err)
	}
	if _, err := d.Write(ctx, totals); err != nil {
		panic(err)
	}
	printRows(ctx, pool, "ex_totals")

	_, err = d.Load(ctx, writestrategy.LoadRequest{WriterID: "loader", DatasetID: "ex_sales", SQL: `SELECT 'east' AS region, 1.0 AS amount`})
	fmt.Println(errors.Is(err, writestrategy.ErrRelationDataset))
	// Output:
	// declared: {[{region text} {amount numeric(10,2)}]}
	//   {"total": 10.00, "region": "north"}
	//   {"total": 5.00, "region": "south"}
	//   {"total": 10.00, "region": "north"}
	//   {"total": 12.00, "region": "south"}
	// true
}
