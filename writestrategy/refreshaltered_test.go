package writestrategy_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// An incremental run patches the rows its output's last run committed, so
// an output altered since runs in full, says why, and equals a full
// recompute; the run after it is incremental again. Altered: written by
// another strategy in between (both sinks), its Iceberg table rolled back
// or dropped outside the Dispatcher (the next write creates it empty: a
// patch would leave only the affected keys' rows).
func TestRefreshOutputAltered(t *testing.T) {
	t.Parallel()
	for _, onIceberg := range []bool{false, true} {
		t.Run(fmt.Sprintf("iceberg=%v", onIceberg), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			w := newPGWorld(t, nil, nil)
			trackedFact(t, w.world, 1000, 40)
			ensureOutputs(t, w.pool, "sums", "sums_ref")
			if onIceberg {
				w.iceberg("sums", "sums_ref")
			}
			steps := []writestrategy.Step{{Name: "g", SQL: `SELECT cust, sum(amount) AS total FROM source GROUP BY cust`}}
			c := refreshCase{w: w.world, out: "sums", ref: "sums_ref",
				declared: writestrategy.Transform{Output: "sums", Source: "fact", Steps: steps,
					Depends: &incremental.Dependency{Key: []string{"cust"}, Sources: map[string][]string{"fact": {"cust"}}}},
				plain: writestrategy.Transform{Output: "sums_ref", Source: "fact", Steps: steps}}
			mode := func(want incremental.RefreshMode, reason string) {
				t.Helper()
				w.exec(`UPDATE fact SET amount = amount + 1 WHERE id = 5`)
				r := c.run()
				require.Equal(t, want, r.Mode, r.Reason)
				require.Contains(t, r.Reason, reason)
			}
			mode(incremental.RefreshFull, "no committed earlier run")
			mode(incremental.RefreshIncremental, "")

			// Another strategy writes the output: a third of its groups.
			w.mustWrite(writestrategy.Transform{Output: "sums", Source: "fact", Steps: []writestrategy.Step{{Name: "g",
				SQL: `SELECT cust, sum(amount) AS total FROM source WHERE cust % 3 = 0 GROUP BY cust`}}})
			mode(incremental.RefreshFull, "another write of it since")
			mode(incremental.RefreshIncremental, "")
			if !onIceberg {
				return
			}

			// The table rolled back to the snapshot before its last run
			// (an operator undoing a write with another engine).
			tbl, err := w.f.LoadTable(ctx, "sums")
			require.NoError(t, err)
			txn := tbl.NewTransaction()
			require.NoError(t, txn.RollbackToSnapshot(*tbl.CurrentSnapshot().ParentSnapshotID))
			_, err = txn.Commit(ctx)
			require.NoError(t, err)
			mode(incremental.RefreshFull, "a rollback")
			mode(incremental.RefreshIncremental, "")

			// The table dropped outside the Dispatcher.
			_, err = w.f.DropTable(ctx, "sums")
			require.NoError(t, err)
			mode(incremental.RefreshFull, "its table does not exist")
			mode(incremental.RefreshIncremental, "")
		})
	}
}
