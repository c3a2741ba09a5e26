// Package writestrategy computes pipeline outputs from their sources and
// writes them to the sink each output resolves to; its Dispatcher is the
// write dispatch that composes the other lakewrite packages.
//
// # Strategies
//
// A WriteStrategy describes an output: Transform (a chain of SQL steps as
// CTEs), Join (two sources, with a cross-join preflight), Split (one source,
// two outputs) and Deploy (append_always, append_new, snapshot_replace).
// Each strategy is planned into one projection per output: the SELECT of
// the output's business rows in output order. Both paths run that same
// SELECT, so they cannot disagree on what the output is:
//
//   - Apply, the Postgres path, writes it into the dataset_rows row store
//     inside the caller's transaction;
//   - ComputeRows, the lakehouse path, streams it as Arrow batches (package
//     cursor) for the facade to write.
//
// Sources are datasets in the row store (read through their declared
// schema with jsonb_to_record) or native Iceberg datasets, which are
// hydrated into a temporary table of the compute transaction (a bulk COPY
// from the facade's scan, one batch in memory) so the same SQL reads them.
// Request.SourceFilter reads a source as only the rows within column
// ranges, e.g. a window over a timestamp column: a native source is scanned
// with the ranges as the facade filter, so a partitioned upstream reads only
// the files of the matching partitions; a row-store source is filtered by
// the same ranges in SQL. Targets of Tier B strategies are always read
// whole.
//
// # The row store
//
// Apply stores each output row as one jsonb object in dataset_rows.data,
// keyed by column name, in an encoding that keeps every value exactly:
// to_jsonb of the value for types whose JSON form reads back exactly
// (booleans, integers, numeric, strings, uuid, bytea, dates and times, and
// arrays of these), the value's text form as a JSON string for every other
// type (floats, so -0 survives; json text as written, and a json 'null'
// apart from SQL NULL; jsonb; interval, inet, enums, composites, ranges,
// and arrays of these). Rows carry the marker key "" (never a column name);
// rows without it, written by earlier versions, read as they always did
// (appends add new rows beside them; a snapshot_replace first rewrites them
// in the current encoding in place, keeping their identity, then compares
// rows exactly: 0 is not -0, 1.50 is not 1.5). A
// column of a type that cannot be read back (an anonymous record, a
// pseudo-type) is refused with ErrUnsupportedType before anything is
// written. Floats are written with extra_float_digits >= 1 for the write
// (a session asking for rounded floats keeps its setting otherwise).
// RowStoreInsert writes the same encoding for a loader of your own.
//
// SQL is assembled from quoted identifiers and the caller's own trusted SQL
// fragments (transform steps, split predicates); every value is a
// parameter. An identifier that cannot be quoted safely (empty, longer than
// 63 bytes, NUL, invalid UTF-8, or the reserved "__" prefix for output
// columns, "__source_row_key" of a Model aside) is refused with an error matching ErrUnsafeIdentifier that
// names it and why, and so are two output columns equal up to case ("a" and "A" are one column in Spark and Trino).
//
// # Names
//
// Dataset ids follow one rule on both sinks (facade.CheckDatasetID: 1-128
// characters of [A-Za-z0-9_-], starting with a letter or digit): every id a
// write, load or relation registration targets is checked before anything
// is written, whatever the sink, with an error matching ErrInvalid and
// facade.ErrInvalidDatasetID (errors.As finds a *facade.NameError), so a
// dataset written to Postgres can always flip to Iceberg. Ids that are only
// read (sources, Checksum, Maintain) need only be non-empty: a dataset
// registered before the rule stays readable, but is written again only
// under a valid id.
//
// # Tiers
//
// Tier A (transform, join, split, the first snapshot_replace): rows written
// = the commit result's rows; skipped = preserved = 0. Tier B (append_new,
// later snapshot_replaces) reads the current target: from the row store, or
// hydrated from Iceberg. The merge runs in Postgres as part of the same
// projection (an anti-join or a join on a jsonb key of the row, which
// Postgres hash-joins), so the client holds one Arrow batch at a time
// whatever the sizes (but for an append_new's key set, below); skipped
// and preserved are counted there. On Iceberg
// (Env.Lakehouse a *facade.Facade) the target is not hydrated: a
// snapshot_replace whose source declares the target's columns and types
// streams its deduplicated rows as a merge by key, which the facade
// writes as the new and changed rows plus position deletes of the old
// versions and of the keys that disappeared, in one snapshot, or, when
// the merge removes enough of the touched files' rows, as a copy-on-write
// of those files (see "Merges" in package facade); unchanged rows keep
// their __row_index, __row_id and __created_at, and the facade reports
// them as preserved. An append_new reads only the target's key columns
// (a key of one integer column only within the source's key range, so
// only the data files that can hold a source key are read) into an
// in-memory set compared exactly (no hash-only match; NULL equals NULL,
// as in the row store's jsonb key), streams the deduplicated source and
// drops in the client the rows whose key the set holds, then appends the
// new keys as one append made idempotent by the transaction id. The set
// is the one part of a write's memory that grows with the target: about
// 17 bytes per key for a bigint key, 30 for a short text one at 1M keys.
// A key of integer, text and boolean columns (the same kind in source and
// target) is probed so; any other key (numeric, dates, ...), or a source
// with an unconstrained numeric column, hydrates the keys into a temporary
// table and anti-joins in SQL instead.
// Otherwise (a source with other columns, another lakehouse) the target
// is hydrated and a snapshot_replace is one replace snapshot in which
// unchanged rows carry their previous __row_id and __created_at. On
// Postgres, unchanged rows of a
// snapshot_replace are left in place (their row_index and txn_id are their
// identity). A snapshot_replace whose source gained or lost a column since
// the last write keeps no row (none is unchanged): on either sink it is a
// full rebuild with the new columns. An append_new whose source gained a
// column appends on either sink with it (the rows already there read NULL
// in it). One whose source lost a column appends without it: the dataset
// declares the remaining columns on either sink, and its Iceberg table
// keeps the column (the earlier rows keep their values, the new ones read
// NULL), which the dataset's checksum (Verify) leaves out as the row store
// does. A column an append widens from real to double precision reads,
// in the rows written before, their single precision value widened
// (0.1 then reads 0.10000000149011612) on either sink, as Postgres' own
// ALTER TABLE ... TYPE double precision and Iceberg's promotion give: the
// row store rewrites those values in the append's transaction. (Iceberg
// does not promote a list of floats; such an append to Iceberg fails
// with the facade's schema error and nothing written.)
//
// When an output moves to the other sink (a canary flip or a revert), its
// first write there is a full rebuild: an append strategy then writes the
// current target plus the new rows as one replace (Skipped still counts
// source rows only).
//
// # Slices
//
// Request.Slices > 1 writes an output with that many readers of the
// compute transaction's exported snapshot, committed as one stream's
// (package writestrategy/sliced): a row-wise output by ranges of its
// source, an output declared per key (Transform.Depends) by buckets of
// the key's hash. WriteResult.Slices and SliceNote say how it ran.
//
// # Delta reads
//
// A Request with ReadMode incremental.ReadDelta reads each source in
// Request.Delta as only the rows its window's ledger transactions wrote,
// on either sink, where incremental.ChooseReadMode allows it, and whole
// otherwise: a row-store source by the rows' transaction ids; a source on
// Iceberg as the data files its window's append snapshots added (found by
// the transaction id in their summaries; facade.Facade.ScanAppended),
// which an append pipeline over a growing upstream reads at the cost of
// the change. A window whose source table holds a replace, a merge, a
// delete or a compaction in or after it, a row-store source whose window
// was written to Iceberg, and the first write of an output after a flip
// (or of an Iceberg table) read the source whole.
//
// Such a fallback is reported: WriteResult.FullRead names each source of
// Request.Delta that was read whole and why ("up: first write of the
// Iceberg table: a full rebuild"), "" when every one was read as a delta,
// and the Dispatcher logs it at Info, message "lakewrite delta request
// read whole", with writer_id, dataset_id, txn_id and full_read. A
// pipeline whose runs should cost the change and keep reporting a full
// read (a compaction or a replace of its upstream on every run, say) reads
// the reason there. A source not in Request.Delta is read whole by request
// and not reported.
//
// # Refresh: recompute only what changed
//
// A Transform or a Join may declare how its output's rows depend on its
// sources (Depends, an incremental.Dependency): a Key of output columns
// such that the output rows holding a key value v depend only on the rows
// of each mapped source whose mapped columns hold v. A row-wise transform
// keyed by any of its columns, a GROUP BY K with any aggregate, a
// DISTINCT, window functions PARTITION BY K, and a join whose key path
// goes through each mapped side are such outputs. A source left out of
// Sources has no key path: any change in it makes the run full.
//
// A declaration is valid when Key lists distinct output columns and every
// mapped source is a source of the strategy mapping one of its columns to
// each key column, in Key's order; MaxShare is within [0, 1]. Anything
// else is refused with ErrInvalid (and incremental.ErrInvalidDependency)
// before anything is written.
//
// A run of a declared output reads, in its transaction (REPEATABLE READ,
// one snapshot for the change log and the sources), each source's changes
// since the output's last committed run: a registered relation tracked
// with Dispatcher.Track (triggers filling the change log of package
// incremental/changelog; a relation over a view or a query cannot be
// tracked), and a row-store dataset, whose writes record their changes in
// the same transaction once a declared output reads it. The run is
// incremental when incremental.ChooseRefresh allows it: a committed
// earlier run on the same sink, every source's changes known (tracked,
// no TRUNCATE or full rewrite, no rewrite of a tracked table by ALTER
// TABLE, VACUUM FULL or CLUSTER, log not trimmed past the last run), every
// changed source mapped, each source's change share at most MaxShare
// (default incremental.DefaultMaxShare), and the output's statement,
// declaration and columns those of its last run. It then collects the
// distinct key values of the changes' old and new images (an update of
// the key recomputes the old and the new key; NULL is a key like any
// other), recomputes the output's own SQL over its mapped sources
// restricted to those keys (unmapped sources are read whole; the affected
// rows are read in no set order, so the rows a run adds follow the plan's
// order, not the source's row order a full run keeps) and replaces
// exactly the output rows of those keys: rows of an affected key the
// recompute no longer produces are deleted, rows equal to a recomputed
// one stay in place with their identity, every other row is untouched.
// Rows and Preserved count the whole output. Otherwise the run is full,
// exactly as without a declaration. The first run of an output is full;
// so is the next one when it registered a row-store source or found one
// of the source's writers in flight (its changes before the registration
// were not recorded). An incremental run patches the rows the output's
// last run committed, so a run is full too when the output is no longer
// as that run left it: another write of it committed since (a Load, a
// write of another strategy), or its Iceberg table has a write after that
// run's snapshot, does not descend from it (rolled back, dropped and
// created again) or is gone; compactions after it change no row and keep
// runs incremental. WriteResult.Refresh says which mode ran, for how
// many keys, and why a run was full; a full run of a declared output is
// logged at Info ("lakewrite declared output recomputed in full", with the
// reason). Both modes store what the run read of each source in its
// transaction, so a failed run leaves the old positions and the next run
// recomputes a superset of the keys.
//
// The recompute reads only the affected keys' rows where an index serves
// it: the library builds a partial expression index on the row store for
// each declared key of canonical text (integers, text, boolean, uuid,
// date) after the output's first run, full or incremental, that finds it
// missing (CREATE INDEX CONCURRENTLY, after the run's commit and outside
// its transaction, so no writer waits; the first incremental run reads
// through it); keys of other
// types (numeric, timestamps) are compared by value without an index. A
// relation is read through its own indexes: give it one whose leading
// columns are the key. A source read without such an index is named in
// RefreshReport.Scanned. Through the index a run still reads every page
// that holds a row of an affected key: when a key's rows lie all over an
// unclustered table (a GROUP BY of about ten rows a key), 1,000 changes
// touch most of its pages (6,080 of 9,374 for 1M rows), a read of the
// table from shared buffers or, when they do not hold it, from the
// operating system. What a run reads is those pages: a table whose rows
// of a key sit together (clustered by the key) holds them on fewer.
//
// Row-store writes of a registered dataset record an image per row they
// insert or delete (a snapshot_replace's changed and removed rows, an
// append's rows, an incremental run's rows), or one 'F' (everything may
// have changed) for a full rewrite (a transform, a join, a split, a
// replace) and for a change of more than 10,000 rows that is also more
// than 10% of the dataset; a dropped dataset records an 'F' too. A caller
// writing the row store itself (RowStoreInsert after its own DELETE)
// records an 'F' for the dataset in the same transaction.
//
// A declaration is the caller's contract and is not checked against the
// SQL: a false one (an output row depending on source rows outside its key,
// such as a share of a grand total) makes an incremental run leave rows
// of other keys stale. Dispatcher.Verify compares the output with a full
// recompute and reports the mismatch (see the Transform example).
//
// On Iceberg an incremental run writes the recomputed keys' rows as one
// scoped replace (facade.WriteRequest.Scope): the rows of those keys that
// the recompute no longer produces are deleted, an equal row stays in
// place, every other row is untouched. Finding the rows of those keys in
// an unclustered output reads its files; set facade.Config.ScopeIndexBytes
// (about 20 bytes an output row) so that the process keeps them indexed
// by key after the first run and a run costs the keys it changes, not
// the output. An Iceberg source is read as its
// changes between the snapshot the output's last run read and the one of
// its last committed write (facade.ChangeReader; a Lakehouse without it,
// or a history it cannot read, makes the run full), then for the affected
// keys only (facade.ScanOptions.In): its files are pruned by partition and
// bounds, so an upstream sorted or partitioned by the key reads least; an
// unclustered one is read whole, though only the affected keys' rows are
// copied into Postgres. When the run's affected keys all come from one
// Iceberg source and every write of it since the last run was a merge by
// a key among the mapped columns (snapshot_replace with Key), or a
// compaction, only the files written since are read
// (facade.ScanOptions.ChangedSince): a row-wise output keyed like its
// merged upstream reads the change, not the upstream. Reading the changes
// reads the mapped columns of the upstream files a merge deleted rows
// from; with facade.Config.ScopeIndexBytes set, integer key columns read
// so are kept too (8 bytes a row), and the next run's deletes on the same
// large file are picked from memory.
//
// # Sink guard
//
// A write must not move a dataset to another sink unless its own writer's
// flags say so. A writer with no flags row (which resolves to the safe
// default, Postgres) is refused with a *sink.UnknownWriterError
// (errors.Is(err, sink.ErrUnknownWriter)), naming the known writers, when
// an output lives on Iceberg or its last write came from a registered
// writer, before any intent is kept or row written: a typo in the writer id
// cannot undo a flip. The first write of a dataset never written, and the
// writes of a dataset only ever written to Postgres by unregistered
// writers, go to Postgres as before. A registered writer whose resolved
// sink differs from where an output lives is a flip or a revert when an
// override for the dataset, or its own default as the dataset's last
// writer, explains it; otherwise (its default, on a dataset another writer
// wrote last) the write goes ahead and is logged at Warn, message "sink
// change not explained by the writer's flags", with writer_id, dataset_id,
// from, to and last_writer.
//
// # The write dispatch
//
// Dispatcher.Write runs one output (or split pair) in this order: resolve
// the sink (package sink) -> the read mode (package incremental's
// ChooseReadMode, per delta source; see Delta reads) -> open the ledger intent (an open
// intent of a dead writer is reconciled first, through the dispatcher's
// Lookup) -> Postgres arm: Apply and the ledger
// commit in one transaction; Iceberg arm: ComputeRows -> facade Stage of
// every output with its transaction id -> the ledger's expectations asked
// with each staged outcome (ledger.Check) -> the snapshot commits -> ledger
// commit with each commit result (row count, snapshot id, committed-at as
// the watermark). A failing stream, staging error or veto in either output
// of a split pair deletes the staged files of both and commits neither.
// The snapshots of a split pair then land together: in one Postgres
// transaction with the ledger on facade.NewPostgresCatalog, in one catalog
// request on a catalog with multi-table transactions (a REST catalog:
// facade's SupportsAtomicCommit and CommitAll); only on other catalogs
// (iceberg-go's SQL catalog) can a failure of the second snapshot commit
// (a conflict, say) leave the first output committed. A Lakehouse wrapper
// that hides the one-transaction commit of facade.NewPostgresCatalog (its
// staged writes drop facade.TxStaged) is refused with ErrTxCommitLost,
// before anything commits, unless DispatchConfig.AcceptTwoCommits accepts
// the two-step commit. CommitStaged is the same order for
// writers composing facade and ledger themselves. Any failure aborts the
// intents whose writes did not land; an unknown commit outcome leaves the
// intent open, and the next write of the dataset reconciles it. Row counts
// always come from the write itself, never from a count(*) of the target.
//
// When the Lakehouse says in which order an output's rows must arrive (a
// *facade.Facade's WriteOrder: the partition keys, then the sort order, of
// a partitioned table), ComputeRows streams the output ORDER BY those
// columns; a bucket[N] partition key is ordered by
// <control-plane schema>.iceberg_bucket(column, N), Iceberg's bucket
// transform as a SQL function (installed by ledger.Migrate) for smallint,
// integer, bigint, date, time, timestamp, timestamptz, text, varchar and
// bytea columns. A bucket key over another type fails the write with an
// error matching ErrInvalid, naming the column and its type, before any
// file is written.
//
// # Loading rows and relation sources
//
// Dispatcher.Load brings rows into a dataset as one write (one ledger
// intent, routed by the writer flags, replace or append): from a query (the
// Query strategy: a SELECT that reads no dataset, run in the write's
// transaction) or from Arrow record batches (an iter.Seq2 or an
// array.RecordReader), which are copied into a temporary table of the
// write's transaction and then written like a query, so the same batches
// give the same dataset on either sink. Bad input (no or several inputs,
// batches of different schemas, an unsupported Arrow type, an error from
// the batches) fails the write with nothing visible.
//
// RegisterRelation makes an existing table, view or SELECT of the database
// a source without copying it (storage sink.Relation): strategies read it
// in their own transaction, so each write sees it as it is then. Such a
// dataset is read only (ErrRelationDataset) and read whole (no delta
// reads); when its columns change, reads fail with ErrRelationChanged
// until it is registered again.
//
// # Model outputs
//
// Model writes, for each row of a source, the rows a Go function computes
// from it (package incremental/model runs the windows): the function gets
// windows of source rows as Arrow record batches (the key column
// model.KeyColumn, "__source_row_key", then the columns passed in) and
// returns the output rows, each carrying its source row's key. The rows
// go through a temporary table of the write's transaction, one window at
// a time, and are written like any output, on either sink. A model's
// write runs REPEATABLE READ: its source read and its change log window
// share one snapshot. On a run after the first, when the run that stored
// its position was the output's last write on the same sink, the function
// sees only the source rows inserted or updated since, and the output
// rows of every touched key (deleted source rows included) are replaced:
// in the row store by key (the rows deleted and appended are recorded as
// change images when the output is itself a change source), on Iceberg by
// a scoped replace on model.KeyColumn (facade.Scope), which keeps every
// other row, and an unchanged one of a touched key, in place with its
// identity. The touched keys are those of the source's old and new images
// since the last run's position:
//
//   - a registered relation tracked with Dispatcher.Track: its change log
//     window (incremental/changelog);
//   - a row-store dataset: registered as a change source before the
//     model's first run (in a transaction of its own), its writes then
//     record the images of the rows they insert and delete, read from the
//     change log window; a write recording an 'F' (a replace, a transform,
//     a change of more than 10,000 rows and 10% of the dataset) makes the
//     next run full, and a run that found one of the source's writers in
//     flight when its window was unknown stores no position;
//   - an Iceberg dataset: its changes between the snapshot the last run
//     read and the one of its last committed write (facade.ChangeReader);
//     only the source rows of the touched keys are read, by a key-set scan
//     (ScanOptions.In) when the key is one column of a type the scan
//     prunes on (integers, floats, text, timestamps), by a whole read
//     otherwise. Changes touching at least as many keys as the source has
//     rows (a replace), a history the Lakehouse cannot read, or one that
//     does not read changes make the run full.
//
// The position is stored once the write has committed. Any other run (the
// first, a flip of the output or the source, an unknown window, a position
// lost in a crash, an output written by another run or, on Iceberg,
// altered outside its runs since, a registered relation not tracked, a changed Iceberg
// source read with a Request.SourceFilter) scores every row.
// WriteResult.Refresh reports a model's mode: incremental for Refresh.Keys
// touched source keys, or full and why (also logged at Info, "lakewrite
// model output scored in full", with the reason). Verify re-scores the
// source: parity holds for a deterministic function; for one whose answers
// drift it reports a mismatch of the same rows. A shadow run compares the
// write of record with its mirror, which holds for any function.
//
// # Shadow mode and promotion
//
// A dataset whose writer flag says sink.Shadow is written to Postgres, the
// sink of record, and then, once that write has committed, mirrored to its
// Iceberg table: the rows just committed, read back in one snapshot under a
// maintenance intent of the dataset, replace the table (its snapshot
// carries the write's transaction id), and the run is recorded in the
// control plane with the rows and checksum of both sinks and the columns
// that differ (Dispatcher.ShadowStatus). A shadow failure is bounded,
// logged and recorded, and fails the write only with ShadowConfig.Fatal; a
// shadow whose writer died is recorded as aborted by the next one.
// Readers resolve the dataset through the ledger, which says Postgres,
// until Dispatcher.Promote flips it, in one transaction, once the table
// holds the latest write of record (ShadowConfig can promote by itself
// after N matching runs over a period). A schema change of the output
// reaches the table with the next shadow write, under the facade's
// evolution rules; a change they refuse fails that shadow run.
//
// # Decommissioning and open intents
//
// Dispatcher.Drop removes a dataset: its Iceberg table and every file of
// it, its writer flag overrides, its row-store and ledger rows, in a
// crash-safe order (marked dropped first, so no write starts; then the
// table purged; then the rows deleted). A drop killed midway leaves the
// dataset refusing writes (ledger.ErrDatasetDropped) and the next Drop
// completes it; an open intent of a live writer refuses it (ledger.ErrBusy).
// Dispatcher.Intents is the operator's view of open intents: age, holder
// liveness and what the next write would do with each (wait, roll forward,
// abort).
//
// # Crashes and retries
//
// The intent of a writer that died (process killed, connection or server
// gone) is reconciled by the next Write of the dataset at once: rolled
// forward from the landed snapshot (row count, snapshot id, committed-at as
// the watermark, and the declared schema, which the Iceberg arm records in
// the snapshot summary), or aborted when provably absent. A write a writer
// composed itself (facade.Stage, CommitStaged) is rolled forward the same
// way, with the declared schema the landed table gives (Dispatcher.Lookup;
// CommitOutcome is that outcome for the writer's own ledger commit), so the
// dataset stays readable as a source. A live writer,
// however slow, keeps its dataset (see the ledger package's writer
// liveness). Request.IdempotencyKey makes a caller's retry return the
// earlier result instead of writing again.
//
// # Table maintenance
//
// After an Iceberg write whose commit reports maintenance due
// (facade.CommitResult.MaintenanceDue), Write runs the table lifecycle
// (facade.Maintainer) under a maintenance intent of the dataset, opened
// without waiting: a dataset another writer holds is left for a later
// write, and a maintenance failure is logged, never returned (the write
// committed). WriteResult.Maintenance reports what it did. Dispatcher.Maintain
// runs it on demand. facade.Config.Lifecycle tunes or disables it.
//
// # Observing and verifying
//
// DispatchConfig.Observer sees every phase of a Write (Phase: resolve,
// open, apply or compute, stream, check, catalog and ledger commits,
// maintenance) with its outputs, duration, rows and error; PhaseStart
// returns the context the phase runs under, so a tracing span nests the
// phase's database and catalog calls, and an Observer with a Progress
// method sees the rows each output has streamed so far. Every event names
// the strategy and the requested read mode; the end of PhaseWrite carries
// the results (rows, bytes, write and merge mode of each output).
// Package writestrategy/otelobserver is such an Observer for
// OpenTelemetry: spans and metrics. Dispatcher.Verify
// compares each output, on either sink, with a fresh compute of its
// strategy (rows and checksum).
//
// # Errors
//
// A failed statement of a write is a *QueryError on both sinks (on the
// Iceberg sink it wraps the *cursor.QueryError of the stream, which
// errors.As still finds): it names the output and, for a server error with
// a position, the Transform step and the position within the step's own
// SQL (a Query's: within its SQL); the wrapped *pgconn.PgError keeps the
// server's position in the generated statement. An Iceberg output's
// partition and sort keys are checked against the output's columns and
// types before the compute starts (ErrPartitionKey; a bucket key of a
// type the SQL bucket function does not hash: ErrInvalid). A write whose
// connection to Postgres went away fails with an error matching
// ErrConnectionLost that says whether nothing was written or the outcome
// is unknown; a server timeout that ended the session matches
// ErrServerTimeout instead, naming the setting. A cross join above the
// preflight limit (DispatchConfig.MaxCrossJoinRows) matches ErrInvalid and
// names both sides' recorded row counts.
//
// # Numerics
//
// An unconstrained Postgres numeric maps to decimal(38, 18) on Iceberg. A
// value with more fractional digits (avg() over values below 1 has 20) is
// rounded half-even to 18 by default and counted: WriteResult.Rounded, the
// snapshot summary's lakewrite.numeric-rounded, and the "rounded" attribute
// of the Dispatcher's log record. The Postgres path stores every digit;
// reading it back through the cursor (a checksum, a parity check) rounds the
// same way, so both sinks agree at the written scale. cursor.NumericStrict
// refuses such values instead (the write fails with cursor.ErrOutOfRange):
// set it as the default in DispatchConfig.Cursor.Numeric, or per write in
// Request.Numeric. A value whose integer part does not fit fails under
// every policy. Preflight lists an output's columns whose values would be
// rounded or refused, before the output is moved to Iceberg.
//
// # Values on both sinks
//
// A value written to either sink reads back with the same Postgres text
// form, edge values included: -0, NaN and ±Infinity floats (also in
// arrays), json text as written (whitespace, key order, duplicate keys), a
// json 'null' apart from SQL NULL, jsonb, bytea (empty is not NULL),
// domains, and the types the cursor streams as text (interval, inet,
// enums, composites, ranges; set cursor.Options.UnknownAsText for the
// Iceberg sink). The row store also keeps what the Iceberg sink refuses
// with a typed error or holds at the scale of the numeric policy: numeric
// NaN/±Infinity, infinite timestamps and dates, multi-dimensional arrays,
// the scale of each unconstrained numeric. Not kept: array lower bounds
// other than 1 of arrays Iceberg holds as lists, and in the row store of
// arrays of booleans, integers, numerics, strings, uuids, bytea, dates and
// times. A column of an anonymous record or pseudo-type is refused with
// ErrUnsupportedType before anything is written. Text forms inside
// composites and intervals follow the session's DateStyle and
// IntervalStyle: read with the settings you wrote with. Row-store rows
// written by earlier versions read exactly as they did; loaders of your own
// write the current encoding with RowStoreInsert.
package writestrategy
