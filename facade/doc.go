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
// writestrategy.CommitStaged asks its expectations in between). See
// Example.
//
// One write is one Iceberg snapshot, or an error and nothing visible. A
// failing input stream, a cancelled context, a typed input error or a
// failed commit leave the table as it was, and the data files the attempt
// wrote are deleted (best effort; they are never referenced). Exception:
// ErrCommitStateUnknown keeps the files, because the snapshot may
// reference them.
//
// Commits: the facade retries clean conflicts Config.CommitRetries times
// with jittered backoff against the refreshed table. A replace is
// re-planned over the fresh table's files; an append is retried only while
// the table's __row_index still continues at the staged rows' first index
// (else ErrCommitConflict: the caller re-runs the write); an append whose
// txn id landed meanwhile returns that result (Replayed). Any other catalog
// error is reconciled once by looking for the write in the table's
// ancestry; if absent the error is ErrCommitStateUnknown, never retried.
//
// The first write of a dataset creates its table (format v2 unless
// Config.FormatVersionFor says 3, zstd, unpartitioned unless
// Config.PartitionFor declares a Partitioning) from the Arrow schema plus
// the identity columns; a failed first write may
// leave that empty table behind (no snapshot, no rows). Empty input: a
// replace empties the table, an append adds an empty snapshot; both carry
// the txn id.
//
// # Types
//
// Arrow types map to Iceberg types (bool, int8/16/32 -> int, int64 -> long,
// float32/64, decimal128(p,s) -> decimal(p,s), string, binary,
// fixed_size_binary, date32, timestamp[us] -> timestamp, timestamp[us, any
// zone] -> timestamptz, time64[us], list<...>); UUIDs (arrow uuid extension,
// or fixed[16]/string tagged cursor.MetaPGType=uuid) -> uuid. Others are an
// *UnsupportedTypeError. Nullable Arrow fields become optional columns;
// non-nullable ones required, and a NULL in a required column is a
// *NullInRequiredError raised before the batch is written. The Postgres
// type is kept in the Iceberg field doc and returned as cursor.MetaPGType
// ("lakewrite.pg_type") metadata on read (cursor.MetaJSON marks json and
// jsonb).
//
// # Schema evolution
//
// A write evolves the schema in the same snapshot. A type Iceberg can
// promote (int -> long, float -> double, decimal(P,S) -> decimal(P2,S) with
// P2 > P) is changed in place and keeps its field id, for a replace and an
// append alike. A replace changes any other type by dropping the column and
// adding it again under a new field id (it rewrites every row; the column
// lands after the identity columns, as iceberg-go cannot move a re-added
// column); new columns take their place in the write's column order,
// before the identity columns; columns the write leaves out are dropped;
// required columns written nullable become optional. An append adds the
// columns the table lacks as optional columns (the rows already there read
// NULL), writes a narrower type into a wider column, and reads NULL for the
// optional columns it leaves out; an incompatible type or a missing
// required column is a *SchemaMismatchError.
//
// Every committed change is logged at Info and recorded in the snapshot
// summary under lakewrite.schema-change, and the table
// property schema.name-mapping.default follows the current schema.
// Config.SchemaPolicy (or Config.SchemaPolicyFor, per dataset) can refuse a
// replace's drops (RefuseDrops) or incompatible type changes
// (RefuseIncompatible), which fail with a *SchemaChangeError (errors.Is
// ErrSchemaChange), and an append's new columns (RefuseAppendAdds), which
// fail with a *SchemaMismatchError; either way before any data file is
// written.
//
// # Partitioned tables
//
// Config.PartitionFor declares a dataset's Partitioning: identity, year,
// month, day, hour, bucket[N] or truncate[W] fields, optionally a sort
// order. The rows must arrive clustered by partition: order the query by
// WriteOrder (partition keys, then sort keys), as the Dispatcher does; a
// partition key is ordered by the field's value (a bucket[N] key by the
// bucket, OrderKey.Bucket; a time key by its column truncated to the unit,
// OrderKey.Unit; a truncate[W] key by the truncated column,
// OrderKey.Width), which the Dispatcher computes in SQL, so that the sort
// keys order the rows within each partition. The facade does not sort: the declared
// sort order is recorded and the rows are written in the order they come. One
// data file is open at a time, so memory does not grow with the partition
// count; a row returning to a partition that already ended fails the write
// with ErrPartitionOrder, nothing committed. A changed declaration evolves
// the spec and sort order in the next write's snapshot (files already
// written keep their spec). The identity columns and the checksum do not
// depend on the layout. Maintain compacts a partitioned table within each
// partition, and the files of an earlier spec within their own spec and
// partition, so compaction too keeps one file open at a time.
//
// # Identity
//
// Every row carries three identity columns, plain columns to other
// engines (DuckDB, Spark, Trino); the rules below are what a reader may
// rely on, and TestRowIDStableAcrossReplaces and TestRowIndexContract
// check them.
//
// __row_index (long) numbers the rows in the order they were written:
//
//   - A Replace that is no merge (a first write, a merge that falls back
//     to a replace, a replace preserving __row_id and __created_at)
//     numbers its rows 0..n-1 in the order of its stream.
//   - An Append numbers its rows on from the head snapshot's
//     lakewrite.next-row-index (for a head without it, one past the
//     largest __row_index of the live files' statistics).
//   - A merge leaves each row it keeps with its __row_index, and numbers
//     the rows it writes (new keys and changed rows) on from
//     lakewrite.next-row-index, in the order of its stream: over 24 rows
//     numbered 0..23, a merge that changes one row gives it 24 and leaves
//     the others as they were. Merge-on-read and copy-on-write alike.
//   - Compaction keeps every row's __row_index.
//
// lakewrite.next-row-index is then one past the last index a write gave
// (its first index plus the rows it wrote), whether or not that row is
// still live. So __row_index is unique within a snapshot, and an index is
// never given twice until a full replace numbers from 0 again; after a
// merge the indexes have gaps (those of the rows it removed or changed,
// the highest included), so the row count and max(__row_index)+1 can be
// below the next index. Order rows by __row_index (the order written); do
// not take it for a position or count rows with it.
//
// __row_id (long, non-negative) is a 63-bit hash of the dataset id, the
// write's first __row_index (0 for a full replace), the row hash of the
// row's business values (the hash behind Checksum, but with a float -0
// taken as +0: see below) and the row's ordinal: the number of earlier
// rows of the same write with the same row hash.
//
//   - A row whose values occur once in a full replace gets ordinal 0: the
//     same __row_id in every full replace of the dataset that writes
//     those values, whatever the other rows and their order. Of k equal
//     rows, the i-th written gets ordinal i: the group gets the same k ids
//     in every full replace that writes it k times (which of the equal
//     rows gets which follows the order written).
//   - Ids are distinct within a write, and collide across a table only as
//     63-bit hashes do (about n²/2^64 for n rows). An append's ids depend
//     on its first index: equal rows appended by two writes get different
//     ids. The rows a merge writes get their ids as an append at the
//     merge's first index would (a row changed back to earlier values gets
//     a new id); the rows it keeps, and every row compaction moves, keep
//     theirs.
//   - Two rows with different values but one 64-bit row hash (about
//     n²/2^65 for n distinct rows) count as equal rows, and so do two
//     rows that differ only by a float -0 where the other holds +0.
//   - Bound: ordinals are counted exactly, by row hash, in a table of up to
//     2^20 entries (12 MiB at most, grown as needed; memory does not grow
//     with the row count): exact for a write of up to 786,432 distinct
//     rows. Beyond, a row whose values first appear after the table filled
//     is looked up in a 4 MiB Bloom filter of such values: values it has
//     not seen get ordinal 0 as above; values it may have seen (a repeat,
//     or a false positive) get a non-zero ordinal from a counter shared
//     with other values, unique but dependent on the rows before. Of the
//     distinct rows beyond the table, about 1 in 20,000 is numbered so
//     over the first million of them, 1 in 200 over the first four
//     million, 7% over ten million.
//
// __created_at is the write's time taken when staging starts (CommittedAt,
// the snapshot timestamp, is only known at commit). Callers may preserve
// identity: nullable __row_id and __created_at columns in the request keep
// their non-null values (uniqueness is then the caller's).
//
// The row hash behind __row_id is frozen as RowIDVersion "1", recorded in
// the table property and the snapshot summary lakewrite.row-id-version. A
// table recording another version is refused with an error matching
// ErrRowIDVersion (naming the dataset and the version its table records)
// before any file is written: changing the row id function is a deliberate
// migration.
//
// Checksum and the merge's comparison of rows use a row hash that tells
// apart every pair of values the sinks tell apart: NULL from every value
// (the text 'NULL', a JSON null, the empty string, the empty array), an
// array's length and elements, and a float -0 from +0 (Postgres prints -0,
// and the row store keeps it); every NaN is one value, as Postgres prints
// each "NaN". For a row without a float -0 it is the hash behind __row_id.
// __row_id keeps version 1's hash, in which -0 is +0, so the id of no
// existing row changes. No table stores a row hash: a merge hashes the
// live rows it reads and Checksum reads the snapshot, so a table that a
// merge of an earlier library left holding +0 where its source holds -0
// is compared exactly by its next merge, which rewrites that row. Only the
// lakewrite.checksum of snapshots written by earlier libraries differs
// from what Checksum now computes, for rows holding a -0.
//
// # Merges
//
// A Replace over a table with rows whose batches name a key (a batch that
// has the methods MergeKey() []string and MergeDone(preserved int64), as
// package writestrategy's snapshot_replace batches do) is written as a
// merge: the rows are the whole new contents, unique by key, with exactly
// the table's business columns. The facade probes the current snapshot
// file by file (the business columns of each live row are hashed with the
// row hash behind Checksum and dropped at once; existing position deletes
// applied; nothing is kept per row but its key, a key hash, a row hash
// and a position: a key of one integer column as its value, any other key
// as a canonical encoding of its values; while it runs, up to 32 MiB of
// the rows are read ahead, so the source keeps streaming), then streams
// the rows: a row whose key equals a live row's (compared value by value:
// the key hash only chooses where the key is looked for, so keys sharing
// a hash stay distinct) and whose row hash matches that row's is left in
// place (its __row_index, __row_id and
// __created_at with it), every other row is written as a new row, and the
// live rows whose key changed content or is gone get a position delete. One row-delta snapshot
// (merge-on-read: on format v2 one Parquet position delete file per data
// file that loses rows, scoped to it; on v3 deletion vectors, see "Format
// versions") adds both, on the snapshot the probe read:
// a table that moved since is a conflict (ErrCommitConflict), never a
// merge onto other positions. The commit result and summary carry the rows
// and the checksum of the whole new contents, as a replace's do;
// MergeDone receives the rows left in place once the stream is read. A
// table a merge cannot update in place (one with equality deletes, or
// holding a key twice, as after the key was narrowed) is replaced by the
// rows instead, as a Replace that is no merge is (logged at Warn; the
// merge's MergeDone is not called, nothing is preserved), and the next
// merge finds a table unique by its key. A Replace that is no merge
// removes every data file and, with them, every delete file and deletion
// vector.
//
// Merge-on-read or copy-on-write is chosen per write by the share of the
// live rows of the data files the merge touches that it removes (old
// versions of changed rows and keys gone): at or above a fifth on format
// v2 (the crossover measured over 1M rows, a full read after the write
// counted, see examples/bench; on v3, whose deletion vectors cost reads
// little, only a merge that removes all of them), the touched files are
// rewritten instead, their deletes and the merge's applied and every
// identity column (on v3 the row lineage too) kept, in one overwrite
// snapshot that also removes their delete files and deletion vectors and
// adds the new rows; below, the merge writes only the changed rows, and
// the cost of deletes moves to reads. Maintenance bounds that cost: it is
// due once position deletes remove a fifth of the table's stored rows,
// and its compaction rewrites, whatever their size, the data files that
// have deletes (their deletes applied and the delete files removed in the
// same snapshot, every identity column kept). Compaction pins the head it read: a merge that
// lands during a compaction makes the compaction conflict, so a rewrite
// never brings back rows a merge deleted, and a merge planned before a
// compaction conflicts in turn. The probe applies the deletes already
// there, so a position is never deleted twice.
//
// The probe reads and hashes every business column of the live rows; the
// table stores no row hash. A stored 64-bit hash column would let it read
// the key and the hash alone, and was measured against that (a table of a
// bigint key, a text, a numeric(12,2) and a timestamptz column, 1M rows,
// a loaded 2-core machine; BenchmarkProbe1M, BenchmarkHashColumn1M and
// the bench's incremental mode): the probe reading the key and a hash
// column takes 0.07 s of CPU (0.09 s wall) against 0.15 s (0.30 s): at
// most a fifth of the wall time of a snapshot_replace changing 1,000 rows
// (0.9 s) and a sixth of its CPU. But a
// hash does not compress: it adds 8 bytes to every row written, +56% to
// the data files of that table (23.3 MB against 14.9 MB), a few percent
// of CPU to every full write, and a column every other engine sees. A
// merge pays for reading the columns; every write and every reader would
// pay for the hash. Part of the probe's cost is also hidden: it runs while
// the source is read.
//
// # Scoped replace
//
// A Replace with WriteRequest.Scope replaces only the rows of the table
// whose Scope.Columns hold one of Scope.Keys' rows, compared as merge keys
// are (value by value, NULL equal to NULL, integers of any width by
// value): the output of a computation recomputed for a few key values.
// Every row of the request must fall in the scope (ErrInvalidRequest
// otherwise, nothing written), with exactly the table's business columns
// (a type may widen; a column added, dropped or retyped is refused: the
// rows outside the scope are not rewritten). Neither the key nor the rows
// need be unique. Within the scope rows are matched as multisets by the
// row hash behind Checksum (-0 apart from +0): a request row equal to a
// table row not yet matched leaves that row in place (its __row_index,
// __row_id, __created_at and, on v3, its row lineage), counted as
// preserved (MergeDone of the first batch, when it has one); the other
// request rows are written as new rows, their __row_index continuing
// lakewrite.next-row-index; the table rows left unmatched are deleted.
//
// The table is read only as far as the scope needs: a data file whose
// min/max statistics rule out every key value of a scope column (integer,
// date, timestamp and text columns; a partitioned table's files have
// bounds within their partition) is skipped, the scope columns of the
// other files are read to find the rows in the scope, and the business
// columns of the files holding some, hashed for those rows only. A table
// sorted or partitioned by the scope's columns reads few files; an
// unclustered one reads the scope columns of every file.
//
// With Config.ScopeIndexBytes set, a scope over one integer column reads
// a data file once: its rows' keys, positions and row hashes are kept,
// sorted by key (20 bytes a row, within that budget, least recently used
// forgotten first), and the later scoped replaces of the process look
// their keys up there, reading only the file's current deletes. Data
// files never change, so what is kept never goes stale. A process that
// refreshes a few keys of a large table run after run should keep its
// table's rows: a scope of 1,000 random keys of an unclustered table of a
// million rows then costs about 1.4 ms instead of 125 ms to find
// (BenchmarkProbeScope).
//
// The write is one snapshot, built as a merge's (position deletes on v2,
// deletion vectors on v3, or copy-on-write of the touched files past the
// same crossover) on the snapshot it read: a table that moved since is
// ErrCommitConflict. Its commit result and summary carry the rows and the
// checksum of the whole table after it, as a replace's do: the table's
// checksum before the write (the lakewrite.checksum of its last replace,
// merge or scoped replace when only compactions followed it; after an
// append, which records only its rows, or another engine's snapshot, the
// table is read whole once) less the rows deleted plus the rows written.
// An empty Keys batch changes no row and commits an empty snapshot with
// the write's summary (its txn id, for FindTxn). A table with equality
// deletes is refused (ErrInvalidRequest); a new or empty table takes every
// row as new.
//
// # Format versions
//
// Tables are format v2 unless Config.FormatVersionFor declares 3 for a
// dataset: the table is then created as v3, or an existing v2 table is
// upgraded in the commit of its next write (one way: a table is never
// downgraded). On v3:
//
//   - A merge writes its deletes as deletion vectors: one Puffin file per
//     merge, one vector per data file that loses rows. A data file has at
//     most one live vector: a file that already has one (or, after an
//     upgrade, position delete files) gets a new vector holding the old
//     positions and the new, and the merge's snapshot removes the vector
//     it replaces. The old position delete files stay valid (readers
//     ignore them once a vector covers the file) until compaction rewrites
//     the file and removes both.
//   - Row lineage: rows a write adds get the spec's _row_id and
//     _last_updated_sequence_number by inheritance. Rows a merge leaves in
//     place keep both; compaction writes both into the files it writes, so
//     moved rows keep them too; a changed row is a delete and a new row
//     (new _row_id), and a Replace that is no merge gives every row a new
//     one. Rows written before an upgrade get row ids in the first v3
//     snapshot. __row_index, __row_id and __created_at follow their own
//     rules on both versions.
//
// Who reads what. A v2 table, also with position deletes, is read by every
// Iceberg reader, and by DuckDB's read_parquet when the delete files are
// anti-joined (internal/interop). A v3 table needs a v3 reader: iceberg-go
// v0.7.0 applies the deletion vectors and reads the lineage columns
// (tested); engines on the Iceberg Java library read them once their
// release supports the v3 spec (deletion vectors came with Iceberg 1.8;
// not tested here). The DuckDB the interop tests use (1.5.6
// through its Go bindings, which link no Iceberg extension: DuckDB
// downloads it on first use) reads the data files with read_parquet and
// has no Puffin reader, so the rows a deletion vector removed read as live
// (TestDuckDBV3DeletionVectors); whether DuckDB's Iceberg extension
// applies v3 deletion vectors is not tested here. Keep v2 for a dataset
// DuckDB or another reader without v3 support reads; after maintenance
// compacted a v3 table's deletes away its files read right everywhere,
// until the next merge.
//
// The facade never uses iceberg-go's copy-on-write Transaction.Delete or
// filtered Overwrite (which, in v0.7.0, rewrite a file without applying
// its deletes); its copy-on-write writes are compaction, which reads the
// files through their deletes, and a Replace, which writes only its own
// rows: neither brings back a row a delete removed (tested).
//
// # Sliced writes
//
// BeginSliced opens a write whose rows arrive as several streams (slices
// of the output read by several connections, see package writestrategy/sliced);
// SlicedWrite.WriteSlice writes each slice's data files (concurrently,
// each with the memory of one write) and SlicedWrite.Stage stages them all
// as one write, committed as one snapshot like Stage's. A slice given a
// first index k is stamped as the rows of a write whose first __row_index
// is the write's plus k: its rows are numbered from there, and get the
// __row_id such a write gives them (ordinals count equal rows within the
// slice; the first index keeps equal rows of two slices apart). Rows and
// the checksum are those of all slices' rows; lakewrite.next-row-index is
// one past the last index a slice gave; lakewrite.slices records the
// number of slices. A sliced write is never a merge.
//
// The slices may be written in other processes: SlicedWrite.Ref is the
// write's identity as plain data (target, mode, schema, the table
// metadata it began on, first __row_index, __created_at, write id);
// Facade.ResumeSliced opens the same write from it in another process,
// whose WriteSlice stamps the rows as the beginning process would;
// SlicedWrite.EncodeSlice gives a slice's files as JSON (its data files
// as an Avro manifest, every statistic kept) and DecodeSlice, in the
// process that began the write, turns them back into a slice its Stage
// takes. Package writestrategy/sliced/sliceriver runs the slices as River
// jobs this way.
//
// # Provenance, lookup, read-back, parity
//
// Every snapshot the facade commits carries these summary keys, which
// other engines (DuckDB, Spark, Trino) read by their string; in Go,
// SummaryTxnID and SummaryMetaPrefix name the two a reader usually needs:
//
//	lakewrite.txn-id            ledger transaction id (SummaryTxnID)
//	lakewrite.writer-id         Target.WriterID
//	lakewrite.workspace         Target.Workspace
//	lakewrite.source-refs       WriteRequest.SourceRefs, a JSON array
//	lakewrite.mode              "replace", "append" or "compact"
//	lakewrite.write-id          unique id of the staged write
//	lakewrite.created-at        the __created_at stamp, RFC 3339
//	lakewrite.rows              rows written
//	lakewrite.checksum          Checksum of the rows written: rows:32 hex digits
//	lakewrite.row-id-version    RowIDVersion of the row ids written
//	lakewrite.numeric-rounded   numeric values rounded (WriteRequest.Rounded), when reported
//	lakewrite.schema-change     the schema change, JSON, when there was one
//	lakewrite.merge-key         a merge's key columns, a JSON array (see Merges)
//	lakewrite.next-row-index    __row_index the next append starts at
//	lakewrite.compact-base      data files after the last compaction
//	lakewrite.slices            slices of a sliced write (SlicedWrite)
//	lakewrite.meta.<key>        WriteRequest.Metadata (SummaryMetaPrefix)
//
// A compaction snapshot carries only the mode, write id, next row index
// and compact base. The next row index is the table's rows after a
// replace, the append's first index plus its rows after an append.
// lakewrite.schema-change is a JSON object whose fields, each present
// only when not empty, are arrays of column names: "added" (new field
// ids), "dropped", "promoted" (type widened in place, field id kept),
// "retyped" (incompatible new type, new field id), "relaxed" (required to
// optional), and "reordered": true when the kept columns changed their
// relative order.
//
// FindTxn looks for a txn id at the head snapshot, then in the retained
// ancestry of the current branch (the ledger's recovery uses it; see
// ExampleFacade_FindTxn). Unchanged tells whether a table still holds the
// rows a snapshot committed (the head, or only compactions after it): an
// incremental recompute, which patches the rows its last run wrote, asks
// it before patching. Scan streams a snapshot
// (one file task at a time, projected by ScanOptions), optionally only the
// rows within column ranges (ScanOptions.Filter: files are skipped by
// partition and min/max statistics, the rows returned are exact) or whose
// column holds one of a set of values (ScanOptions.In, a key-set read:
// a file is read only when a value of the set falls within its bounds or
// partition, for any number of values; it reads few files when the table
// is partitioned or sorted by the column, and every file when the values
// are spread over an unclustered one).
// ScanAppended reads only the rows the append snapshots of given txn ids
// added (a delta reader's window), and declines (ok false) unless the
// table holds them, and everything after them, as appends; Checksum and
// ChecksumBatches give the same order-independent fingerprint for an
// Iceberg snapshot and for Arrow batches read from Postgres.
//
// # Changes
//
// Changes (ChangeReader) yields the rows that changed between two
// snapshots of a dataset, from its metadata and files: each snapshot
// after from, up to to, is read through the manifests it wrote. Rows of
// added data files are new images; the rows a removed data file held live
// before its snapshot (its earlier deletes applied), and the rows at the
// positions of added position delete files and deletion vectors (less the
// positions already deleted, so a vector that supersedes another yields
// only its new positions), are old images (Removed). Only the named
// columns of the files a snapshot touched are read (every business column
// where it removed data files, for the cancelling below): a merge on read
// costs a read of those columns of the data files it deleted rows from
// and of the files it added. With Config.ScopeIndexBytes set, the integer
// columns read from a file to report its deleted rows are kept, so the
// next merge's deletes on the same large file are picked from memory.
// A compaction (an Iceberg "replace" snapshot) yields nothing. In a
// snapshot that removes data files and adds others (a copy-on-write
// merge, a Replace), a removed row and an added row with the same
// __row_id and business values cancel out, so a copy-on-write merge
// yields the rows it changed, not the rows its rewrite carried; this
// holds 17 bytes per live row of the removed files, and beyond 4,194,304
// such rows in one snapshot the rows are reported without cancelling
// (each unchanged row as an equal old and new image). A row added and
// removed within the window comes as both images. A history it cannot
// read exactly (from expired or not an ancestor of to, a manifest or file
// gone, equality deletes, a delete file removed without its data file) is
// an error matching ErrChangesUnknown: read the table whole then.
//
// # Lifecycle
//
// A dataset rewritten every few minutes for months keeps the same cost per
// write and the same storage. Each table follows a Lifecycle policy:
// Config.Lifecycle for every dataset, Config.LifecycleFor per dataset,
// Lifecycle.Disabled to turn it off. Zero fields are defaults: keep the
// last 10 snapshots (KeepLast) and none for age (KeepYoungerThan); delete
// what expiry dereferenced 1 minute after the expiry (FileGrace); remove
// unreferenced files older than 1 hour (OrphanAge), checking once an hour
// per table (OrphanEvery); expire in batches of 10 (EveryCommits); keep 10
// previous metadata files (MetadataVersions); compact from 8 small files
// (CompactMinFiles) below a quarter of CompactTargetBytes
// (Config.TargetFileSize).
//
// Maintain(ctx, datasetID) runs the policy once (MaintainWith takes an
// explicit one): size-tiered compaction (in __row_index order, every row's
// identity kept, within each partition of the current spec), deletion of
// the files of earlier expiries whose grace has passed, the orphan pass
// when due, then expiry of the snapshots beyond the policy. It returns a
// MaintenanceReport (JSON, for the ledger). CommitResult.MaintenanceDue
// says when a run has work, decided from the commit's own metadata; run
// Maintain then (or on a schedule) while holding the dataset's ledger
// intent, as for a write. The Dispatcher does this after its writes.
//
// Guaranteed, for a caller that runs Maintain when due: at most
// KeepLast+EveryCommits snapshots (plus those younger than
// KeepYoungerThan), MetadataVersions+1 metadata files, and on storage only
// the retained snapshots' files, the files of expiries within their grace,
// and stray files younger than OrphanAge+OrphanEvery. A file a snapshot
// still in its grace may read (the table's snapshots, and the snapshots
// expired less than FileGrace ago) is never deleted, even when an earlier
// expiry whose grace has passed listed it too. A file of an expired
// snapshot already gone counts as deleted, so maintenance never stops for
// good on one; a file that cannot be read keeps what it could reference for
// a later run, the expiry still commits, and Maintain returns the error.
// Set FileGrace above the longest read of a non-current snapshot
// (downstream engines included), and OrphanAge above the longest write,
// whose data files are unreferenced until it commits.
//
// Recovery does not depend on expired snapshots: the ledger allows one
// open intent per dataset, and every lakewrite commit of a dataset, writes
// and Maintain alike, happens under one. So if the snapshot of an open
// intent landed, it is the head, and expiry never removes the head; FindTxn
// checks the head first. Append replay is the same lookup. No step of a
// write reads older snapshots or older data files.
//
// # Backends
//
// New takes any iceberg-go catalog.Catalog.
//
//   - NewPostgresCatalog, the embedded default: a catalog on the caller's
//     pgx pool with the tables of iceberg-go's SQL catalog
//     (iceberg_tables, iceberg_namespace_properties), so iceberg-go's SQL
//     catalog, the Java JDBC catalog and pyiceberg's SqlCatalog read and
//     write the same tables. A facade on it stages TxStaged writes whose
//     CommitTx commits into the caller's transaction, next to its own
//     statements (writestrategy commits the ledger there: snapshot and
//     intent land together); StageInfo.CommitsInTx says whether a staged
//     write does.
//   - OpenSQLCatalog: iceberg-go's SQL catalog (its own database/sql pool),
//     committing in a transaction of its own.
//   - OpenRESTCatalog: iceberg-go's REST catalog (Lakekeeper, Polaris),
//     options passed through. A 409 is a retried conflict; a 5xx or a
//     dropped connection is reconciled or ErrCommitStateUnknown; a 401,
//     403 or 419, or a rejected OAuth2 credential, is an error matching
//     ErrCatalogAuth (and the REST client's own) with nothing committed.
//
// S3Properties configures S3-compatible storage (S3, R2, MinIO: endpoint,
// region, path style, credentials) for any of them, with an s3://
// warehouse; the program registers the s3 scheme by importing iceberg-go's
// gocloud IO (import _ "github.com/apache/iceberg-go/io/gocloud/s3"). With
// a catalog that commits several tables atomically (SupportsAtomicCommit:
// REST, NewPostgresCatalog), CommitAll commits the staged writes of several
// datasets, e.g. a split pair, in one transaction. Config.Naming maps
// dataset ids to table identifiers (default: namespace "lakewrite", table =
// id, ids limited to [A-Za-z0-9_-]). The REST path is tested through
// iceberg-go's REST client against a server written from the Iceberg REST
// specification, on a local warehouse and an S3-compatible fake; not
// exercised: a real REST service, vended storage credentials, SigV4, and
// real S3 or R2.
//
// # Memory and ownership
//
// Input batches are borrowed. Batches yielded by Scan are released by the
// facade after the yield (Retain to keep). Config.Allocator serves the
// Arrow memory the facade allocates. Writing holds WriteQueue (2) stamped
// batches plus one Parquet writer's row group buffers per write worker,
// never the table: memory is flat in the row count.
//
// # Data files
//
// The facade writes the Parquet files of unpartitioned, unsorted tables
// itself (pqarrow) and describes them for iceberg-go from the writer's
// footer (table.DataFileFromMetadata: counts, sizes, bounds under the
// table's metrics modes, field ids), so that each column gets the layout
// that suits it: __row_index PLAIN under the table's codec, __row_id PLAIN
// without a codec (an incompressible hash: no CPU spent compressing it),
// __created_at a dictionary, decimals of precision <= 18 as INT32/INT64,
// and the business columns the table's codec, level, page and dictionary
// settings, on format v2 and v3 alike (a v3 file holds no lineage
// columns: its rows inherit them). Compaction and copy-on-write merges
// rewrite such a table's files with the same writer and settings, so a
// rewritten file has the layout and statistics of a written one (on v3 it
// also carries the rows' _row_id and _last_updated_sequence_number, as the
// spec asks of a rewrite; _row_id without a dictionary). Partitioned and
// sorted tables, and tables with bloom-filter or variant-shredding
// properties, are written, compacted and rewritten by iceberg-go's writer.
//
// Every data file, from either writer, is meant to be read by the engines
// users query the tables with. Each choice of the facade's writer and the
// readers' support, in the releases of the last two years (DuckDB 1.1+,
// parquet-java 1.13+ as used by Spark, Trino and Flink, Iceberg Java's
// vectorized reader 1.4+, Arrow C++/PyArrow 14+, arrow-rs 50+):
//
//	choice                          DuckDB  parquet-java  Iceberg vect.  Arrow C++  arrow-rs
//	PLAIN, dictionary (RLE_DICT.)   yes     yes           yes            yes        yes
//	DataPageV2 (iceberg-go default; yes     yes           yes (0.12+,    yes        yes
//	  write.parquet.page-version=1          plain/dict)
//	  gives V1, Iceberg Java's)
//	decimal(p<=18) as INT32/INT64   yes     yes           yes            yes        yes
//	min/max statistics, null counts yes     yes           -              yes        yes
//	zstd (default), snappy, gzip    yes     yes           yes            yes        yes
//	DELTA_BINARY_PACKED (opt-in)    yes     yes           1.10+ only     yes        yes
//	BYTE_STREAM_SPLIT int (opt-in)  no      1.14+         2026+ only     16+        53+
//
// So the default writes only PLAIN and dictionary encodings, the two
// encodings every reader above has always taken; PropertyRowIndexEncoding
// opts __row_index into the smaller encodings and names the readers that
// refuse them. The module internal/interop proves the default by reading
// every kind of table the library writes with DuckDB and comparing each
// value with Postgres. arrow-go's DELTA_BINARY_PACKED decoder does not
// release a 64-byte buffer per column reader, which an allocator other than
// Go's heap reports (or, for a C allocator, keeps) on read-back.
//
// Pages default to 64 KiB of values, checked every 512 values (the table
// properties write.parquet.page-size-bytes and write.parquet.page-row-limit
// override them), rather than iceberg-go's 1 MiB checked every 20,000
// values: a page that fits one zstd block (128 KiB) is compressed without
// the 16 MiB history window a larger page makes each zstd encoder
// allocate. This applies to every write and compaction, whichever writer
// encodes the files.
//
// # Parallel encoding
//
// Config.WriteWorkers > 1 encodes a write into that many data files in
// parallel (stamping stays in stream order, so row ids and checksums do
// not change; all files land in the one snapshot). It pays when the
// process has cores to spare, not when Postgres shares them; the default
// is 1. Config.CompressionLevel trades file size for CPU (default zstd
// level 1). Row ids, row indices and business columns whose first batch is
// mostly distinct are written without a Parquet dictionary; a
// write.parquet.dict-encoding-enabled.column.<name> or
// parquet.enable.dictionary table property takes precedence.
//
// Measured figures (write throughput, memory, long histories) and the
// commands that reproduce them are in the repository README's Performance
// section.
package facade
