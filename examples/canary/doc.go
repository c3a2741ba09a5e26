// Command canary is the operator runbook for flipping one pipeline output
// from the Postgres row store to a native Iceberg table, and back:
//
//	canary init                      migrate, register the pipeline.output flags, seed the demo
//	canary check  demo_orders_clean  flags, sink decision and the Iceberg preflight
//	canary shadow demo_orders_clean  override -> shadow: Postgres of record, every write also writes Iceberg
//	canary status [demo_orders_clean] mode, consecutive matching shadow runs, first/last run, last mismatch
//	canary promote demo_orders_clean Iceberg becomes the sink of record, in one transaction
//	canary drain  demo_orders_clean  delete a promoted dataset's stale row-store rows
//	canary set    demo_orders_clean  override -> iceberg_native
//	canary deploy demo_orders_clean  re-run the output (the write dispatch resolves the sink)
//	canary verify demo_orders_clean  preflight, then parity: row count + checksum, Postgres compute vs Iceberg table
//	canary revert demo_orders_clean  clear the override (effective within the resolver TTL, <= 10 s)
//	canary intents                   open intents: age, holder liveness, what the next write does with each
//	canary drop   demo_orders_clean  decommission: Iceberg table and files, overrides, ledger rows (again to complete)
//
// Every command takes -database-url (default $DATABASE_URL, required) and
// -warehouse (default ./lakewrite-data), before the dataset argument. A CLI
// process is stateless: the flags, the ledger, the row store and the Iceberg
// SQL catalog live in that database, the table files in that warehouse, so
// give every command the same two. Only init changes the schema; the other
// commands fail with "run `canary init` first" on a database without it.
//
// deploy and verify accept only the outputs listed in outputs.go (output
// dataset id -> write strategy): a small, explicit set, today the demo
// Transform demo_orders_clean of the seeded source demo_orders and the
// aggregate demo_category_stats. For these, check and verify print the
// Iceberg preflight (writestrategy.Preflight): the columns whose values an
// Iceberg write would round (a note) or refuse (a warning: the write fails).
//
// Exit codes: 0 success ("parity OK" for verify), 1 failure (parity
// mismatch with both figures, a refused flag, a database error), 2 bad
// command line. See README.md for the runbook.
package main
