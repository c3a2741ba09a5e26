// Package sliced writes one output with N readers under one Postgres
// snapshot and commits it once: the scale-out of a single write.
//
// A single-stream write runs the output's SELECT on one backend and
// encodes it on one client goroutine. A sliced write cuts the output into
// N slices by ranges of its driving source, and reads and encodes each
// slice on its own connection and goroutine; all slices read as of the
// same snapshot, and their data files are committed in one Iceberg
// snapshot, with the ledger, exactly as a single stream's.
//
// # The three steps
//
//  1. Plan (PlanSlices): the coordinator's transaction (the write's compute
//     transaction) exports its snapshot (pg_export_snapshot); a
//     transaction importing it reads the driving source's bounds and cuts
//     them into N ranges (Ranges); the caller's sqlFor gives each range's
//     SELECT.
//  2. Write a slice (WriteSlice): a new connection begins a REPEATABLE READ
//     READ ONLY transaction, imports the snapshot (SET TRANSACTION
//     SNAPSHOT), streams the slice's SELECT through package cursor and
//     writes it with facade.SlicedWrite.WriteSlice, which returns the
//     slice's files, rows and checksum. Memory per slice is that of one
//     single-stream write (one batch in flight, Config.WriteWorkers
//     encoders).
//  3. Commit: facade.SlicedWrite.Stage stages every slice's files as one
//     write; its Staged commits like any other (on the catalog of
//     facade.NewPostgresCatalog, in the coordinator's transaction together
//     with the ledger).
//
// Run does step 2 for every slice in this process, one goroutine each;
// Stage does all three. writestrategy's Dispatcher uses Stage for a write
// with Request.Slices > 1. A job system can run step 2 elsewhere: the plan
// (snapshot id, ranges, SQL) is plain data, and the coordinator must stay
// in its transaction until every slice has imported the snapshot.
// StageFunc is Stage's signature, which writestrategy.DispatchConfig.StageSlices
// takes; package sliceriver (writestrategy/sliced/sliceriver) runs step 2
// as River jobs in other processes.
//
// # Which outputs
//
// Unless it is declared per key (below), the caller declares an output
// row-wise (writestrategy.Request.Slices): each source row gives at most
// one output row and no step aggregates,
// sorts, limits or numbers rows across the source. The driving source is
// then either a row-store dataset, cut into ranges of
// dataset_rows.row_index (index range scans on its primary key
// (dataset_id, row_index)), or a registered table or materialized view,
// cut into ranges of heap pages read by TID range scans (ctid >= '(lo,0)'
// AND ctid < '(hi,0)', PostgreSQL 14 or later). Anything else (a view, a
// query relation, a native Iceberg source, which is hydrated into a
// temporary table no other session sees, a join) runs as one stream, and the
// write says why (writestrategy.WriteResult.SliceNote). A declaration that
// is false is caught when a slice writes more rows than its range holds
// (ErrNotRowWise; nothing is committed); a step that aggregates within a
// slice is not caught, and writes per-slice results.
//
// # Outputs declared per key
//
// A Transform whose Depends maps its source to key columns (the output's
// rows for a key value depend only on the source rows with that value: an
// aggregate GROUP BY the key, DISTINCT, a window PARTITION BY it, a
// row-wise step) is cut into buckets of the key's hash instead of ranges:
// slice k reads the source rows whose key hashes to k
// (pg_catalog.hash_record_extended of the key columns modulo N, which
// hashes each value by its type's hash function: the same in every
// session, NULL keys in one bucket), so no key is split across slices.
// Every slice scans the whole source on the server and keeps 1/N of it:
// the server's work grows with N, the client's does not. The key's types
// must have a hash function lakewrite knows (integers, text, numeric,
// dates and times, uuid, bytea, boolean, floats); another runs as one
// stream, and so does a run of the output that recomputes only the keys
// its source's changes touched (already small). A key bucket that writes
// more rows than the source holds fails with ErrNotRowWise.
//
// # Partitioned and sorted outputs
//
// A row-wise output whose table is partitioned is cut into buckets of its
// partitions, so that each partition is written by one slice, in one file
// per target size, and each slice's writer has one open file: every slice
// computes the output over the whole source, keeps the rows whose
// partition values (as the partition transforms compute them in SQL)
// hash to its bucket, and orders them by partition, then by the sort
// order. The server then reads the source N times; the client encodes
// each row once. A table with a sort order and no partition is cut into
// ranges as above, each slice ordering its rows (Iceberg's sort order
// holds within each data file). An output declared per key keeps its key
// buckets, each slice ordering its rows by partition: a partition may then
// have a file per slice.
//
// # Identity and order
//
// Slice k's rows are numbered from the write's first __row_index plus
// Range.First, the offset of the slice's range in the source (row_index
// minus the smallest row_index; for pages, the page offset times the most
// tuples a page holds). Slices never share an index, and ordering the table
// by __row_index gives the source order (slice by slice, each slice in its
// scan order), which is the single stream's order for a row-store source;
// the indexes have gaps where the steps dropped rows or a range holds fewer
// rows than its span, as after a merge. lakewrite.next-row-index is one past
// the last index given. __row_id of a slice's rows is that of a write
// starting at the slice's first index (so N = 1 gives the single stream's
// ids, and ids are distinct across slices); rows and the checksum equal
// the single stream's, and every slice stamps the write's one
// __created_at. The snapshot summary records lakewrite.slices.
//
// Key and partition buckets number their rows from Range.First = bucket
// times the source's row count: ordering by __row_index gives bucket by
// bucket, each bucket in its read order (not one stream's order), with
// gaps.
//
// # Failure and time
//
// A failing slice cancels the others, every slice's files are deleted and
// the write fails with nothing visible (the Dispatcher aborts its intent).
// The coordinator holds the exported snapshot's transaction for the life
// of the write, bounded by Config.Deadline on the client and, through
// idle_in_transaction_session_timeout, on the server. A coordinator that
// dies ends its transaction: slices not yet begun cannot import the
// snapshot (ErrSnapshot), nothing commits, and its intent is reconciled by
// the next writer. Files of a write that never commits are unreferenced
// files under the table's location, removed by the lifecycle's orphan pass
// (facade.Lifecycle.OrphanAge).
//
// # Connections
//
// Config.DB opens one connection per slice (a pgxpool.Pool sized for N
// plus the coordinator). Through PgBouncer in transaction mode every slice
// is one transaction that begins with SET TRANSACTION SNAPSHOT, which
// should work there too when the pooler's server pool holds N + 1
// connections to the same server (not tested here).
package sliced
