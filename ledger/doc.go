// Package ledger is lakewrite's write-intent ledger and control-plane schema.
//
// Every output write is wrapped in an intent, a row of
// pipeline_build_transactions that goes open -> committed or open ->
// aborted:
//
//	in, err := l.Open(ctx, ledger.OpenParams{DatasetID: "orders", WriterID: "pipeline.output",
//		Sink: "iceberg_native", WriteMode: ledger.ModeReplace})
//	// ... compute and write, carrying in.ID into the Iceberg snapshot summary ...
//	err = l.Commit(ctx, in, ledger.Outcome{RowCount: res.Rows, SnapshotID: res.SnapshotID, CommittedAt: res.CommittedAt})
//
// or, in one call, With (the ledger's pgx.BeginFunc). Open and Commit are
// each a short transaction of their own: the intent is visible to every
// process before the write starts, and no transaction or transaction-scoped
// lock spans the long write.
//
// # Serialization
//
// A unique partial index admits one open intent per dataset. A second Open
// for a busy dataset retries with jittered exponential backoff (each attempt
// bounded by lock_timeout) until the first intent ends, and returns a
// *BusyError once Config.WaitTimeout or the context runs out. Datasets never
// wait on each other.
//
// # Owners
//
// A dataset may have an owner writer (ClaimDataset; SetDatasetOwner for an
// operator): Open then refuses any other writer with an *OwnerError
// (ErrNotOwner) and leaves no intent. Unclaimed datasets accept every
// writer. The manual-table example claims the datasets it declares, so a
// pipeline output of the same id cannot overwrite an uploaded table, nor
// the other way round.
//
// # Commit
//
// Commit is conditional on the intent being open with the attempt it was
// opened with. It stamps the row count from the write's commit result (never
// a recount), committed_at = the commit time passed in (the Iceberg
// snapshot's timestamp, not now()), and the dataset's source watermark,
// row count, status and schema, after Config.Expectations had their chance
// to veto. CommitTx does the same inside the caller's transaction. Check
// asks the expectations without committing anything, for writers that make
// data visible elsewhere first (the Iceberg arm asks before its snapshot
// commit, so a veto leaves the table as it was).
//
// # Crash recovery
//
// A process that dies between the Iceberg commit and the ledger commit
// leaves its intent open. Sweep (all datasets) and Recover (one dataset,
// before a new Open) reconcile such intents through a Lookup the caller
// supplies (for Iceberg: "is there a snapshot carrying this transaction id
// in the table's history?"): landed -> committed with the found outcome,
// provably absent -> aborted, cannot tell -> left open and reported. A
// sweeper first claims an intent by bumping its attempt, so the original
// writer, should it still be alive, can no longer commit or abort it.
//
// # Schema
//
// Migrate applies the embedded, numbered migrations under an advisory lock;
// it is idempotent and safe to run from several processes at once. The
// schema name is configurable (default "lakewrite"). Migrations returns the
// raw SQL for teams that run their own migration tool.
//
// Errors are typed and match sentinels with errors.Is: ErrBusy,
// ErrDatasetNotFound, ErrIntentNotFound, ErrNotOpen, ErrFenced, ErrVetoed,
// ErrNotOwner, ErrInvalid, ErrIDInUse.
package ledger
