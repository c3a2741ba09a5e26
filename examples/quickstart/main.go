// Command quickstart runs lakewrite's main job end to end on the embedded
// default: a small pipeline whose outputs are written through the write
// dispatch, some to Iceberg behind canary flags and one left on Postgres,
// then checked for parity.
//
//	go run ./examples/quickstart            # a throwaway Postgres, a temp warehouse
//	go run ./examples/quickstart -rows 2000000
//	DATABASE_URL=postgres://... go run ./examples/quickstart -warehouse ./lakewrite-data
//
// Without DATABASE_URL it starts a throwaway PostgreSQL cluster from the
// system binaries (as the postgres user when run as root) and removes it at
// exit, Ctrl-C included. Without -warehouse the Iceberg tables live in a
// temporary directory: the run then owns its tables, dropping any that an
// earlier run left in the catalog at start and purging its own at exit, so
// it can be rerun against the same database.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/internal/embedded"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"

	"github.com/lakewrite/lakewrite/facade"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const writerID = "pipeline.output"

// output is one pipeline output of the demo.
type output struct {
	name     string
	strategy writestrategy.WriteStrategy
	iceberg  bool // canary flag set: written to Iceberg
}

func pipeline() []output {
	return []output{
		{name: "orders_enriched", iceberg: true, strategy: writestrategy.Join{
			Output: "orders_enriched", Left: "orders", Right: "customers", Type: writestrategy.LeftJoin,
			On: []writestrategy.JoinOn{{Left: "customer_id", Right: "id"}},
			Columns: []writestrategy.JoinColumn{
				{Side: "left", Name: "id"}, {Side: "left", Name: "amount"}, {Side: "left", Name: "category"},
				{Side: "left", Name: "ts"}, {Side: "left", Name: "attrs"},
				{Side: "right", Name: "name", As: "customer"}, {Side: "right", Name: "region"},
			}}},
		{name: "daily_revenue", iceberg: true, strategy: writestrategy.Transform{
			Output: "daily_revenue", Source: "orders", Steps: []writestrategy.Step{
				{Name: "days", SQL: `SELECT date_trunc('day', ts) AS day, category, amount FROM source`},
				{Name: "revenue", SQL: `SELECT day, category, count(*) AS orders, sum(amount) AS revenue FROM days GROUP BY day, category ORDER BY day, category`},
			}}},
		{name: "orders_large+orders_small", iceberg: true, strategy: writestrategy.Split{
			Source: "orders", Predicate: "amount >= $1", Args: []any{500}, Matched: "orders_large", Unmatched: "orders_small"}},
		{name: "category_totals", iceberg: false, strategy: writestrategy.Transform{
			Output: "category_totals", Source: "orders", Steps: []writestrategy.Step{
				{Name: "t", SQL: `SELECT category, count(*) AS orders, sum(amount) AS revenue FROM source GROUP BY category ORDER BY category`},
			}}},
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("quickstart", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rows := fs.Int("rows", 300_000, "orders to seed in the source dataset")
	// The default is read after parsing: a flag default is printed by -h,
	// and a URL may hold a password.
	dbURL := fs.String("database-url", "", "Postgres URL (default $DATABASE_URL; neither: start a throwaway local cluster)")
	warehouse := fs.String("warehouse", "", "Iceberg warehouse directory (default: a new directory under the OS temp dir, removed at exit)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dbURL == "" {
		*dbURL = os.Getenv("DATABASE_URL")
	}
	if *rows < 1 {
		fmt.Fprintln(stderr, "quickstart: -rows must be at least 1")
		return 2
	}
	if err := quickstart(ctx, *rows, *dbURL, *warehouse, stdout); err != nil {
		fmt.Fprintf(stderr, "quickstart: FAILED: %v\n", err)
		return 1
	}
	return 0
}

func quickstart(ctx context.Context, rows int, dbURL, warehouse string, out io.Writer) error {
	start := time.Now()
	if dbURL == "" {
		fmt.Fprintln(out, "Starting a throwaway PostgreSQL cluster (set DATABASE_URL to use your own)...")
	}
	env, err := embedded.Start(ctx, embedded.Options{DatabaseURL: dbURL, Warehouse: warehouse})
	if err != nil {
		return err
	}
	defer env.Close()
	fmt.Fprintf(out, "Postgres ready, Iceberg warehouse at %s\n", env.Warehouse)
	outputs := pipeline()
	if warehouse == "" && !env.Started {
		// A temporary warehouse in a database that outlives the run: the
		// tables an earlier run left in the catalog point at a warehouse
		// that is gone. Drop them now, and purge this run's at exit.
		if err := dropTables(ctx, env, outputs, false); err != nil {
			return fmt.Errorf("reset the tables of an earlier run: %w", err)
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if err := dropTables(cctx, env, outputs, true); err != nil {
				fmt.Fprintf(out, "warning: dropping the quickstart tables: %v\n", err)
			}
		}()
	}

	if err := seed(ctx, env, rows, out); err != nil {
		return fmt.Errorf("seed: %w", err)
	}

	// Flags: the writer stays on Postgres by default; raising its max sink
	// makes the flip opt-in per dataset, and the canary overrides flip the
	// Iceberg outputs.
	if err := env.Flags.SetWriter(ctx, sink.WriterFlags{WriterID: writerID, Default: sink.Postgres, Max: sink.Iceberg}); err != nil {
		return err
	}
	for _, o := range outputs {
		for _, id := range o.strategy.Outputs() {
			if _, err := env.Ledger.EnsureDataset(ctx, id, id, nil); err != nil {
				return err
			}
			if o.iceberg {
				if err := env.Flags.SetOverride(ctx, writerID, sink.Iceberg, id); err != nil {
					return err
				}
			}
		}
	}
	env.Resolver.Invalidate()

	// A dispatcher whose observer reports the rows streamed so far and the
	// time of each phase.
	d, err := writestrategy.NewDispatcher(env.Pool, &writestrategy.DispatchConfig{
		Ledger: env.Ledger, Resolver: env.Resolver, Lakehouse: env.Facade, Workspace: "quickstart",
		Observer: progress{out: out}})
	if err != nil {
		return err
	}

	type line struct {
		r       writestrategy.WriteResult
		elapsed time.Duration
		rows    int64 // rows of the whole write (both outputs of a split)
	}
	var lines []line
	for _, o := range outputs {
		fmt.Fprintf(out, "Writing %s ...\n", o.name)
		t0 := time.Now()
		res, err := d.Write(ctx, writestrategy.Request{WriterID: writerID, Strategy: o.strategy,
			Metadata: map[string]string{"pipeline": "quickstart"}})
		if err != nil {
			return fmt.Errorf("write %s: %w", o.name, err)
		}
		elapsed := time.Since(t0)
		var total int64
		for _, r := range res {
			total += r.Rows
		}
		for _, r := range res {
			// A split pair is one write of both outputs: time and rate are the pair's.
			lines = append(lines, line{r, elapsed, total})
		}
	}

	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "output\tsink\trows\tsnapshot id\tcommitted at\ttime\trows/s\t")
	for _, l := range lines {
		snap := "-"
		if l.r.SnapshotID != 0 {
			snap = fmt.Sprint(l.r.SnapshotID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%.0f\t\n", l.r.DatasetID, l.r.Sink, l.r.Rows, snap,
			l.r.CommittedAt.UTC().Format("15:04:05.000"), l.elapsed.Round(time.Millisecond), float64(l.rows)/l.elapsed.Seconds())
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	// Parity: the Postgres compute of each Iceberg output against the table.
	fmt.Fprintln(out)
	for _, o := range outputs {
		if !o.iceberg {
			continue
		}
		if err := verify(ctx, d, o.strategy, out); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "\nAll outputs written and verified in %s.\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// seed writes the source datasets into the row store, wrapped in ledger
// intents like any other write.
func seed(ctx context.Context, env *embedded.Env, rows int, out io.Writer) error {
	customers := max(rows/100, 1)
	sources := []struct {
		id     string
		schema writestrategy.Schema
		sql    string
		n      int
	}{
		{"customers", writestrategy.Schema{Columns: []writestrategy.Column{
			{Name: "id", Type: "bigint"}, {Name: "name", Type: "text"}, {Name: "region", Type: "text"}}},
			`SELECT g::bigint AS id, 'customer ' || g AS name, (ARRAY['north','south','east','west'])[1 + g % 4] AS region
			 FROM generate_series(1, $1::int) g`, customers},
		{"orders", writestrategy.Schema{Columns: []writestrategy.Column{
			{Name: "id", Type: "bigint"}, {Name: "customer_id", Type: "bigint"}, {Name: "amount", Type: "numeric(12,2)"},
			{Name: "category", Type: "text"}, {Name: "ts", Type: "timestamp with time zone"}, {Name: "attrs", Type: "jsonb"}}},
			`SELECT g::bigint AS id, 1 + (g::bigint * 7919) % ` + fmt.Sprint(customers) + ` AS customer_id,
			        round(((g * 2654435761::bigint) % 100000) / 100.0, 2)::numeric(12,2) AS amount,
			        (ARRAY['books','games','garden','music','tools'])[1 + g % 5] AS category,
			        timestamptz '2026-01-01 00:00:00+00' + (g % 525600) * interval '1 minute' AS ts,
			        jsonb_build_object('channel', (ARRAY['web','store','app'])[1 + g % 3], 'coupon', g % 11 = 0) AS attrs
			 FROM generate_series(1, $1::int) g`, rows},
	}
	for _, s := range sources {
		t0 := time.Now()
		if _, err := env.Ledger.EnsureDataset(ctx, s.id, s.id, nil); err != nil {
			return err
		}
		_, err := env.Ledger.WithTx(ctx, ledger.OpenParams{DatasetID: s.id, WriterID: "quickstart.seed", Sink: sink.Postgres, WriteMode: facade.Replace},
			func(ctx context.Context, tx pgx.Tx, in *ledger.Intent) (ledger.Outcome, error) {
				var o ledger.Outcome
				if _, err := tx.Exec(ctx, `DELETE FROM lakewrite.dataset_rows WHERE dataset_id = $1`, s.id); err != nil {
					return o, err
				}
				n, _, err := writestrategy.RowStoreInsert(ctx, tx, nil, s.id, in.ID, s.sql, s.n)
				if err != nil {
					return o, err
				}
				if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&o.CommittedAt); err != nil {
					return o, err
				}
				o.RowCount, o.Schema = n, s.schema.JSON()
				return o, nil
			})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "Seeded %s: %d rows in the Postgres row store (%s)\n", s.id, s.n, time.Since(t0).Round(time.Millisecond))
	}
	return nil
}

// verify compares the Postgres compute of an output with its Iceberg table:
// row count and an order-independent checksum of the business columns.
func verify(ctx context.Context, d *writestrategy.Dispatcher, s writestrategy.WriteStrategy, out io.Writer) error {
	ps, err := d.Verify(ctx, writestrategy.Request{Strategy: s})
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	for _, p := range ps {
		if !p.OK() || p.Sink != sink.Iceberg {
			return fmt.Errorf("parity FAILED for %s: Postgres compute %d rows (checksum %s), %s contents %d rows (checksum %s)",
				p.DatasetID, p.Computed.Rows, p.Computed, p.Sink, p.Stored.Rows, p.Stored)
		}
		fmt.Fprintf(out, "parity OK  %-16s %9d rows  checksum %s\n", p.DatasetID, p.Stored.Rows, p.Stored)
	}
	return nil
}

// dropTables drops the Iceberg tables of the pipeline's outputs from the
// catalog, purging their files when purge is set; a table that does not
// exist is skipped.
func dropTables(ctx context.Context, env *embedded.Env, outputs []output, purge bool) error {
	for _, o := range outputs {
		if !o.iceberg {
			continue
		}
		for _, id := range o.strategy.Outputs() {
			ident, err := env.Facade.TableIdentifier(id)
			if err != nil {
				return err
			}
			if purge {
				err = env.Catalog.(catalog.PurgeableTable).PurgeTable(ctx, ident)
			} else {
				err = env.Catalog.DropTable(ctx, ident)
			}
			if err != nil && !errors.Is(err, catalog.ErrNoSuchTable) && !errors.Is(err, catalog.ErrNoSuchNamespace) {
				return fmt.Errorf("drop %s: %w", id, err)
			}
		}
	}
	return nil
}

// progress is the dispatcher's observer: it prints the rows an output has
// streamed so far (at most once a second) and, after each write, the time
// of its phases. Its state lives in the contexts it returns, so one value
// serves concurrent writes.
type progress struct{ out io.Writer }

type (
	phasesKey struct{}
	streamKey struct{}
)

type streamState struct{ last time.Time }

func (p progress) PhaseStart(ctx context.Context, ev writestrategy.PhaseEvent) context.Context {
	switch ev.Phase {
	case writestrategy.PhaseWrite:
		return context.WithValue(ctx, phasesKey{}, new([]string))
	case writestrategy.PhaseStream:
		return context.WithValue(ctx, streamKey{}, &streamState{last: time.Now()})
	}
	return ctx
}

func (p progress) Progress(ctx context.Context, ev writestrategy.ProgressEvent) {
	st, _ := ctx.Value(streamKey{}).(*streamState)
	if st == nil || time.Since(st.last) < time.Second {
		return
	}
	st.last = time.Now()
	fmt.Fprintf(p.out, "  %s: %d rows so far, %.0f rows/s\n", ev.DatasetID, ev.Rows, float64(ev.Rows)/ev.Elapsed.Seconds())
}

func (p progress) PhaseEnd(ctx context.Context, ev writestrategy.PhaseEvent) {
	phases, _ := ctx.Value(phasesKey{}).(*[]string)
	if phases == nil {
		return
	}
	if ev.Phase != writestrategy.PhaseWrite {
		*phases = append(*phases, fmt.Sprintf("%s %s", ev.Phase, ev.Duration.Round(time.Millisecond)))
		return
	}
	fmt.Fprintf(p.out, "  phases: %s\n", strings.Join(*phases, ", "))
}
