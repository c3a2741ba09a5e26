// Package facade is the write contract of the lakehouse: all-or-nothing
// Iceberg writes through iceberg-go, with identity stamping, read-back, a
// parity checksum, and an in-memory double (package facadetest).
//
// # Writing
//
// A Lakehouse (implemented by *Facade and by facadetest.Lakehouse) takes a
// Target (dataset id, writer id, workspace) and a WriteRequest: mode
// (Replace or Append), an Arrow schema, the rows as an
// iter.Seq2[arrow.RecordBatch, error] (see FromReader and FromRows for a
// RecordReader or row-at-a-time input), source refs, metadata and the
// ledger transaction id. Write returns a CommitResult (rows, snapshot id,
// committed-at = the snapshot timestamp, schema, data files, checksum).
// Stage and Staged.Commit expose the two steps, so a caller can record
// what was staged, or have it checked, before committing (with the ledger:
// writestrategy.CommitStaged asks its expectations in between). Open returns a Handle bound to one
// target and mode.
//
// One write is one Iceberg snapshot, or an error and nothing visible. A
// failing input stream, a cancelled context, a typed input error or a
// failed commit leave the table as it was, and the data files the attempt
// wrote are deleted (best effort; they are never referenced). The stream
// handed to iceberg-go never carries the error or the cancellation itself,
// so iceberg-go finishes and reports every file it wrote, including the
// partial one it would otherwise orphan. Exception: ErrCommitStateUnknown
// keeps the files, because the snapshot may reference them.
//
// Commits: iceberg-go retries 0 times by default; the facade retries clean
// conflicts (iceberg-go ErrCommitFailed, or the SQL catalog's "requirement
// failed") Config.CommitRetries times with jittered backoff against the
// refreshed table. A replace is re-planned over the fresh table's files; an
// append is retried only while the table's __row_index still continues at
// the staged rows' first index (else ErrCommitConflict: the caller re-runs
// the write); an append whose txn id landed meanwhile returns that result.
// Any other catalog error is reconciled once by looking for the write's
// unique lakewrite.write-id in the table's ancestry; if absent the error is
// ErrCommitStateUnknown, never retried.
//
// The first write of a dataset creates its table (format v2, zstd,
// unpartitioned unless Config.PartitionFor declares a Partitioning) from
// the Arrow schema plus the identity columns; a failed first write may
// leave that empty table behind (no snapshot, no rows).
//
// A partitioned table (identity, year, month, day, hour, bucket[N] or
// truncate[W] fields, optionally a declared sort order) is written in
// bounded memory: the rows must arrive clustered by partition (order the
// query by the partition's source columns), one data file is open at a
// time and rolls when the partition changes, and each file records its
// partition tuple. A row returning to a partition that already ended fails
// the write with ErrPartitionOrder, nothing committed. The identity columns
// and the checksum do not depend on the layout. A changed declaration evolves
// the spec and sort order in the next write's snapshot (files already
// written keep their spec). The facade does not sort: the declared sort
// order is recorded, and WriteOrder gives the query order (partition keys,
// then sort keys) the Dispatcher streams by; a bucket[N] key is ordered by
// the bucket itself (OrderKey.Bucket), which the Dispatcher computes in SQL. Maintain compacts a
// partitioned table within each partition, the files of an earlier spec
// within their own spec and partition (so compaction, too, keeps one file
// open at a time). ScanOptions.Filter (column Ranges) makes a Scan skip
// the data files whose partition or column statistics cannot match.
// Arrow types map to Iceberg types (bool, int8/16/32 -> int, int64 -> long,
// float32/64, decimal128(p,s) -> decimal(p,s), string, binary,
// fixed_size_binary, date32, timestamp[us] -> timestamp, timestamp[us, any
// zone] -> timestamptz, time64[us], list<...>); UUIDs (arrow uuid extension,
// or fixed[16]/string tagged cursor.MetaPGType=uuid) -> uuid. Others are an
// *UnsupportedTypeError. Nullable Arrow fields become optional columns;
// non-nullable ones required, and a NULL in a required column is a
// *NullInRequiredError raised before the batch is written (iceberg-go
// v0.7.0 would store 0). The Postgres type is kept in the Iceberg field doc
// and returned as cursor.MetaPGType ("lakewrite.pg_type") metadata on read
// (cursor.MetaJSON marks json and jsonb).
//
// A write evolves the schema in the same snapshot. A type Iceberg can
// promote (int -> long, float -> double, decimal(P,S) -> decimal(P2,S) with
// P2 > P) is changed in place and keeps its field id, for a replace and an
// append alike. A replace changes any other type by dropping the column and
// adding it again under a new field id (it rewrites every row); new columns
// take their place in the write's column order, before the identity
// columns; columns the write leaves out are dropped; required columns
// written nullable become optional. Iceberg-go cannot move a column
// re-added under its own name, so an incompatibly retyped column lands
// after the identity columns. An append adds the columns the table lacks as
// optional columns before the identity columns (the rows already there read
// NULL), writes a narrower type into a wider column (int into long, float
// into double, a smaller decimal precision), and reads NULL for the
// optional columns it leaves out; an incompatible type or a missing
// required column is a *SchemaMismatchError. Every committed change is
// logged at Info (dataset, mode, schema ids before and after, the change)
// and recorded in the snapshot summary under lakewrite.schema-change
// (SchemaChange as JSON: added, dropped, promoted, retyped, relaxed,
// reordered), and the table property schema.name-mapping.default is kept
// equal to the current schema's name mapping. Config.SchemaPolicy (or
// Config.SchemaPolicyFor, per dataset) can refuse a replace's drops
// (RefuseDrops) or incompatible type changes (RefuseIncompatible), which
// fail with a *SchemaChangeError (errors.Is ErrSchemaChange), and an
// append's new columns (RefuseAppendAdds), which fail with a
// *SchemaMismatchError; either way before any data file is written.
// Empty input: a replace empties the table, an append adds an empty
// snapshot; both carry the txn id.
//
// # Identity
//
// __row_index is 0..n-1 for a replace and, for an append, continues at the
// head snapshot's lakewrite.next-row-index (every snapshot the facade
// commits records it; a head without it, written by an older version or
// another engine, falls back to the live data files' upper bounds). __row_id is an int64 hash of the
// dataset id, the append's first index (0 for a replace), the row's business
// values (normalized, name-ordered, see Checksum) and an ordinal among equal
// rows from a fixed 4 MiB slot table, so ids are unique, the same replace
// gives the same ids, and memory stays flat. __created_at is the write's
// time taken when staging starts (the snapshot timestamp, CommittedAt, is
// only known at commit and is some seconds later for large writes). Callers
// may preserve identity: nullable __row_id / __created_at columns in the
// request keep their non-null values.
//
// The row hash behind __row_id and Checksum is frozen as RowIDVersion "1".
// Each table records it in the property lakewrite.row-id-version (added on
// the next write of a table that predates it) and each snapshot in its
// summary under the same key. A table recording another version, written
// by a library whose row ids differ, is refused with a *RowIDVersionError
// (errors.Is ErrRowIDVersion) before any file is written: changing the row
// id function is a deliberate migration, never a silent mix of two.
//
// # Provenance, lookup, read-back, parity
//
// The snapshot summary carries lakewrite.txn-id, writer id, workspace,
// source refs (JSON), mode, write id, rows, checksum and the caller's
// metadata as lakewrite.meta.<key>, lakewrite.next-row-index, and, when
// the request reports it (WriteRequest.Rounded), lakewrite.numeric-rounded:
// how many numeric values the producer rounded to their scale. FindTxn
// looks for a txn id at the head snapshot, then in the retained ancestry
// of the current branch (the ledger's sweep/recover; see Lifecycle). Scan streams a
// snapshot (one file task at a time), optionally only the rows within
// column ranges (ScanOptions.Filter, pruned by partition and min/max
// statistics, exact on rows); Checksum and ChecksumBatches give the
// same order-independent fingerprint for an Iceberg snapshot and for Arrow
// batches read from Postgres.
//
// # Lifecycle
//
// A dataset rewritten every few minutes for months must cost the same per
// write, and hold the same storage, in its thousandth week as in its first.
// Each table follows a Lifecycle policy: Config.Lifecycle for every
// dataset, Config.LifecycleFor per dataset. Zero fields are defaults: keep
// the last 10 snapshots (KeepLast; the current one always) and none for
// age (KeepYoungerThan 0); delete what expiry dereferenced 1 minute after
// the expiry (FileGrace); remove unreferenced files older than 1 hour
// (OrphanAge), checking once an hour per table (OrphanEvery); expire in
// batches of 10 (EveryCommits); keep 10 previous metadata files
// (MetadataVersions); compact from 8 small files (CompactMinFiles) below a
// quarter of CompactTargetBytes (Config.TargetFileSize).
//
// Metadata: tables carry write.metadata.delete-after-commit.enabled=true and
// write.metadata.previous-versions-max=MetadataVersions (a table that lacks
// them gets them in its next write's own commit). iceberg-go's commit then
// deletes the metadata.json files it drops from the metadata log, so a
// table holds at most MetadataVersions+1 of them; older ones left from
// before are removed by the orphan pass.
//
// Compaction rewrites small data files (below a quarter of
// CompactTargetBytes) into one snapshot, in __row_index order, keeping
// every row's identity columns and values as they are, one file (or one
// group of files with overlapping row indices) decoded at a time. It is
// size-tiered: taken by rows, smallest first, a file joins the rewrite
// while it is at most twice the rows taken so far, so a row is rewritten
// only when its file grows by half or more: O(log n) rewrites per row over
// the table's history, and O(log n) files left between compactions.
//
// Maintain(ctx, datasetID) runs the policy once (MaintainWith takes an
// explicit one): compaction; deletion of the files of earlier expiries
// whose grace has passed and that no snapshot of the table references
// (data files, manifests, manifest lists; a file already gone is fine);
// the orphan pass when due (iceberg-go's orphan planning over the table
// location, which counts metadata files, the version hint and everything
// the snapshots reach as referenced, minus the files still in their grace);
// then expiry of the snapshots beyond the policy, once EveryCommits of
// them are expirable. Expiry never removes the current snapshot and runs
// without iceberg-go's post-commit file deletion (which deletes at once
// and turns a failed delete into an error of a commit that landed):
// instead the expired snapshots' manifest lists and the expiry time are
// recorded in the table property lakewrite.expired in the same commit as
// the expiry, the record the later deletion works from (its size follows
// the expiries within FileGrace). Lifecycle properties, expiry and record
// land in one commit, asserting the branch head it read. A run reads what
// the retained snapshots reference (bounded by the policy), the manifests
// of the expiries it deletes once, and, on an orphan pass, those still in
// their grace. The MaintenanceReport is returned (JSON, for the ledger)
// and logged.
//
// When: CommitResult.MaintenanceDue is decided from the metadata the
// commit returned, with no extra round trip: EveryCommits snapshots are
// expirable, an expiry is past its grace, the orphan pass is due, or at
// least 2*CompactMinFiles data files were added since the last compaction
// or replace (lakewrite.compact-base in the snapshot summary). A caller that runs Maintain whenever it is true keeps every bound
// flat and runs it on a minority of writes (about 2 in EveryCommits for a
// replace-only dataset: the expiry, then the deletion after the grace).
// Run Maintain (when a commit says it is due, or on a schedule) while
// holding the dataset's ledger intent, as for a write; Lifecycle.Disabled
// turns it all off.
//
// Guaranteed, for a caller that runs Maintain when due: at most
// KeepLast+EveryCommits snapshots (plus those younger than
// KeepYoungerThan), MetadataVersions+1 metadata files whose size follows
// the retained snapshots, and on storage only the retained snapshots'
// files, the files of expiries within their grace, and stray files younger
// than OrphanAge+OrphanEvery. A reader scanning a snapshot keeps its files
// for at least FileGrace after that snapshot is expired: set FileGrace
// above the longest read of a non-current snapshot (downstream engines
// included). OrphanAge must exceed the longest write, whose data files are
// unreferenced until it commits.
//
// Why recovery does not depend on expired snapshots: the ledger allows one
// open intent per dataset, and every lakewrite commit of a dataset, writes
// and Maintain alike, happens under one. So if the snapshot of an open
// intent landed, no other lakewrite commit landed after it: it is the
// head, and expiry never removes the head. FindTxn checks the head first,
// then the retained ancestry, so recovery finds a landed intent whatever
// was expired. A txn outside the retained history is reported absent; the
// ledger needs the lookup only for the open intent, whose outcome it has
// not recorded yet. Append
// replay (in Stage, and in Commit's conflict retry) is the same lookup: a
// retried append whose intent is open finds itself at the head. An
// append's first __row_index comes from the head's summary, and a replace
// plans only the head's live files: no step of a write reads older
// snapshots or older data files. (Appends also skip iceberg-go's duplicate
// check, which read every live manifest: their files are new by
// construction.)
//
// BenchmarkLongHistory measures the facade alone over a long history, with
// the lifecycle on, off and without grace; examples/bench -history measures
// writes through the Dispatcher (figures in the repository's README).
//
// # Backends
//
// New takes any iceberg-go catalog.Catalog. NewPostgresCatalog is the
// embedded default: a catalog on the caller's pgx pool with the tables of
// iceberg-go's SQL catalog (iceberg_tables, iceberg_namespace_properties,
// same columns, catalog_name scoping and namespace encoding), so
// iceberg-go's SQL catalog, the Java JDBC catalog and pyiceberg's SqlCatalog
// read and write the same tables; its commit is the same compare-and-swap
// of metadata_location. It is a TxCatalog: its CommitTableTx swaps the
// pointer inside a caller's transaction, and a facade on it stages
// TxStaged writes whose CommitTx commits into that transaction, next to the
// caller's own statements (writestrategy commits the ledger there: snapshot
// and intent land together, a split pair is one commit). CommitsInTx says
// whether a facade can. OpenSQLCatalog opens iceberg-go's SQL catalog
// (through pgx's database/sql driver, its own connection pool); it commits
// in a transaction of its own, so a ledger commit after it is a second
// transaction. OpenRESTCatalog passes iceberg-go rest options through
// (Lakekeeper, Polaris); S3Properties configures S3-compatible storage (R2,
// MinIO: endpoint, region, path style) for either. Config.Naming maps
// dataset ids to table identifiers (default: namespace "lakewrite", table =
// id, ids limited to [A-Za-z0-9_-]).
//
// The REST path is tested against a REST catalog server written from the
// Iceberg REST OpenAPI specification (internal/restcatalog: OAuth2 client
// credentials, a catalog prefix, commits validated server-side, metadata
// files written by the server, atomic multi-table transactions), through
// iceberg-go's own REST client, on a local warehouse and on an
// S3-compatible bucket (gofakes3): the contract suite runs on both, and
// injected HTTP faults prove the commit outcomes. A 409 is a clean
// conflict (retried). A 5xx or a dropped connection is an unknown outcome:
// reconciled to the landed snapshot when the catalog applied the commit,
// else ErrCommitStateUnknown with the table unchanged and the txn absent
// for FindTxn. A 401, 403 or 419, or a rejected OAuth2 client credential,
// is a *CatalogAuthError (ErrCatalogAuth): the catalog refused the request
// before acting on it, so nothing was committed and a refused commit
// deletes its staged files. With a catalog that commits several tables
// atomically (SupportsAtomicCommit: iceberg-go's REST catalog, PostgresCatalog), CommitAll
// commits the staged writes of several datasets, e.g. a split pair, in one
// transaction. Not exercised here: a real REST service (Lakekeeper,
// Polaris), vended storage credentials, SigV4, and real S3 or R2.
//
// # Memory and ownership
//
// Input batches are borrowed. Batches yielded by Scan are released by the
// facade after the yield (Retain to keep). Config.Allocator serves the
// Arrow memory the facade allocates. Writing holds WriteQueue (2) stamped
// batches plus one Parquet writer's row group buffers per write worker,
// never the table.
//
// # Data files
//
// The facade writes the Parquet files of unpartitioned, unsorted tables
// itself (pqarrow) and describes them for iceberg-go from the writer's
// footer (table.DataFileFromMetadata: counts, sizes, bounds under the
// table's metrics modes, field ids), so that each column gets the layout
// that suits it: __row_index BYTE_STREAM_SPLIT (nearly nothing after
// zstd), __row_id PLAIN without a codec (an incompressible hash: no CPU
// spent compressing it), __created_at a dictionary, decimals of precision
// <= 18 as INT32/INT64, and the business columns the table's codec, level,
// page and dictionary settings. Partitioned, sorted and format v3 tables,
// and tables with bloom-filter or variant-shredding properties, are
// written by iceberg-go's writer. DELTA_BINARY_PACKED would suit __row_index too, but
// arrow-go's decoder does not release a buffer, which an allocator other
// than Go's heap reports as a leak.
//
// # Parallel encoding
//
// Config.WriteWorkers > 1 encodes a write into that many data files in
// parallel: stamping stays on the caller's goroutine and in stream order
// (row ids and checksums do not change), and the stamped batches go to the
// writers in turns of RowGroupRows rows, starting a writer only when the
// stream reaches it. All files land in the one snapshot. It pays when the
// process has cores to spare: BenchmarkWriteReplace1M on two cores,
// workers=1 against workers=2 in the same run, 1.47-1.59M against
// 1.86-2.05M rows/s, with ~30 MiB more heap (TestWriteMemoryBound at
// default settings measures 1 worker). With Postgres on the same two cores
// (examples/bench -write-workers 2) the machine is already CPU-bound and it
// gained nothing, so the default is 1.
//
// # Performance (2-core shared VM, load 3-6: compare within a run)
//
//	go test -run '^$' -bench WriteReplace1M -benchtime=2x ./facade/
//	go test -run TestWriteMemoryBound -v ./facade/
//	go run ./examples/bench -rows 1000000   # end to end against COPY
//
// Replace of 1,048,576 rows of (id int8, name text, amount numeric(12,2),
// ts timestamptz, flag bool, attrs jsonb ~55 B, category text) from
// in-memory batches of 16Ki rows, identity stamping included, zstd level 1,
// alternating runs of the old and new binaries: 0.64-0.72 CPU-s of user
// time per write (0.74-0.90 before the dictionary settings below), 650 MB
// allocated (830 MB) in 1.1M allocations (2.5M). BenchmarkWriteReplace1M
// runs well above the 0.85x target against a plain pqarrow encode of the
// same batches at the same level (which keeps dictionaries on unique
// columns). Peak HeapInuse above baseline while writing, at the default
// GOGC: 93-112 MiB for 1Mi rows, 85-115 MiB for 256Ki rows (flat; 75-78
// MiB at GOGC=50).
//
// Dictionary encoding: __row_id and __row_index are written without a
// dictionary, and so is every top-level business column whose first batch
// is more than half distinct (decided per write; the settings live on the
// staging transaction and are never committed, and a per-column
// write.parquet.dict-encoding-enabled.column.<name> or a
// parquet.enable.dictionary table property takes precedence). Otherwise
// the writer hashes every value until its cost check falls back to PLAIN,
// in every row group. Files of the bench shape are 0.3% larger.
//
// End to end (examples/bench, 1M rows, Postgres on the same VM), client CPU
// of the e2e phase: 1.85-1.92 s against 1.96-2.18 s before, COPY at 0.5 s
// client + 0.75 s server. What is left is mostly outside the facade: zstd
// ~20%, the cursor decode and pgx ~25%, and zeroing of buffers that
// arrow-go's Parquet writer allocates from memory.DefaultAllocator (not
// Config.Allocator: iceberg-go sets no writer allocator), among them a
// decimal scratch buffer sized 128 bytes per value per batch
// (pqarrow.writeDenseArrow: ResizeNoShrink(n * BitWidth()), bits used as
// bytes), ~125 MB per million decimal values.
package facade
