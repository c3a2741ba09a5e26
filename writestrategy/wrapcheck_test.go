package writestrategy_test

import (
	"context"
	"path/filepath"
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

// intentStatuses counts a dataset's ledger intents by status.
func intentStatuses(t *testing.T, w *world, dataset string) map[string]int {
	t.Helper()
	rows, err := w.pool.Query(context.Background(), `SELECT status, count(*) FROM lakewrite.pipeline_build_transactions WHERE dataset_id = $1 GROUP BY status`, dataset)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		require.NoError(t, rows.Scan(&s, &n))
		out[s] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// A wrapper that hides the one-transaction commit of the Postgres catalog
// is refused at its first write with ErrTxCommitLost, whose message says
// both ways out, and nothing of the write is left: no snapshot, no open
// or committed intent, no data file. With AcceptTwoCommits the same
// wrapper writes (in two commits); the shipped wrapper (facadetest.Wrap)
// and the bare facade need no opt-in, and neither does a wrapper of a
// lakehouse that never commits in a transaction (iceberg-go's SQL catalog).
func TestDispatchRefusesWrapperLosingTxCommit(t *testing.T) {
	t.Parallel()
	w := newPGWorld(t, nil, nil)
	seedWorld(t, w.world, 10)
	ctx := context.Background()
	write := func(w *world, lake facade.Lakehouse, accept bool, out string) ([]writestrategy.WriteResult, error) {
		d, err := writestrategy.NewDispatcher(w.pool, &writestrategy.DispatchConfig{Ledger: w.ledger, Resolver: w.resolver, Lakehouse: lake,
			Workspace: "test", AcceptTwoCommits: accept})
		require.NoError(t, err)
		return d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: writestrategy.Transform{Output: out, Source: "orders",
			Steps: []writestrategy.Step{{Name: "f", SQL: `SELECT id FROM source`}}}})
	}

	ensureOutputs(t, w.pool, "refused")
	w.iceberg("refused")
	for range 2 {
		_, err := write(w.world, hidingLake{w.f}, false, "refused")
		require.ErrorIs(t, err, writestrategy.ErrTxCommitLost)
		for _, says := range []string{`dataset "refused"`, "writestrategy_test.hidingStaged", "implement facade.TxStaged (forward CommitTx)",
			"facadetest.Wrap", "DispatchConfig.AcceptTwoCommits"} {
			require.Contains(t, err.Error(), says)
		}
	}
	require.Zero(t, w.head("refused"))
	require.Equal(t, map[string]int{"aborted": 2}, intentStatuses(t, w.world, "refused"))
	files, err := filepath.Glob(filepath.Join(w.warehouse, "*", "*", "data", "*.parquet"))
	require.NoError(t, err)
	require.Empty(t, files)

	for name, c := range map[string]struct {
		lake   facade.Lakehouse
		accept bool
	}{
		"hiding_accepted": {hidingLake{w.f}, true},
		"facadetest_wrap": {facadetest.Wrap(w.f), false},
		"bare":            {w.f, false},
	} {
		ensureOutputs(t, w.pool, name)
		w.iceberg(name)
		for range 2 {
			res, err := write(w.world, c.lake, c.accept, name)
			require.NoError(t, err, name)
			require.Equal(t, w.head(name), res[0].SnapshotID, name)
		}
		requireAgree(t, w.pool, w.f, name, name)
		require.Equal(t, map[string]int{"committed": 2}, intentStatuses(t, w.world, name), name)
	}

	// A SQL catalog never commits in the ledger's transaction: nothing
	// to lose, no opt-in needed.
	sw := newWorld(t, nil)
	seedWorld(t, sw, 10)
	ensureOutputs(t, sw.pool, "sqlcat")
	sw.iceberg("sqlcat")
	res, err := write(sw, hidingLake{sw.lake}, false, "sqlcat")
	require.NoError(t, err)
	require.NotZero(t, res[0].SnapshotID)
	require.Equal(t, map[string]int{"committed": 1}, intentStatuses(t, sw, "sqlcat"))
}
