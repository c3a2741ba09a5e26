// Package manualtable is lakewrite's manual-table HTTP handler: users
// declare a table, upload its contents as CSV or JSON lines, and the rows are
// written natively to Iceberg through the facade, wrapped in the ledger.
// It is an importable example of how a service embeds lakewrite.
//
// # Routes
//
//	PUT  /datasets/{id}        {"name": "...", "columns": [{"name": "id", "type": "bigint"}, ...]}
//	GET  /datasets/{id}
//	POST /datasets/{id}/rows   Content-Type: text/csv | application/x-ndjson   [?mode=replace|append] [&allow_empty=true]
//
// PUT records the dataset in the ledger's datasets table with its declared
// schema, stored as {"columns":[{"name","type"}]} with each type as Postgres'
// format_type prints it (the format writestrategy reads, so a manual table
// is readable as a source). Types: smallint, integer, bigint, real, double
// precision, numeric(p,s) with p <= 38, boolean, text, date, timestamp with
// time zone, timestamp without time zone, json, jsonb, uuid (the usual
// aliases such as int8, bool, timestamptz and decimal(p,s) are accepted and
// normalized). Changing the declaration while a write of the dataset is in
// flight is refused with 409.
//
// PUT also makes the handler's writer (Config.WriterID) the dataset's owner
// in the ledger (ledger.ClaimDataset): from then on only uploads write it,
// and a pipeline write of the same id is refused by ledger.Open
// (ErrNotOwner). The other way round, a dataset owned or already written by
// another writer cannot be declared (409 not_manual), and only datasets the
// handler owns accept uploads; a manual table declared before owners
// existed is claimed by declaring it again.
//
// POST uploads the full contents of the table: by default a replace (one
// snapshot that replaces the table), with ?mode=append one appended
// snapshot. The answer is the commit result:
//
//	{"dataset_id":"orders","txn_id":"...","mode":"replace","rows":3,"snapshot_id":123,
//	 "committed_at":"2024-01-02T03:04:05.678Z","data_files":1}
//
// A CSV body starts with a header naming every declared column exactly once,
// in any order; an empty field is NULL. An NDJSON body holds one JSON object
// per line keyed by column name; a missing key or null is NULL, an unknown
// key is an error; numbers may be given as strings. Values are parsed
// strictly: a value that does not fit its column (an integer out of range, a
// decimal with more digits or decimal places than declared — never rounded
// — a timestamp more precise than microseconds, an invalid uuid or JSON) is
// rejected, never coerced. Nothing that Postgres refuses for the declared
// type is accepted either (a NUL character in text, \u0000 in jsonb, year
// 0000, Go-only number forms such as 1_000 or hex floats, non-ASCII spaces
// around a value), so a manual table stays readable as a Postgres source:
// FuzzAppendValue, FuzzParseDecimal and FuzzParseTimestamp check the
// parsers against a real server.
//
// # Streaming and all-or-nothing
//
// The body is never buffered whole: it is read through http.MaxBytesReader
// row by row into Arrow builders, and every Config.BatchRows rows a record
// batch is handed to the lakehouse. An invalid row may come after batches
// were already handed over, so the handler makes the write fail by yielding
// the error from the batch sequence: the facade guarantees that a failing
// input stream commits nothing. The request then gets a 4xx problem document
// naming the line and column, and the ledger intent is aborted.
//
// # Ledger
//
// Each upload runs inside ledger.With: the intent is opened (a concurrent
// upload of the same dataset waits for it, up to the ledger's WaitTimeout,
// then gets 409 busy), the facade write carries the intent id as its txn
// id, the ledger's expectations are asked about the staged write before its
// snapshot commits (writestrategy.CommitStaged: a veto answers 422 vetoed
// and leaves the table as it was), and the commit stamps the row count,
// snapshot id and commit time from the commit result and the declared
// schema on the dataset. A write that
// fails aborts the intent (5xx, or 409 for a clean catalog conflict). When
// the catalog cannot say whether the commit landed
// (facade.ErrCommitStateUnknown), the intent is left open and the answer is
// 503; the next upload of the dataset reconciles it first (rolled forward
// when a snapshot carries its transaction id, aborted when provably absent:
// facade FindTxn), as it does the intent of an upload whose process died.
// A client that stops sending fails its upload after Config.BodyStallTimeout.
//
// # Empty uploads
//
// A replace whose body holds no rows (an NDJSON body with no lines, a CSV
// body with only its header) would empty the table; it is refused (400
// empty_upload, nothing written) unless the request says
// ?allow_empty=true. An empty append writes an empty snapshot and is
// allowed.
//
// # Authorization and identity
//
// Config.Authorize, when set, is asked before each request touches a
// dataset, with the action (read, declare, write). It returns the caller's
// identity, which an upload records as its ledger intent's actor
// (ledger.Txn.Actor) and in its snapshot summary
// (lakewrite.meta.uploaded-by), so every snapshot says who uploaded it.
// Refusals answer 401 (an error wrapping ErrUnauthenticated) or 403.
//
// # Errors
//
// Every error, including an unknown route (404) or method (405), is an RFC
// 9457 problem document (Content-Type application/problem+json, see
// Problem): {"type": "urn:lakewrite:manualtable:<code>", "title": ...,
// "status": n, "detail": "...", "instance": "/datasets/...", "code": "...",
// "line": n, "column": "...", "txn_id": "..."} (line, column and txn_id
// when they apply). Client errors are *InputError values (bad_request,
// bad_schema, bad_csv, bad_json, type_mismatch, empty_upload: 400;
// unauthorized: 401; forbidden: 403; unknown_dataset, not_found: 404;
// method_not_allowed: 405; not_manual, schema_changed, schema_mismatch,
// busy, conflict: 409; too_large: 413; unsupported_type: 415); vetoed is
// 422; partition_order is 422 (the lakehouse partitions the table and the
// upload's rows came back to a partition after another: send them grouped
// by partition, e.g. sorted by the partition columns; nothing is written);
// write_failed is 500; outcome_unknown is 503.
//
// The handler keeps no global state and starts no goroutines; the pool,
// ledger, lakehouse and allocator belong to the caller.
package manualtable
