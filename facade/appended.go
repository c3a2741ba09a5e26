package facade

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// ScanAppended reads only the rows that the snapshots carrying txnIDs
// (their lakewrite.txn-id) appended: the change of a window of append
// writes, without reading the rest of the table. It reads them as Scan
// reads the current snapshot (opts.SnapshotID must be 0; Columns,
// ExcludeIdentity and Filter apply).
//
// ok is false, with nothing read, when those data files are not provably
// the window's whole change: a snapshot of txnIDs is not in the current
// branch's retained ancestry (never written there, or expired), or it or
// a later snapshot up to the head is not an append (a replace, a merge,
// a delete or a compaction may have moved or removed rows of the window).
// Read the whole dataset then. An empty txnIDs reads nothing (ok true).
func (f *Facade) ScanAppended(ctx context.Context, datasetID string, txnIDs []string, opts ScanOptions) (rows iter.Seq2[arrow.RecordBatch, error], ok bool, err error) {
	if opts.SnapshotID != 0 {
		return nil, false, fmt.Errorf("%w: ScanAppended reads the current snapshot (SnapshotID %d)", ErrInvalidRequest, opts.SnapshotID)
	}
	if len(txnIDs) == 0 {
		return func(func(arrow.RecordBatch, error) bool) {}, true, nil
	}
	tbl, err := f.LoadTable(ctx, datasetID)
	if errors.Is(err, ErrTableNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	snaps, ok := appendedSnapshots(tbl, txnIDs)
	if !ok {
		return nil, false, nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, false, err
	}
	var tasks []table.FileScanTask
	for _, snap := range snaps {
		mfs, err := snap.Manifests(fs)
		if err != nil {
			return nil, false, fmt.Errorf("facade: read manifests of snapshot %d: %w", snap.SnapshotID, err)
		}
		for _, mf := range mfs {
			if mf.SnapshotID() != snap.SnapshotID {
				continue
			}
			if mf.ManifestContent() != iceberg.ManifestContentData {
				return nil, false, nil // an append adds data files only
			}
			for e, err := range mf.Entries(fs, true) {
				if err != nil {
					return nil, false, fmt.Errorf("facade: read manifest %s: %w", mf.FilePath(), err)
				}
				if e.Status() != iceberg.EntryStatusADDED || e.SnapshotID() != snap.SnapshotID {
					continue
				}
				df := e.DataFile()
				task := table.FileScanTask{File: df, Start: 0, Length: df.FileSizeBytes(), FirstRowID: df.FirstRowID()}
				if seq := e.SequenceNum(); seq >= 0 {
					task.DataSequenceNumber = &seq
				}
				tasks = append(tasks, task)
			}
		}
	}
	opts.SnapshotID = tbl.CurrentSnapshot().SnapshotID
	scan, isc, err := f.planScan(ctx, datasetID, opts)
	if err != nil {
		return nil, false, err
	}
	return func(yield func(arrow.RecordBatch, error) bool) {
		sctx, cancel := context.WithCancel(compute.WithAllocator(ctx, f.s.Allocator))
		defer cancel()
		_, recs, err := scan.ReadTasks(sctx, tasks)
		yieldWithPgMetadata(yield, recs, err, isc, fmt.Sprintf("facade: scan appended rows of %q", datasetID))
	}, true, nil
}

// appendedSnapshots walks the current branch from the head back until it
// has seen the snapshot of every txn id, and returns those snapshots, oldest
// first. ok is false when a snapshot on the way (the head down to the
// oldest of them) is not an append, or when one of the txn ids is not
// found in the retained ancestry.
func appendedSnapshots(tbl *table.Table, txnIDs []string) ([]*table.Snapshot, bool) {
	want := map[string]bool{}
	for _, id := range txnIDs {
		want[id] = true
	}
	var found []*table.Snapshot
	for snap := tbl.CurrentSnapshot(); snap != nil && len(want) > 0; {
		if snap.Summary == nil || snap.Summary.Operation != table.OpAppend {
			return nil, false
		}
		if id := snap.Summary.Properties[SummaryTxnID]; want[id] {
			delete(want, id)
			found = append(found, snap)
		}
		if snap.ParentSnapshotID == nil {
			break
		}
		snap = tbl.SnapshotByID(*snap.ParentSnapshotID)
	}
	if len(want) > 0 {
		return nil, false
	}
	slices.Reverse(found)
	return found, true
}
