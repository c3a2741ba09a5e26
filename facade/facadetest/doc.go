// Package facadetest is an in-memory implementation of facade.Lakehouse for
// the unit tests of code that writes through the facade: snapshots with
// summaries, txn-id lookup, read-back, checksums, idempotent appends and
// identity stamping identical to the Iceberg backend (it shares the
// facade's own schema planner and identity stamper), plus fault injection:
// fail at input batch N, fail the commit with a clean conflict, or with
// "commit state unknown" (optionally having landed).
//
// Schema evolution follows the same rules and SchemaPolicy (decided by the
// facade's schema planner): promotions, added, dropped and reordered columns,
// appends that add nullable columns or promote types (the rows already
// held are re-read under the new schema), the lakewrite.schema-change and
// lakewrite.row-id-version summary keys, and the same typed refusals. It has
// no field ids: an incompatibly retyped column keeps the write's position.
//
// Maintain (facade.Maintainer) expires the in-memory history by
// Config.Lifecycle's KeepLast, in batches of EveryCommits, and commits
// report MaintenanceDue by the same rule as the Iceberg backend.
//
// It passes the same contract suite as the Iceberg backend. Call Close to
// release the Arrow memory it holds.
package facadetest
