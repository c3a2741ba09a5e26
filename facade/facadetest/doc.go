// Package facadetest is an in-memory implementation of facade.Lakehouse for
// the unit tests of code that writes through the facade: snapshots with
// summaries, txn-id lookup, read-back, checksums, idempotent appends and
// identity stamping identical to the Iceberg backend (it shares the
// facade's own schema planner and identity stamper), and fault injection
// over any Lakehouse (Wrap).
//
// Schema evolution follows the same rules and SchemaPolicy (decided by the
// facade's schema planner): promotions, added, dropped and reordered columns,
// appends that add nullable columns or promote types (the rows already
// held are re-read under the new schema), the lakewrite.schema-change and
// lakewrite.row-id-version summary keys, and the same typed refusals. It has
// no field ids: an incompatibly retyped column keeps the write's position.
//
// A scoped replace (facade.Scope) keeps the rows outside its keys and
// matches the rows inside them as the Iceberg backend does (identity of
// the rows left in place, new rows continuing __row_index, the whole
// table's checksum, a conflict when the table moved since Stage).
//
// Unchanged tells, as the Iceberg backend does, whether a dataset still
// holds the rows of a snapshot (its head; the double commits no
// compaction).
//
// Maintain (facade.Maintainer) expires the in-memory history by
// Config.Lifecycle's KeepLast, in batches of EveryCommits, and commits
// report MaintenanceDue by the same rule as the Iceberg backend.
//
// It passes the same contract suite as the Iceberg backend. Call Close to
// release the Arrow memory it holds.
//
// # Fault injection
//
// Wrap makes a write through any facade.Lakehouse (the in-memory one, or a
// *facade.Facade on a local warehouse in a crash test) fail or stop at a
// chosen point; hand the wrapper to the code under test and keep the
// wrapped value for assertions:
//
//	lh := facadetest.Wrap(mem, facadetest.Fault{Point: facadetest.AfterCommit})
//
// A write passes BeforeStage (nothing written yet), MidStream (after
// Fault.AfterRows rows of the request's stream reached the wrapped
// lakehouse: a failing producer), BeforeCommit (files staged, nothing
// committed: Err facade.ErrCommitConflict is a clean conflict,
// facade.ErrCommitStateUnknown a lost request), AfterCommit (the snapshot
// landed, the caller has not heard of it: it sees
// facade.ErrCommitStateUnknown, a lost response, and must reconcile rather
// than abort) and, when the caller gives up, BeforeAbort. Each Point's doc
// says what a failure there leaves behind.
//
// A fault fails the call with Fault.Err (ErrInjected when nil), or runs
// Fault.Do: wait (Block) for the test to cancel the call, count or signal
// the hit, panic, or end the process. Fault.Dataset limits a fault to one
// dataset and Fault.Times to its first n matches.
//
// To test a real crash, run the writer in a child process (re-execute the
// test binary with -test.run naming a child test), give it a fault whose
// Do prints a marker line and then blocks, and SIGKILL the child once the
// parent reads the marker: the child dies exactly there, with no deferred
// cleanup, and the parent checks what the next writer makes of it.
//
// The wrapper holds no goroutine. Batches of the request's stream pass
// through borrowed, as the facade's contract says; a batch cut at a
// MidStream row count is handed over as a slice released after its yield,
// and a failed stream stops its source, so its deferred cleanup runs.
package facadetest
