package writestrategy

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/lakewrite/lakewrite/facade"
)

// warnLostTxCommit logs at Warn, once per Dispatcher, a staged write that
// the facade made a facade.TxStaged (StageInfo.CommitsInTx) but that
// reached the dispatcher without CommitTx: a Lakehouse wrapper hid it, and
// the write commits its snapshot and its ledger intent in two steps (a
// crash between them leaves the intent to be rolled forward). Wrap the
// staged write in a type that keeps CommitTx (see facade.TxStaged).
func (d *Dispatcher) warnLostTxCommit(ctx context.Context, staged []facade.Staged) {
	for _, st := range staged {
		if _, ok := st.(facade.TxStaged); ok || !st.Info().CommitsInTx {
			continue
		}
		d.lostTx.Do(func() {
			d.log.LogAttrs(ctx, slog.LevelWarn, "lakehouse wrapper hides the one-transaction commit",
				slog.String("dataset_id", st.Info().DatasetID), slog.String("staged_type", fmt.Sprintf("%T", st)),
				slog.String("effect", "the snapshot and the ledger commit in two steps; a crash between them is rolled forward by the next write"),
				slog.String("fix", "make the wrapper's Staged implement facade.TxStaged (forward CommitTx) when the wrapped one does"))
		})
		return
	}
}
