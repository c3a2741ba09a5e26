package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// cmdShadow puts a dataset in shadow: Postgres stays the sink of record and
// every write also writes the Iceberg table and records parity.
func cmdShadow(ctx context.Context, c *cli, datasetID string) error {
	e := c.env
	if err := e.flags.SetOverride(ctx, writerID, sink.Shadow, datasetID); err != nil {
		return err
	}
	c.printf("override %s: set to %s for writer %s\n", datasetID, sink.Shadow, writerID)
	d, err := e.flags.Check(ctx, writerID, datasetID)
	if err != nil {
		return err
	}
	printDecision(c, d)
	c.printf("running writers observe the change within their resolver TTL (at most %s); each write then records a shadow run\n", sink.MaxTTL)
	c.printf("next: canary deploy %s, then canary status %s\n", datasetID, datasetID)
	return nil
}

// cmdStatus shows, per dataset (the one given, or every known output): its
// mode, its consecutive matching shadow runs, first and last run, and last
// mismatch.
func cmdStatus(ctx context.Context, c *cli, datasetID string) error {
	ids := outputNames()
	if datasetID != "" {
		ids = []string{datasetID}
	}
	for _, id := range ids {
		if err := printStatus(ctx, c, id); err != nil {
			return err
		}
	}
	return nil
}

func printStatus(ctx context.Context, c *cli, id string) error {
	e := c.env
	ds, err := e.ledger.Dataset(ctx, id)
	if err != nil {
		return err
	}
	d, err := e.flags.Check(ctx, writerID, id)
	if err != nil {
		return err
	}
	mode := string(d.Sink)
	if d.Shadow {
		mode = string(sink.Shadow)
	}
	lives := string(ds.Sink)
	if lives == "" {
		lives = "none yet"
	}
	st, err := e.dispatcher.ShadowStatus(ctx, id)
	if err != nil {
		return err
	}
	c.printf("%s: mode=%s sink_of_record=%s shadow_runs=%d matching=%d failed=%d", id, mode, lives, st.Runs, st.Matching, st.Failed)
	if !st.Since.IsZero() {
		c.printf(" matching_since=%s", stamp(st.Since))
	}
	c.printf("\n")
	if st.First != nil {
		c.printf("  first run: %s\n", runLine(st.First))
		c.printf("  last run:  %s\n", runLine(st.Last))
	}
	if m := st.LastMismatch; m != nil {
		c.printf("  last mismatch: %s", runLine(m))
		if len(m.Columns) > 0 {
			c.printf(" columns=%v", m.Columns)
		}
		if len(m.Examples) > 0 {
			c.printf(" examples=%q", m.Examples)
		}
		if m.Error != "" {
			c.printf(" error=%q", m.Error)
		}
		c.printf("\n")
	} else if st.Runs > 0 {
		c.printf("  last mismatch: none\n")
	}
	return nil
}

func runLine(r *writestrategy.ShadowRun) string {
	return fmt.Sprintf("%s %s txn=%s postgres=%s iceberg=%s rounded=%d", stamp(r.StartedAt), r.Status, r.TxnID, r.Postgres, r.Iceberg, r.Rounded)
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// cmdPromote makes Iceberg the sink of record of a dataset in shadow, in one
// transaction, when its table holds the latest write of record.
func cmdPromote(ctx context.Context, c *cli, datasetID string) error {
	e := c.env
	err := e.dispatcher.Promote(ctx, writerID, datasetID)
	if errors.Is(err, writestrategy.ErrNotPromoted) {
		_ = printStatus(ctx, c, datasetID)
	}
	if err != nil {
		return err
	}
	c.printf("promoted %s: sink of record iceberg_native, override iceberg_native for writer %s\n", datasetID, writerID)
	c.printf("readers read the Iceberg table from now on; running writers follow within their resolver TTL (at most %s)\n", sink.MaxTTL)
	c.printf("revert: canary revert %s (Postgres again within the TTL; its next write rebuilds the row store in full)\n", datasetID)
	return nil
}

// cmdDrain deletes the row-store rows of a promoted dataset: once Iceberg
// is its sink of record they are stale. It holds the dataset (a
// maintenance intent, waiting for a write in flight) and deletes only
// while the ledger says the dataset lives on Iceberg, in one statement. A
// revert after a drain loses nothing: the first Postgres write after it
// rebuilds the row store in full.
func cmdDrain(ctx context.Context, c *cli, datasetID string) error {
	e := c.env
	in, err := e.ledger.Open(ctx, ledger.OpenParams{DatasetID: datasetID, WriterID: writerID, Sink: sink.Iceberg,
		WriteMode: ledger.Maintenance, Lookup: e.dispatcher.Lookup})
	if err != nil {
		return err
	}
	defer func() { _ = e.ledger.Withdraw(context.WithoutCancel(ctx), in) }()
	s := pgx.Identifier{e.ledger.Schema()}.Sanitize()
	tag, err := e.pool.Exec(ctx, `DELETE FROM `+s+`.dataset_rows r WHERE r.dataset_id = $1
		AND EXISTS (SELECT 1 FROM `+s+`.datasets d WHERE d.id = $1 AND d.sink = $2)`, datasetID, string(sink.Iceberg))
	if err != nil {
		return err
	}
	ds, err := e.ledger.Dataset(ctx, datasetID)
	if err != nil {
		return err
	}
	if ds.Sink != sink.Iceberg {
		return fmt.Errorf("dataset %q lives on %q, not on Iceberg: nothing drained (promote it first)", datasetID, ds.Sink)
	}
	c.printf("drained %s: %d stale row-store rows deleted; its sink of record is the Iceberg table\n", datasetID, tag.RowsAffected())
	return nil
}
