// Package downstream is an example of a team's own pipeline code built on
// lakewrite, and of how the team unit-tests it without Iceberg
// infrastructure.
//
// The pipeline, Publisher, aggregates orders into per-customer totals and
// writes them as one replace snapshot through a facade.Lakehouse, wrapped in
// a ledger intent (ledger.With): committed with the commit result, aborted
// when the write failed cleanly, and left open when the commit's outcome is
// unknown, for ledger.Recover with the Publisher's Lookup to reconcile.
//
// Its tests (downstream_test.go) show the test kit:
//
//   - facade/facadetest: the in-memory Lakehouse, fault injection over
//     any Lakehouse (Wrap, with a Fault at a point of the write: mid-stream,
//     before the commit, after it), and assertions on what landed
//     (RequireRows, RequireRowCount, RequireSnapshotCount,
//     RequireTxnLanded, RequireTxnAbsent);
//   - ledger/ledgertest: a migrated schema per test on the team's test
//     database (NewSchema, NewLedger), finding a failed write's intent
//     (LastTxn), and assertions on intents and datasets (RequireCommitted,
//     RequireAborted, RequireOpen, RequireNoOpen, RequireWatermark,
//     RequireRowCount, RequireSink).
//
// The ledger is Postgres, so the tests need a test database: lakewrite's own
// tests get one from internal/pgtest; a team passes its own (its
// DATABASE_URL in CI) and isolates tests with ledgertest.NewSchema.
package downstream
