package facade

import (
	"context"
	"iter"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakewrite/lakewrite/facade/internal/identity"
	"github.com/lakewrite/lakewrite/internal/vocab"
)

// WriteMode is the write mode of one write. It is the one write-mode type of
// lakewrite: the ledger records it (ledger.OpenParams.WriteMode, which also
// accepts ledger.Maintenance) and snapshots carry it under "lakewrite.mode".
type WriteMode = vocab.WriteMode

const (
	// Replace writes the whole dataset as one snapshot that replaces the
	// table contents. Idempotent: the same input gives the same contents and
	// the same __row_index/__row_id. Stored as "replace".
	Replace = vocab.Replace
	// Append adds one snapshot with the rows after the current ones. With a
	// TxnID it is idempotent: an append whose txn id already landed returns
	// the earlier commit result and writes nothing. Stored as "append".
	Append = vocab.Append
)

// Identity column names stamped on every row.
const (
	ColRowIndex  = identity.ColRowIndex  // "__row_index", int64: order written; 0..n-1 (replace), on from the next row index (append, rows a merge writes); kept (rows a merge keeps)
	ColRowID     = identity.ColRowID     // "__row_id", int64: hash of dataset id, first index, row content and ordinal among equal rows (see "Identity")
	ColCreatedAt = identity.ColCreatedAt // "__created_at", timestamp[us, UTC]: the write's time (see "Identity")
)

// Snapshot summary keys a reader of a lakewrite snapshot looks up in code
// (the package documentation lists every key lakewrite writes).
const (
	// SummaryTxnID is the ledger transaction id of the write.
	SummaryTxnID = vocab.SummaryTxnID
	// SummaryMetaPrefix prefixes the keys of WriteRequest.Metadata.
	SummaryMetaPrefix = vocab.SummaryMetaPrefix
)

// summaryNextRowIndex is the snapshot summary key of the __row_index the
// next append starts at, after this snapshot: its rows for a replace, the
// append's first index plus its rows for an append. Appends read it from
// the head snapshot (O(1)); a head without it (written before this key
// existed, or by another engine) falls back to the live data files' bounds.
const summaryNextRowIndex = "lakewrite.next-row-index"

// Target names the dataset and the writer of a write.
type Target struct {
	DatasetID string // mapped to a table identifier by Config.Naming
	WriterID  string // e.g. "pipeline.output"
	Workspace string
}

// WriteRequest is one write. Batches are borrowed: a batch yielded by Rows
// is valid during the yield only and stays owned by the producer; the
// facade retains what it keeps. Every batch must have Schema's fields
// (same names, same order, same types).
//
// Identity preservation: Schema may carry nullable __row_id (int64) and/or
// __created_at (timestamp[us, UTC]) columns. A non-null value there is kept
// as the row's identity (e.g. rows kept unchanged by a snapshot_replace
// deploy); a null is stamped as usual. __row_index is always stamped.
type WriteRequest struct {
	Mode   WriteMode
	Schema *arrow.Schema
	Rows   iter.Seq2[arrow.RecordBatch, error]
	// SourceRefs are the upstream dataset ids, recorded in the summary.
	SourceRefs []string
	// Metadata is recorded in the snapshot summary as lakewrite.meta.<key>.
	Metadata map[string]string
	// TxnID is the ledger transaction id, recorded as lakewrite.txn-id.
	TxnID string
	// Rounded, when set, is called once Rows has been read to its end and
	// returns how many values the producer rounded on the way (for a
	// cursor stream, Stream.Rounded); it is recorded as
	// lakewrite.numeric-rounded.
	Rounded func() int64
	// Scope, with Mode Replace, limits the replace to the rows of the
	// table whose Scope.Columns values (NULL equal to NULL) are among
	// Scope.Keys' rows: those rows become the rows of Rows (each of which
	// must fall in the scope: ErrInvalidRequest otherwise); every other
	// row stays as it is. A row of the table equal in every business
	// column to a row of Rows is kept in place (identity columns
	// unchanged) and counted as preserved. One snapshot, merge-on-read or
	// copy-on-write as a merge; an empty Keys batch changes nothing. See
	// "Scoped replace" in the package documentation.
	Scope *Scope
}

// DataFile is one data file written by a write.
type DataFile struct {
	Path      string
	Rows      int64
	SizeBytes int64
}

// CommitResult describes a committed write.
type CommitResult struct {
	TxnID       string
	Rows        int64 // rows written by this write (never a recount)
	SnapshotID  int64
	CommittedAt time.Time // the snapshot's timestamp (ms precision)
	// Schema is the table schema of the snapshot, identity columns included.
	Schema    *arrow.Schema
	DataFiles []DataFile
	// Checksum of the business columns of the rows written (see Checksum).
	// Zero when the result was recovered from a snapshot without one.
	Checksum Checksum
	// Summary is the snapshot summary (lakewrite.* keys and Iceberg's own).
	Summary map[string]string
	// Replayed is true when an append found its txn id already committed
	// and returned that earlier result instead of writing.
	Replayed bool
	// MaintenanceDue is true when the dataset's lifecycle policy has work
	// for Maintain (see Maintainer): decided from the metadata the commit
	// returned, without another round trip. A caller that runs Maintain
	// whenever it is true keeps snapshots, metadata and files bounded, and
	// runs it on a small share of the writes.
	MaintenanceDue bool
}

