// Package ledgertest helps the tests of code that records its writes in the
// lakewrite ledger: schema set-up on a test database the team provides, and
// assertions on intents and datasets that fail the test through testing.TB.
//
// lakewrite's ledger is Postgres; the helpers run against a real server, the
// team's own test database (lakewrite's own tests use a throwaway cluster):
//
//	pool := ... // the team's test database, e.g. from its DATABASE_URL
//	l := ledgertest.NewLedger(t, pool, nil) // migrated "lakewrite" schema
//
// For tests that run in parallel on one shared database, give each test its
// own migrated schema, dropped when the test ends:
//
//	l := ledgertest.NewLedger(t, pool, &ledger.Config{Schema: ledgertest.NewSchema(t, pool)})
//
// Then assert what a write left behind:
//
//	txn := ledgertest.LastTxn(t, pool, l, "orders")
//	ledgertest.RequireCommitted(t, l, txn.ID)
//	ledgertest.RequireWatermark(t, l, "orders", res.CommittedAt)
//
// An intent opened through a pool holds one of its connections until
// Commit, Abort or Release (ledger writer liveness), and a pool's Close
// waits for it: a test that leaves an intent open calls its Release.
//
// The helpers are for tests only; production code never imports this
// package. Pair it with package facade/facadetest (the in-memory lakehouse
// and its assertions) to test pipeline code without an Iceberg catalog.
package ledgertest
