// Package facadefault makes a write through a facade.Lakehouse fail or stop
// at a chosen point, so that a service can test its own crash handling in
// a unit test: what happens when the process dies mid-stream, or after the
// Iceberg commit but before the ledger commit?
//
// Wrap any Lakehouse (a *facade.Facade on a local warehouse, or the
// in-memory facadetest.Lakehouse) with the faults to arm, and hand the
// wrapper to the code under test:
//
//	lh := facadefault.Wrap(real, facadefault.Fault{
//		Point:  facadefault.AfterCommit,
//		Action: facadefault.Fail(errors.New("crash")),
//	})
//
// # Points
//
// A write passes BeforeStage (nothing written yet), MidStream (after
// Fault.AfterRows rows of the request's stream reached the wrapped
// lakehouse), BeforeCommit (files staged, nothing committed), AfterCommit
// (the snapshot landed, the caller has not heard of it) and, when the
// caller gives up, BeforeAbort. Each Point's doc says what an error there
// leaves behind. Faults at AfterCommit always report
// facade.ErrCommitStateUnknown when they fail the call, because the commit
// did land: that is the error a caller sees when the catalog's answer is
// lost, and the one it must reconcile rather than abort.
//
// # Actions
//
// Fail returns an error; Block waits until the call's context is done and
// returns its cause (stop here, and let the test cancel the call or kill
// the process); Call runs any hook (signal a parent process, then block;
// or exit, or count how often the point fired); Panic panics.
// Fault.Dataset limits a fault to one dataset and Fault.Times to its first
// n matches.
//
// # Crash tests
//
// To test a real crash, run the writer in a child process (re-execute the
// test binary with -test.run naming a child test), arm a Call at the point
// that prints a marker line and then blocks, and SIGKILL the child once
// the parent reads the marker: the child dies exactly there, with no
// deferred cleanup, and the parent checks what the next writer makes of
// it.
//
// # Resources
//
// The wrapper holds no goroutine. Batches of the request's stream pass
// through borrowed, as the facade's contract says; a batch cut at a
// MidStream row count is handed over as a slice released after its yield,
// and a failed stream stops its source, so its deferred cleanup runs.
package facadefault
