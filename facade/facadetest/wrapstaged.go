package facadetest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/internal/identity"
)

// abortTimeout bounds the abort of a staged write after a BeforeCommit
// fault, which runs even when the caller's context has ended.
const abortTimeout = 30 * time.Second

// faultStaged wraps a staged write of the wrapped lakehouse.
type faultStaged struct {
	l       *faulty
	inner   facade.Staged
	dataset string

	mu   sync.Mutex
	done bool
}

func (s *faultStaged) Info() facade.StageInfo { return s.inner.Info() }

func (s *faultStaged) finished() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

func (s *faultStaged) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
}

// Commit fires BeforeCommit, commits through the wrapped staged write and
// fires AfterCommit.
func (s *faultStaged) Commit(ctx context.Context) (facade.CommitResult, error) {
	if s.finished() {
		return facade.CommitResult{}, facade.ErrAlreadyFinished
	}
	if err := s.l.fire(ctx, BeforeCommit, s.dataset); err != nil {
		// Nothing reached the catalog: end the staged write as a real commit
		// does in that case, by deleting its files.
		s.finish()
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
		defer cancel()
		if aerr := s.inner.Abort(actx); aerr != nil {
			return facade.CommitResult{}, errors.Join(err, aerr)
		}
		return facade.CommitResult{}, err
	}
	s.finish()
	res, err := s.inner.Commit(ctx)
	if err != nil {
		return res, err
	}
	if err := s.l.fire(ctx, AfterCommit, s.dataset); err != nil {
		return facade.CommitResult{}, identity.CommitError(facade.ErrCommitStateUnknown, s.dataset, 1, err)
	}
	return res, nil
}

// Abort fires BeforeAbort and aborts through the wrapped staged write.
func (s *faultStaged) Abort(ctx context.Context) error {
	if s.finished() {
		return facade.ErrAlreadyFinished
	}
	if err := s.l.fire(ctx, BeforeAbort, s.dataset); err != nil {
		return err
	}
	s.finish()
	return s.inner.Abort(ctx)
}

// faultTxStaged wraps a staged write that commits into a caller's transaction
// (facade.TxStaged): CommitTx fires BeforeCommit and AfterCommit as Commit
// does. AfterCommit then fires after the pointer swap inside the caller's
// transaction, before the caller commits it: a fault there leaves nothing
// visible once the caller rolls the transaction back.
type faultTxStaged struct {
	*faultStaged
	inner facade.TxStaged
}

func (s *faultTxStaged) CommitTx(ctx context.Context, tx pgx.Tx) (facade.CommitResult, error) {
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
func (s *faultTxStaged) Abort(ctx context.Context) error {
	if s.finished() {
		return s.inner.Abort(ctx)
	}
	return s.faultStaged.Abort(ctx)
}
