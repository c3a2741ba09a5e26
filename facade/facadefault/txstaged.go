package facadefault

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade"
)

// txStaged wraps a staged write that commits into a caller's transaction
// (facade.TxStaged): CommitTx fires BeforeCommit and AfterCommit as Commit
// does. AfterCommit then fires after the pointer swap inside the caller's
// transaction, before the caller commits it: a fault there leaves nothing
// visible once the caller rolls the transaction back.
type txStaged struct {
	*staged
	inner facade.TxStaged
}

func (s *txStaged) CommitTx(ctx context.Context, tx pgx.Tx) (facade.CommitResult, error) {
	if s.finished() {
		return facade.CommitResult{}, facade.ErrAlreadyFinished
	}
	if err := s.l.fire(ctx, BeforeCommit, s.dataset); err != nil {
		s.finish()
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
		defer cancel()
		return facade.CommitResult{}, errors.Join(err, s.inner.Abort(actx))
	}
	s.finish()
	res, err := s.inner.CommitTx(ctx, tx)
	if err != nil {
		return res, err
	}
	if err := s.l.fire(ctx, AfterCommit, s.dataset); err != nil {
		// The swap is inside tx, which the caller must roll back: nothing
		// landed, so the staged files can go.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
		defer cancel()
		return facade.CommitResult{}, errors.Join(err, s.inner.Abort(actx))
	}
	return res, nil
}

// Abort after a CommitTx whose transaction rolled back reaches the wrapped
// staged write (which then deletes its files).
func (s *txStaged) Abort(ctx context.Context) error {
	if s.finished() {
		return s.inner.Abort(ctx)
	}
	return s.staged.Abort(ctx)
}
