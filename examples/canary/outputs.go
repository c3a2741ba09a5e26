package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/writestrategy"

	"github.com/lakewrite/lakewrite/facade"

	"github.com/lakewrite/lakewrite/sink"
)

// The writer whose flags the runbook changes: pipeline outputs.
const writerID = "pipeline.output"

// The demo datasets that init seeds.
const (
	// demoSource is a row-store dataset of orders, seeded by init.
	demoSource = "demo_orders"
	// demoOutput is the pipeline output the runbook flips: a Transform of
	// demoSource.
	demoOutput = "demo_orders_clean"
	// demoStats is an aggregate of demoSource whose avg() has more
	// fractional digits than Iceberg's decimal(38,18): its preflight lists
	// the column, and an Iceberg write rounds it.
	demoStats = "demo_category_stats"
	// demoRows is the number of orders init seeds.
	demoRows = 1000
	// seedWriter is the ledger writer id of init's seed write.
	seedWriter = "canary.seed"
)

// outputs are the pipeline outputs this CLI can deploy and verify, by output
// dataset id. The set is small and explicit on purpose: an operator can only
// re-run what is listed here. Each strategy must be Tier A (its compute does
// not read its own target), so that verify can recompute it in Postgres and
// compare with the Iceberg table.
//
// To canary one of your own outputs, add its strategy here (or build your
// runbook tool on the same calls: sink.Flags, writestrategy.Dispatcher,
// writestrategy.ComputeRows and facade.Lakehouse.Checksum).
func outputs() map[string]writestrategy.WriteStrategy {
	return map[string]writestrategy.WriteStrategy{
		demoOutput: writestrategy.Transform{
			Output: demoOutput,
			Source: demoSource,
			Steps: []writestrategy.Step{{
				Name: "clean",
				SQL: `SELECT id, upper(name) AS name, amount * 2 AS amount2, category, ts
					FROM source WHERE category <> $1`,
			}},
			Args: []any{"c"},
		},
		demoStats: writestrategy.Transform{
			Output: demoStats,
			Source: demoSource,
			Steps: []writestrategy.Step{{
				Name: "stats",
				SQL: `SELECT category, count(*) AS orders, sum(amount) AS total,
					avg((amount >= 1000)::int) AS big_order_share
					FROM source GROUP BY category`,
			}},
		},
	}
}

// outputNames lists the known outputs, sorted.
func outputNames() []string {
	var names []string
	for n := range outputs() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// demoSchema is the declared schema of demoSource.
var demoSchema = writestrategy.Schema{Columns: []writestrategy.Column{
	{Name: "id", Type: "bigint"},
	{Name: "name", Type: "text"},
	{Name: "amount", Type: "numeric(12,2)"},
	{Name: "category", Type: "text"},
	{Name: "ts", Type: "timestamp with time zone"},
}}

// demoRowsSQL produces the seeded orders; its columns match demoSchema.
const demoRowsSQL = `SELECT g::bigint AS id, 'name ' || (g % 7) AS name, (g * 1.25)::numeric(12,2) AS amount,
	(ARRAY['a','b','c'])[1 + g % 3] AS category, timestamptz '2026-01-01 00:00:00+00' + g * interval '1 minute' AS ts
	FROM generate_series(1, $1::int) g`

// seedSource writes the demo orders into the row store as one committed
// ledger write (row store insert and ledger commit in one transaction, as the
// Postgres arm of the dispatcher does). A source that already has contents is
// left alone: init is idempotent. It reports whether it wrote.
func seedSource(ctx context.Context, db ledger.DB, l *ledger.Ledger) (bool, error) {
	ds, err := l.EnsureDataset(ctx, demoSource, "Demo orders (canary source)", nil)
	if err != nil {
		return false, err
	}
	if ds.Sink != "" {
		return false, nil
	}
	in, err := l.Open(ctx, ledger.OpenParams{DatasetID: demoSource, WriterID: seedWriter,
		Sink: sink.Postgres, WriteMode: facade.Replace})
	if err != nil {
		return false, err
	}
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		n, _, err := writestrategy.RowStoreInsert(ctx, tx, &writestrategy.Env{Schema: l.Schema()}, demoSource, in.ID, demoRowsSQL, demoRows)
		if err != nil {
			return fmt.Errorf("seed %s: %w", demoSource, err)
		}
		var now time.Time
		if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
			return err
		}
		return l.CommitTx(ctx, tx, in, ledger.Outcome{RowCount: n, CommittedAt: now, Schema: demoSchema.JSON()})
	})
	if err != nil {
		if aerr := l.Abort(context.WithoutCancel(ctx), in, err); aerr != nil {
			return false, fmt.Errorf("%w (and aborting the seed intent failed: %v)", err, aerr)
		}
		return false, err
	}
	return true, nil
}