// StageInfo is what a staged (not yet committed) write has prepared: a
// caller can record it (e.g. in the ledger) before committing.
type StageInfo struct {
	DatasetID string
	WriteID   string // unique id of this attempt, in the snapshot summary
	Rows      int64
	DataFiles []DataFile
	CreatedAt time.Time // the value stamped into __created_at
	// Replay is set when the append's txn id already landed: Commit returns
	// that earlier result and nothing was written.
	Replay *CommitResult
	// CommitsInTx is set when the facade returned the staged write as a
	// TxStaged (its catalog commits into a caller's transaction). A wrapper
	// whose Staged passes Info through but not CommitTx makes it true on a
	// Staged that is not a TxStaged: the one-transaction commit was lost,
	// and package writestrategy refuses the write unless told to accept
	// two commits. See TxStaged for how to wrap without losing it.
	CommitsInTx bool
	// Merge says how a Replace by key (a merge, see the package
	// documentation) changes the table; MergeNone for every other write.
	Merge MergeMode
}

// MergeMode is how a merge by key changes the table (StageInfo.Merge).
type MergeMode string

// The merge modes.
const (
	// MergeNone: not a merge (an append, or a Replace that rewrites the
	// table: no key, a new or empty table, a table it cannot merge into).
	MergeNone MergeMode = ""
	// MergePositionDeletes: merge-on-read on format v2, the removed rows
	// in Parquet position delete files.
	MergePositionDeletes MergeMode = "position_deletes"
	// MergeDeletionVectors: merge-on-read on format v3, the removed rows
	// in deletion vectors.
	MergeDeletionVectors MergeMode = "deletion_vectors"
	// MergeCopyOnWrite: the data files the merge touches are rewritten
	// without the rows it removes.
	MergeCopyOnWrite MergeMode = "copy_on_write"
)

// Staged is a write whose data files are written but not committed.
// Exactly one of Commit or Abort must be called; both are safe to call
// again afterwards (they return ErrAlreadyFinished).
type Staged interface {
	Info() StageInfo
	// Commit swaps the catalog pointer: one snapshot, or an error and
	// nothing visible (ErrCommitConflict: files deleted) or an unknown
	// outcome (ErrCommitStateUnknown: files kept, reconcile with FindTxn).
	Commit(ctx context.Context) (CommitResult, error)
	// Abort deletes the staged files (best effort) and commits nothing.
	Abort(ctx context.Context) error
}

// ScanOptions selects what Scan reads.
type ScanOptions struct {
	// SnapshotID selects a snapshot; 0 means the current one.
	SnapshotID int64
	// Columns projects columns by name; nil means all.
	Columns []string
	// ExcludeIdentity drops __row_index, __row_id and __created_at.
	ExcludeIdentity bool
	// Filter keeps only the rows satisfying every Range (nil: all rows).
	// The Iceberg backend skips the data files no row of which can match
	// (partition and min/max pruning); the rows returned are exact either
	// way. A filter column need not be among Columns.
	Filter []Range
	// In keeps only the rows whose column holds one of the values of
	// every In (a key-set read), pruned and filtered as Filter is.
	In []In
	// ChangedSince, with In, is the caller's statement that it needs only
	// the rows whose values in In's columns are also those of a row added
	// or deleted after snapshot ChangedSince (the affected keys of an
	// incremental recompute, say). The Iceberg backend then reads only the
	// data files written after that snapshot, when it can tell that no
	// older row holds such values: every snapshot since it is a merge by a
	// key whose columns In all names (lakewrite.merge-key) or a
	// compaction, and at least one is a merge. Otherwise, and in other
	// backends, the scan reads as without it. 0: not stated.
	ChangedSince int64
}

// Lakehouse is the write contract of the lakehouse, implemented by *Facade
// (iceberg-go) and by facadetest.Lakehouse (in memory). Downstream code
// depends on this interface.
type Lakehouse interface {
	// Stage writes the data files of one write and prepares its snapshot.
	Stage(ctx context.Context, target Target, req WriteRequest) (Staged, error)
	// Write is Stage followed by Commit (Abort on a staging error).
	Write(ctx context.Context, target Target, req WriteRequest) (CommitResult, error)
	// FindTxn looks for the snapshot whose summary carries txnID: the head
	// first, then the current branch's retained ancestry. found=false with
	// a nil error means absent from the retained history (including: no
	// table); an error means the table could not be read (unknown). The
	// snapshot of a dataset's open ledger intent, if it landed, is the head,
	// which expiry never removes.
	FindTxn(ctx context.Context, datasetID, txnID string) (res CommitResult, found bool, err error)
	// Scan reads a snapshot as Arrow batches in bounded memory. Each batch is
	// valid during the yield only and released by the facade afterwards:
	// Retain it to keep it. The sequence is single-use; errors before
	// streaming (unknown dataset/snapshot) are yielded first.
	Scan(ctx context.Context, datasetID string, opts ScanOptions) iter.Seq2[arrow.RecordBatch, error]
	// Checksum returns the order-independent checksum of the business
	// columns of a snapshot (0 = current), comparable with ChecksumBatches
	// over the same rows from Postgres.
	Checksum(ctx context.Context, datasetID string, snapshotID int64) (Checksum, error)
}
