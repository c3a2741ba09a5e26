// Package lakewrite moves pipeline output writes from a Postgres row store
// into an Apache Iceberg table: a query streamed out of Postgres in bounded
// memory, written as one all-or-nothing Iceberg snapshot, wrapped in a
// write-intent ledger in Postgres, routed per dataset by writer flags with
// canaries, and keeping the watermark that incremental readers depend on.
//
// lakewrite is a library with no runtime of its own: it starts no goroutine
// that outlives a call and keeps no global state. The embedding service owns
// the pools, the catalog and the logger, and composes the packages.
//
// # The flow of one output write
//
//  1. INTENT. [github.com/lakewrite/lakewrite/ledger] opens a write intent for the dataset in a short
//     Postgres transaction: an "open" row in pipeline_build_transactions with
//     a pre-minted transaction id. A unique partial index admits one open
//     intent per dataset, which serializes writers across processes.
//  2. COMPUTE. [github.com/lakewrite/lakewrite/cursor] streams the output SELECT out of Postgres as Arrow
//     record batches, one batch in memory at a time, either directly from the
//     compute transaction or staged through a temporary table.
//  3. WRITE. [github.com/lakewrite/lakewrite/facade] stamps the identity columns (__row_index, __row_id,
//     __created_at) and commits the batches to Iceberg as exactly one
//     snapshot that carries the transaction id in its summary, or returns an
//     error with nothing visible.
//  4. COMMIT. [github.com/lakewrite/lakewrite/ledger] marks the intent committed in a second short
//     transaction, with the row count and commit time taken from the Iceberg
//     commit result, and advances the dataset's watermark to that time.
//
// Any failure before step 4 aborts the intent. A crash between steps 3 and 4
// is reconciled by the ledger's sweeper, which looks for the snapshot
// carrying the transaction id and rolls the intent forward only when it is
// there.
//
// Around the flow, [github.com/lakewrite/lakewrite/sink] decides per writer and dataset whether an output
// goes to Postgres or Iceberg (writer flags with canary overrides), and
// [github.com/lakewrite/lakewrite/incremental] keeps delta readers correct: a source is read as a delta only
// where that is provably its whole change, and delta windows over committed transactions never skip one.
//
// [github.com/lakewrite/lakewrite/writestrategy] defines the outputs (transform, join, split and the deploy
// strategies) with one projection per output, so the Postgres path
// (Apply, the row store) and the lakehouse path (ComputeRows, Arrow) cannot
// disagree, and its Dispatcher is the write dispatch: one call per output
// that runs the four steps above in order, on the sink the flags chose.
//
// # One vocabulary
//
// Each shared concept has one type, spelled in one place, and every package
// uses that same type:
//
//   - where a write goes, and the writer flag values: sink.Sink, with
//     sink.Postgres ("pg") < sink.Iceberg ("iceberg_native"); ledger intents
//     and writestrategy results carry it too. A dataset registered over an
//     existing Postgres relation (writestrategy.RegisterRelation) lives in
//     sink.Relation ("pg_relation"): read in place, never written.
//   - how a write changes its dataset: facade.WriteMode, facade.Replace
//     ("replace") or facade.Append ("append"); the ledger records the same
//     type and adds ledger.Maintenance ("maintenance") for lifecycle work.
//   - how the cursor runs a query: cursor.StreamMode (cursor.Direct,
//     cursor.Staged); how a build reads its sources: incremental.ReadMode.
//   - the Postgres type of an Arrow field: the cursor.MetaPGType metadata
//     key (and cursor.MetaJSON), which the facade reads.
//   - an unregistered dataset id: ledger.ErrDatasetNotFound, whichever
//     package (ledger, sink, writestrategy) reports it.
//     A dataset without an Iceberg table yet is facade.ErrTableNotFound.
//
// The stored text of sinks and write modes (in the control-plane tables and
// the snapshot summaries) never changes.
//
// # Where to start
//
//   - go run ./examples/quickstart: the main job on the embedded default.
//   - writestrategy.Open (ExampleOpen): the common wiring in one call, all
//     on one pool; writestrategy.ExampleDispatcher: the same wiring
//     constructor by constructor, for a service with its own catalog.
//   - facade's Example: Arrow batches written as Iceberg snapshots and read
//     back, without the rest.
//   - writestrategy.Dispatcher.Load (ExampleDispatcher_Load) and
//     writestrategy.RegisterRelation: bringing source rows in, from a
//     query or Arrow batches, or reading a table or view in place.
//   - examples/manualtable: an HTTP upload handler writing natively.
//   - examples/canary: the operator runbook (check, set, deploy, verify, revert).
//   - facade/facadetest and ledger/ledgertest: doubles and assertions for
//     downstream teams' unit tests; examples/downstream shows one.
package lakewrite
