package writestrategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// Without liveness (the setup for transaction poolers) a dead writer's
// intent is recovered by the next write once it is older than
// RecoverAfter, on either sink, with its flags cached or not, instead of
// the write returning ErrBusy on every retry.
func TestDispatchLivenessOffRecoversOnEveryPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, sk := range []sink.Sink{sink.Postgres, sink.Iceberg} {
		t.Run(string(sk), func(t *testing.T) {
			t.Parallel()
			w := newWorldWith(t, nil, nil, nil, &ledger.Config{Liveness: ledger.LivenessOff, WaitTimeout: 300 * time.Millisecond})
			seedWorld(t, w, 10)
			ensureOutputs(t, w.pool, "r1")
			if sk == sink.Iceberg {
				w.iceberg("r1")
			}
			d, err := writestrategy.NewDispatcher(w.pool, &writestrategy.DispatchConfig{Ledger: w.ledger, Resolver: w.resolver,
				Lakehouse: w.lake, Workspace: "test", RecoverAfter: time.Minute})
			require.NoError(t, err)
			write := func() ([]writestrategy.WriteResult, error) {
				w.resolver.Invalidate() // uncached flags: read with the output's row
				return d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: writestrategy.Transform{Output: "r1", Source: "orders"}})
			}
			_, err = write()
			require.NoError(t, err)

			// A writer that died with its intent open (no liveness: nothing
			// tells it is gone but its age).
			dead, err := w.ledger.Open(ctx, ledger.OpenParams{DatasetID: "r1", WriterID: writer, Sink: sk, WriteMode: facade.Replace})
			require.NoError(t, err)
			dead.Release()
			_, err = write()
			require.ErrorIs(t, err, ledger.ErrBusy, "younger than RecoverAfter: maybe alive")

			_, err = w.pool.Exec(ctx, `UPDATE lakewrite.pipeline_build_transactions SET created_at = created_at - interval '2 minutes' WHERE id = $1`, dead.ID)
			require.NoError(t, err)
			res, err := write()
			require.NoError(t, err)
			require.Equal(t, sk, res[0].Sink)
			require.EqualValues(t, 10, res[0].Rows)
			txn, err := w.ledger.Get(ctx, dead.ID)
			require.NoError(t, err)
			require.Equal(t, ledger.StatusAborted, txn.Status, "the dead writer's intent was reconciled")
			require.Equal(t, map[string]int{"committed/" + sinkName(sk): 2, "aborted/" + sinkName(sk): 1}, intentRows(t, w, "r1"))
		})
	}
}

// sinkName is a sink as the ledger stores it.
func sinkName(s sink.Sink) string {
	if s == sink.Iceberg {
		return "iceberg_native"
	}
	return "pg"
}
