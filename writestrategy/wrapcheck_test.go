package writestrategy_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/facadetest"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// hidingLake is an embedding service's wrapper done wrong: its staged
// writes do not keep facade.TxStaged.
type hidingLake struct{ facade.Lakehouse }

type hidingStaged struct{ facade.Staged }

func (h hidingLake) Stage(ctx context.Context, t facade.Target, req facade.WriteRequest) (facade.Staged, error) {
	st, err := h.Lakehouse.Stage(ctx, t, req)
	if err != nil {
		return nil, err
	}
	return hidingStaged{st}, nil
}

// A wrapper that hides the one-transaction commit is detected and logged
// at Warn once per Dispatcher (the writes still land, in two commits); the
// shipped wrapper (facadetest.Wrap) keeps it and logs nothing.
func TestDispatchWarnsWrapperLosingTxCommit(t *testing.T) {
	t.Parallel()
	w := newPGWorld(t, nil, nil)
	seedWorld(t, w.world, 10)
	ctx := context.Background()
	ensureOutputs(t, w.pool, "wrapped")
	w.iceberg("wrapped")
	for name, c := range map[string]struct {
		lake  facade.Lakehouse
		warns int
	}{
		"hiding":          {hidingLake{w.f}, 1},
		"facadetest.Wrap": {facadetest.Wrap(w.f), 0},
		"bare":            {w.f, 0},
	} {
		var logs syncBuffer
		d, err := writestrategy.NewDispatcher(w.pool, &writestrategy.DispatchConfig{Ledger: w.ledger, Resolver: w.resolver, Lakehouse: c.lake,
			Workspace: "test", Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
		require.NoError(t, err)
		for range 3 {
			res, err := d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: writestrategy.Transform{Output: "wrapped", Source: "orders",
				Steps: []writestrategy.Step{{Name: "f", SQL: `SELECT id FROM source`}}}})
			require.NoError(t, err, name)
			require.NotZero(t, res[0].SnapshotID, name)
		}
		require.Equal(t, c.warns, strings.Count(logs.String(), `msg="lakehouse wrapper hides the one-transaction commit"`), "%s: %s", name, logs.String())
		if c.warns > 0 {
			require.Contains(t, logs.String(), "dataset_id=wrapped staged_type=writestrategy_test.hidingStaged")
		}
	}
}
