package facadefault

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/lakewrite/lakewrite/facade"
)

// abortTimeout bounds the abort of a staged write after a BeforeCommit
// fault, which runs even when the caller's context has ended.
const abortTimeout = 30 * time.Second

// staged wraps a staged write of the wrapped lakehouse.
type staged struct {
	l       *lakehouse
	inner   facade.Staged
	dataset string

	mu   sync.Mutex
	done bool
}

func (s *staged) Info() facade.StageInfo { return s.inner.Info() }

func (s *staged) finished() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

func (s *staged) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
}

// Commit fires BeforeCommit, commits through the wrapped staged write and
// fires AfterCommit.
func (s *staged) Commit(ctx context.Context) (facade.CommitResult, error) {
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
		return facade.CommitResult{}, &facade.CommitError{Dataset: s.dataset, Attempts: 1, Kind: facade.ErrCommitStateUnknown, Err: err}
	}
	return res, nil
}

// Abort fires BeforeAbort and aborts through the wrapped staged write.
func (s *staged) Abort(ctx context.Context) error {
	if s.finished() {
		return facade.ErrAlreadyFinished
	}
	if err := s.l.fire(ctx, BeforeAbort, s.dataset); err != nil {
		return err
	}
	s.finish()
	return s.inner.Abort(ctx)
}
