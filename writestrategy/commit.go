package writestrategy

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
)

// CommitStaged makes a staged lakehouse write visible under the ledger
// intent in, in the order that keeps a veto invisible: the ledger's
// expectations are asked with the staged outcome (ledger.Check: row count,
// the write's stamp time, schema), a veto deletes the staged files and is
// returned (matching ledger.ErrVetoed), and only then is the snapshot
// committed. A replayed append (Info().Replay set) is already visible and
// is committed without asking.
//
// It does not commit the intent: the caller does, with the commit result
// (ledger.Commit, or the outcome returned to ledger.With), and maps
// facade.ErrCommitStateUnknown to ledger.ErrOutcomeUnknown. The Dispatcher
// and the manual-table example use it; so can any writer that composes
// facade and ledger itself.
func CommitStaged(ctx context.Context, l *ledger.Ledger, in *ledger.Intent, staged facade.Staged, schema json.RawMessage) (facade.CommitResult, error) {
	if err := checkStaged(ctx, l, in, staged, schema); err != nil {
		return facade.CommitResult{}, errors.Join(err, abortStaged(ctx, staged))
	}
	return staged.Commit(ctx)
}

// checkStaged asks the ledger's expectations about a staged write's
// outcome; a replay is already visible and not asked about.
func checkStaged(ctx context.Context, l *ledger.Ledger, in *ledger.Intent, staged facade.Staged, schema json.RawMessage) error {
	info := staged.Info()
	if info.Replay != nil {
		return nil
	}
	return l.Check(ctx, in, ledger.Outcome{RowCount: info.Rows, CommittedAt: info.CreatedAt, Schema: schema})
}

// abortStaged deletes a staged write's files, also after the caller's
// context ended.
func abortStaged(ctx context.Context, staged facade.Staged) error {
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	return staged.Abort(cctx)
}
