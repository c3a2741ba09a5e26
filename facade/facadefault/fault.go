package facadefault

import (
	"context"
	"errors"
	"fmt"
)

// Point is where in a write a fault fires.
type Point string

// The points of a write, in the order a write passes them.
const (
	// BeforeStage fires when Stage (or Write) is called, before anything
	// is written or the rows are read. An error from the action is
	// returned by Stage as is.
	BeforeStage Point = "before_stage"
	// MidStream fires inside the row stream of the write, once
	// Fault.AfterRows rows have been handed to the wrapped lakehouse (a
	// batch that would cross that count is split, so exactly AfterRows rows
	// are handed over). An error from the action is yielded by the stream,
	// as a failing producer would, so Stage fails with it; nil lets the
	// stream go on. A stream of exactly AfterRows rows reaches the point
	// after its last batch, before it ends; a shorter one never does.
	MidStream Point = "mid_stream"
	// BeforeCommit fires when Staged.Commit is called, before the wrapped
	// commit. An error from the action is returned as is, after the staged
	// write was aborted (its files deleted), as a real commit that never
	// reached the catalog does; a later Commit or Abort returns
	// facade.ErrAlreadyFinished.
	BeforeCommit Point = "before_commit"
	// AfterCommit fires after the wrapped commit succeeded, before Commit
	// returns: the snapshot is visible, but the caller has not heard of it
	// yet (for a ledger caller: after the Iceberg commit, before the ledger
	// commit). Because the commit did land, an error from the action is
	// returned as a *facade.CommitError whose Kind is
	// facade.ErrCommitStateUnknown, wrapping the action's error: a caller
	// that follows the facade's contract reconciles it (FindTxn) instead of
	// aborting. A nil error returns the commit result.
	//
	// On a staged write that commits into a caller's transaction
	// (facade.TxStaged.CommitTx) the point fires after the pointer swap
	// inside that transaction, before the caller commits it: nothing is
	// visible yet, so an error from the action is returned as is, after
	// the staged files were deleted, and the caller rolls back.
	AfterCommit Point = "after_commit"
	// BeforeAbort fires when Staged.Abort is called, before the wrapped
	// abort. An error from the action is returned as is and the staged
	// write is left as it was (its files stay, as after a failed cleanup);
	// Abort may be called again.
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

// Fault arms one failure. The zero Action fails with ErrInjected.
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
	// Action is what happens when the fault fires.
	Action Action
}

// ErrInjected is the error of Fail(nil) and of the zero Action.
var ErrInjected = errors.New("facadefault: injected fault")

type actionKind int

const (
	actFail actionKind = iota
	actBlock
	actCall
	actPanic
)

// Action is what a fault does when it fires. Build one with Fail, Block,
// Call or Panic.
type Action struct {
	kind actionKind
	err  error
	fn   func(ctx context.Context) error
	v    any
}

// Fail makes the call fail with err (ErrInjected when err is nil). At
// AfterCommit the error is wrapped in a *facade.CommitError of kind
// facade.ErrCommitStateUnknown, because the commit did land.
func Fail(err error) Action {
	if err == nil {
		err = ErrInjected
	}
	return Action{kind: actFail, err: err}
}

// Block makes the call wait until its context is done and then fail with
// the context's cause: "stop here", for a test that cancels the call, or
// kills the process, while it waits. The context is the one passed to
// Stage (for BeforeStage and MidStream), Commit or Abort.
func Block() Action { return Action{kind: actBlock} }

// Call runs fn with the call's context when the fault fires. A non-nil
// error fails the call as Fail would; nil lets the call go on unchanged.
// fn may signal another process and block, or end the process.
func Call(fn func(ctx context.Context) error) Action {
	if fn == nil {
		panic("facadefault: Call(nil)")
	}
	return Action{kind: actCall, fn: fn}
}

// Panic makes the call panic with v. At MidStream the panic surfaces from
// wherever the wrapped lakehouse reads the stream (for *facade.Facade and
// facadetest.Lakehouse: from Stage, in the caller's goroutine).
func Panic(v any) Action { return Action{kind: actPanic, v: v} }

// run performs the action.
func (a Action) run(ctx context.Context) error {
	switch a.kind {
	case actBlock:
		<-ctx.Done()
		return context.Cause(ctx)
	case actCall:
		return a.fn(ctx)
	case actPanic:
		panic(a.v)
	default:
		if a.err == nil {
			return ErrInjected
		}
		return a.err
	}
}

func (f Fault) validate() error {
	switch {
	case !f.Point.valid():
		return fmt.Errorf("facadefault: fault has unknown point %q (want one of %v)", f.Point, points)
	case f.Times < 0:
		return fmt.Errorf("facadefault: fault at %s: Times is %d (want 0 for every time, or n > 0)", f.Point, f.Times)
	case f.AfterRows < 0:
		return fmt.Errorf("facadefault: fault at %s: AfterRows is %d (want >= 0)", f.Point, f.AfterRows)
	}
	return nil
}
