package facadetest

import (
	"context"
	"errors"
	"fmt"
)

// Point is where in a write a Fault fires.
type Point string

// The points of a write, in the order a write passes them.
const (
	// BeforeStage fires when Stage (or Write) is called, before anything
	// is written or the rows are read. The fault's error is returned by
	// Stage as is.
	BeforeStage Point = "before_stage"
	// MidStream fires inside the row stream of the write, once
	// Fault.AfterRows rows have been handed to the wrapped lakehouse (a
	// batch that would cross that count is split, so exactly AfterRows rows
	// are handed over): AfterRows 0 fails the stream before its first
	// batch. The fault's error is yielded by the stream, as a failing
	// producer would, so Stage fails with it; a Do that returns nil lets
	// the stream go on. A stream of exactly AfterRows rows reaches the
	// point after its last batch, before it ends; a shorter one never does.
	MidStream Point = "mid_stream"
	// BeforeCommit fires when Staged.Commit is called, before the wrapped
	// commit: the commit never reached the catalog. The fault's error is
	// returned as is (Err: facade.ErrCommitConflict is a clean conflict,
	// facade.ErrCommitStateUnknown a lost request), after the staged write
	// was aborted (its files deleted); a later Commit or Abort returns
	// facade.ErrAlreadyFinished.
	BeforeCommit Point = "before_commit"
	// AfterCommit fires after the wrapped commit succeeded, before Commit
	// returns: the snapshot is visible, but the caller has not heard of it
	// yet (a lost response; for a ledger caller: after the Iceberg commit,
	// before the ledger commit). Because the commit did land, the fault's
	// error is returned wrapped with facade.ErrCommitStateUnknown, naming
	// the dataset: a caller that follows the facade's
	// contract reconciles it (FindTxn) instead of aborting. A Do that
	// returns nil lets Commit return its result.
	//
	// On a staged write that commits into a caller's transaction
	// (facade.TxStaged.CommitTx) the point fires after the pointer swap
	// inside that transaction, before the caller commits it: nothing is
	// visible yet, so the fault's error is returned as is, after the staged
	// files were deleted, and the caller rolls back.
	AfterCommit Point = "after_commit"
	// BeforeAbort fires when Staged.Abort is called, before the wrapped
	// abort. The fault's error is returned as is and the staged write is
	// left as it was (its files stay, as after a failed cleanup); Abort may
	// be called again.
	BeforeAbort Point = "before_abort"
)

var points = []Point{BeforeStage, MidStream, BeforeCommit, AfterCommit, BeforeAbort}

func (p Point) valid() bool {
	for _, q := range points {
		if p == q {
			return true
		}
	}
	return false
}

// Fault arms one failure of a write, for Wrap.
type Fault struct {
	// Point is where the fault fires. Required.
	Point Point
	// Dataset restricts the fault to writes of one dataset; "" matches
	// every dataset.
	Dataset string
	// AfterRows is, for MidStream, the number of rows handed to the wrapped
	// lakehouse before the fault fires (0: before the first batch). Ignored
	// at the other points.
	AfterRows int64
	// Times bounds how often the fault fires: 0 every time the point is
	// reached, n the first n times.
	Times int
	// Err is the error the call fails with; nil means ErrInjected.
	Err error
	// Do, when set, runs instead of failing with Err, with the call's
	// context (the one passed to Stage for BeforeStage and MidStream, to
	// Commit or Abort for the others). A non-nil error fails the call as Err
	// would; nil lets the call go on unchanged. Do may count or signal the
	// hit, wait (Block), signal another process and block, panic, or end
	// the process.
	Do func(ctx context.Context) error
}

// ErrInjected is the error of a Fault with neither Err nor Do.
var ErrInjected = errors.New("facadetest: injected fault")

// Block waits until ctx is done and returns its cause. As a Fault's Do it
// stops the write at the fault's point, for a test that cancels the call,
// or kills the process, while it waits.
func Block(ctx context.Context) error {
	<-ctx.Done()
	return context.Cause(ctx)
}

// run performs the fault.
func (f Fault) run(ctx context.Context) error {
	switch {
	case f.Do != nil:
		return f.Do(ctx)
	case f.Err != nil:
		return f.Err
	default:
		return ErrInjected
	}
}

func (f Fault) validate() error {
	switch {
	case !f.Point.valid():
		return fmt.Errorf("facadetest: fault has unknown point %q (want one of %v)", f.Point, points)
	case f.Times < 0:
		return fmt.Errorf("facadetest: fault at %s: Times is %d (want 0 for every time, or n > 0)", f.Point, f.Times)
	case f.AfterRows < 0:
		return fmt.Errorf("facadetest: fault at %s: AfterRows is %d (want >= 0)", f.Point, f.AfterRows)
	}
	return nil
}
