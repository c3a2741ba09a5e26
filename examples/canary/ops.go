package main

import (
	"context"
	"time"
)

// cmdIntents lists the open intents: age, holder liveness and what the
// next write of the dataset would do with each.
func cmdIntents(ctx context.Context, c *cli, _ string) error {
	st, err := c.env.dispatcher.Intents(ctx)
	if err != nil {
		return err
	}
	if len(st) == 0 {
		c.printf("no open intents\n")
		return nil
	}
	for _, s := range st {
		holder := "unknown (no liveness)"
		switch {
		case s.HolderAlive:
			holder = "alive"
		case s.Liveness:
			holder = "gone"
		}
		c.printf("intent %s dataset %s writer %s sink %s mode %s age %s holder %s next %s (%s)\n",
			s.ID, s.DatasetID, s.WriterID, s.Sink, s.WriteMode, s.Age.Round(time.Second), holder, s.Next, s.Reason)
	}
	return nil
}

// cmdDrop decommissions a dataset: its Iceberg table and files, its flags
// and its ledger rows (writestrategy.Dispatcher.Drop; run it again to
// complete an interrupted drop).
func cmdDrop(ctx context.Context, c *cli, datasetID string) error {
	rep, err := c.env.dispatcher.Drop(ctx, datasetID)
	if err != nil {
		return err
	}
	resumed := ""
	if rep.Resumed {
		resumed = " (completed an interrupted drop)"
	}
	c.printf("dropped %s%s: Iceberg table dropped %t, %d files (%d bytes) deleted; ledger rows and overrides deleted\n",
		datasetID, resumed, rep.Table.Dropped, rep.Table.Files, rep.Table.Bytes)
	return nil
}
