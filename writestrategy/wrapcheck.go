package writestrategy

import (
	"fmt"

	"github.com/lakewrite/lakewrite/facade"
)

// checkTxCommitKept refuses a write whose staged outputs lost the
// one-transaction commit: the facade staged them as facade.TxStaged
// (StageInfo.CommitsInTx: its catalog, facade.NewPostgresCatalog's, commits
// into the ledger's transaction) but a Lakehouse wrapper returned them
// without CommitTx. Committing them would take two steps, snapshot then
// ledger, and a crash between the two would leave the intent open until
// the next write rolls it forward. DispatchConfig.AcceptTwoCommits accepts
// that; a lakehouse that never commits in a transaction (a REST or SQL
// catalog) is not concerned.
func (d *Dispatcher) checkTxCommitKept(staged []facade.Staged) error {
	if d.cfg.AcceptTwoCommits {
		return nil
	}
	for _, st := range staged {
		if _, ok := st.(facade.TxStaged); ok || !st.Info().CommitsInTx {
			continue
		}
		return fmt.Errorf("%w: dataset %q was staged to commit in the ledger's transaction, but the Lakehouse returned it as %T, "+
			"which is not a facade.TxStaged: make the wrapper's Staged implement facade.TxStaged (forward CommitTx) whenever the wrapped one does "+
			"(facadetest.Wrap does), or set DispatchConfig.AcceptTwoCommits to commit the snapshot and the ledger in two steps",
			ErrTxCommitLost, st.Info().DatasetID, st)
	}
	return nil
}
