// Command model runs a model output end to end on the embedded default: a
// small sentiment model in pure Go (word lists, no network, no weights)
// scores a table of reviews through the write dispatch, one output row per
// sentence of a review, each carrying its review's key in
// __source_row_key. The reviews then change, and the second run calls the
// model for the changed reviews only.
//
//	go run ./examples/model             # a throwaway Postgres, a temp warehouse
//	go run ./examples/model -rows 200000
//	DATABASE_URL=postgres://... go run ./examples/model
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lakewrite/lakewrite/incremental/changelog"
	"github.com/lakewrite/lakewrite/incremental/model"
	"github.com/lakewrite/lakewrite/internal/embedded"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const writerID = "reviews.sentiment"

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("model", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rows := fs.Int("rows", 20_000, "reviews to seed")
	dbURL := fs.String("database-url", "", "Postgres URL (default $DATABASE_URL; neither: start a throwaway local cluster)")
	warehouse := fs.String("warehouse", "", "Iceberg warehouse directory (default: a temporary directory)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dbURL == "" {
		*dbURL = os.Getenv("DATABASE_URL")
	}
	if *rows < 100 {
		fmt.Fprintln(stderr, "model: -rows must be at least 100")
		return 2
	}
	if err := demo(ctx, *rows, *dbURL, *warehouse, stdout); err != nil {
		fmt.Fprintf(stderr, "model: FAILED: %v\n", err)
		return 1
	}
	return 0
}

// sentimentSchema declares the output columns besides __source_row_key.
var sentimentSchema = arrow.NewSchema([]arrow.Field{
	{Name: "sentence", Type: arrow.PrimitiveTypes.Int32},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64},
	{Name: "label", Type: arrow.BinaryTypes.String},
}, nil)

var (
	positive = map[string]float64{"good": 1, "great": 2, "love": 2, "fast": 1, "nice": 1}
	negative = map[string]float64{"bad": 1, "slow": 1, "broken": 2, "hate": 2, "late": 1}
)

// sentiment is the model: for each review (key, body), one row per
// non-empty sentence with its score and label; calls counts the reviews
// it was given.
func sentiment(calls *atomic.Int64) model.Func {
	return func(ctx context.Context, in arrow.RecordBatch) (arrow.RecordBatch, error) {
		calls.Add(in.NumRows())
		keys := in.Column(0).(*array.String)
		bodies := in.Column(1).(*array.String)
		b := array.NewRecordBuilder(memory.DefaultAllocator, model.OutputSchema(sentimentSchema))
		defer b.Release()
		for i := range keys.Len() {
			n := int32(0)
			for _, s := range strings.Split(bodies.Value(i), ".") {
				words := strings.Fields(strings.ToLower(s))
				if len(words) == 0 {
					continue
				}
				var score float64
				for _, w := range words {
					score += positive[w] - negative[w]
				}
				label := "neutral"
				if score > 0 {
					label = "positive"
				} else if score < 0 {
					label = "negative"
				}
				b.Field(0).(*array.StringBuilder).Append(keys.Value(i))
				b.Field(1).(*array.Int32Builder).Append(n)
				b.Field(2).(*array.Float64Builder).Append(score / float64(len(words)))
				b.Field(3).(*array.StringBuilder).Append(label)
				n++
			}
		}
		return b.NewRecordBatch(), ctx.Err()
	}
}

func demo(ctx context.Context, rows int, dbURL, warehouse string, out io.Writer) error {
	env, err := embedded.Start(ctx, embedded.Options{DatabaseURL: dbURL, Warehouse: warehouse})
	if err != nil {
		return err
	}
	defer env.Close()
	// The source: a plain table whose changes the change log records.
	for _, sql := range []string{
		`DROP TABLE IF EXISTS reviews`,
		`CREATE TABLE reviews (id bigint PRIMARY KEY, body text NOT NULL)`,
		`INSERT INTO reviews SELECT g, (ARRAY['Great product. Fast delivery.', 'Broken on arrival. I hate it.', 'It is nice. Late but good.', 'Slow.'])[1 + g % 4]
			FROM generate_series(1, $1::int) g`,
	} {
		if _, err := env.Pool.Exec(ctx, sql, argsFor(sql, rows)...); err != nil {
			return err
		}
	}
	if _, err := writestrategy.RegisterRelation(ctx, env.Pool, nil, "reviews", "reviews"); err != nil {
		return err
	}
	if err := changelog.New("").Track(ctx, env.Pool, "reviews", "reviews", []string{"id", "body"}); err != nil {
		return err
	}
	if _, err := env.Ledger.EnsureDataset(ctx, "review_sentiment", "review_sentiment", nil); err != nil {
		return err
	}
	if err := env.Flags.SetWriter(ctx, sink.WriterFlags{WriterID: writerID, Default: sink.Postgres, Max: sink.Iceberg}); err != nil {
		return err
	}
	env.Resolver.Invalidate()

	var calls atomic.Int64
	m := writestrategy.Model{Output: "review_sentiment", Source: "reviews", Key: []string{"id"}, Columns: []string{"body"},
		Schema: sentimentSchema, Func: sentiment(&calls), Window: 5000, Concurrency: 2}
	write := func(what string) error {
		calls.Store(0)
		res, err := env.Dispatcher.Write(ctx, writestrategy.Request{WriterID: writerID, Strategy: m})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: model called for %d reviews, %d rows written to %s\n", what, calls.Load(), res[0].Rows, res[0].Sink)
		return nil
	}
	if err := write("first run"); err != nil {
		return err
	}
	for _, sql := range []string{
		`UPDATE reviews SET body = 'Love it. Great.' WHERE id % 1000 = 0`,
		`DELETE FROM reviews WHERE id % 1000 = 1`,
	} {
		if _, err := env.Pool.Exec(ctx, sql); err != nil {
			return err
		}
	}
	if err := write("after changes"); err != nil {
		return err
	}
	par, err := env.Dispatcher.Verify(ctx, writestrategy.Request{Strategy: m})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, par[0].String())
	if !par[0].OK() {
		return fmt.Errorf("the incremental output differs from a full re-score")
	}
	return nil
}

func argsFor(sql string, rows int) []any {
	if strings.Contains(sql, "$1") {
		return []any{rows}
	}
	return nil
}
