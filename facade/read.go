package facade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/lakewrite/lakewrite/facade/internal/identity"
	"github.com/lakewrite/lakewrite/internal/scanfiles"
	"github.com/lakewrite/lakewrite/internal/vocab"
)

// FindTxn looks for the newest snapshot whose summary carries
// lakewrite.txn-id = txnID: the head snapshot first, then the retained
// ancestry of the current branch (bounded by the lifecycle policy, see
// Lifecycle). A missing table is "absent" (found=false, nil error); a table
// that cannot be read is an error, so a caller can tell unknown from
// absent. A txn whose snapshot was expired is reported absent: recovery
// asks only about the open intent of a dataset, whose snapshot, if it
// landed, is the head (see the package doc, Lifecycle).
func (f *Facade) FindTxn(ctx context.Context, datasetID, txnID string) (CommitResult, bool, error) {
	if txnID == "" {
		return CommitResult{}, false, fmt.Errorf("%w: empty txn id", ErrInvalidRequest)
	}
	tbl, err := f.loadWithin(ctx, datasetID)
	if errors.Is(err, ErrTableNotFound) {
		return CommitResult{}, false, nil
	}
	if err != nil {
		return CommitResult{}, false, err
	}
	snap := findInAncestry(tbl, SummaryTxnID, txnID)
	if snap == nil {
		return CommitResult{}, false, nil
	}
	res, err := f.resultFromSnapshot(ctx, tbl, datasetID, snap, true)
	if err != nil {
		return CommitResult{}, false, err
	}
	return res, true, nil
}

// findInAncestry checks the head, then walks its parents while the table
// still holds them: the walk ends at the first expired parent, so it reads
// at most the retained snapshots (metadata already loaded, no I/O).
func findInAncestry(tbl *table.Table, key, value string) *table.Snapshot {
	head := tbl.CurrentSnapshot()
	if head == nil {
		return nil
	}
	if head.Summary != nil && head.Summary.Properties[key] == value {
		return head
	}
	for snap := head; snap.ParentSnapshotID != nil; {
		if snap = tbl.SnapshotByID(*snap.ParentSnapshotID); snap == nil {
			return nil
		}
		if snap.Summary != nil && snap.Summary.Properties[key] == value {
			return snap
		}
	}
	return nil
}

func (f *Facade) resultFromSnapshot(ctx context.Context, tbl *table.Table, datasetID string, snap *table.Snapshot, withFiles bool) (CommitResult, error) {
	props := iceberg.Properties{}
	if snap.Summary != nil {
		props = snap.Summary.Properties
	}
	res := CommitResult{
		TxnID:      props[SummaryTxnID],
		SnapshotID: snap.SnapshotID, CommittedAt: time.UnixMilli(snap.TimestampMs).UTC(),
		Schema: snapshotSchema(tbl, snap), Summary: maps.Clone(map[string]string(props)),
	}
	var err error
	if v, ok := props[vocab.SummaryRows]; ok {
		res.Rows, err = strconv.ParseInt(v, 10, 64)
	} else {
		res.Rows, err = strconv.ParseInt(props["added-records"], 10, 64)
	}
	if err != nil {
		res.Rows = 0
	}
	res.Checksum, _ = parseChecksum(props[vocab.SummaryChecksum])
	if !withFiles {
		return res, nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return CommitResult{}, err
	}
	mfs, err := snap.Manifests(fs)
	if err != nil {
		return CommitResult{}, fmt.Errorf("facade: read manifests of snapshot %d: %w", snap.SnapshotID, err)
	}
	for _, mf := range mfs {
		if mf.SnapshotID() != snap.SnapshotID || mf.ManifestContent() != iceberg.ManifestContentData {
			continue
		}
		for e, err := range mf.Entries(fs, true) {
			if err != nil {
				return CommitResult{}, fmt.Errorf("facade: read manifest %s: %w", mf.FilePath(), err)
			}
			if e.Status() == iceberg.EntryStatusADDED && e.SnapshotID() == snap.SnapshotID {
				df := e.DataFile()
				res.DataFiles = append(res.DataFiles, DataFile{Path: df.FilePath(), Rows: df.Count(), SizeBytes: df.FileSizeBytes()})
			}
		}
	}
	return res, nil
}

func parseChecksum(s string) (Checksum, error) {
	var c Checksum
	rows, hex, ok := strings.Cut(s, ":")
	if !ok || len(hex) != 32 {
		return c, errors.New("bad checksum")
	}
	var err error
	if c.Rows, err = strconv.ParseInt(rows, 10, 64); err != nil {
		return c, err
	}
	if c.Sum, err = strconv.ParseUint(hex[:16], 16, 64); err != nil {
		return c, err
	}
	c.Sum2, err = strconv.ParseUint(hex[16:], 16, 64)
	return c, err
}

func snapshotSchema(tbl *table.Table, snap *table.Snapshot) *arrow.Schema {
	sc := tbl.Schema()
	if snap != nil && snap.SchemaID != nil {
		if s, ok := tbl.Schemas()[*snap.SchemaID]; ok {
			sc = s
		}
	}
	asc, err := table.SchemaToArrowSchema(sc, nil, false, false)
	if err != nil {
		return nil
	}
	return identity.WithPgMetadata(asc, sc)
}

// Scan reads a snapshot of the dataset (see Lakehouse.Scan). Batches carry
// the Postgres types recorded at write time as lakewrite.pg_type metadata.
// Memory is bounded by one data file task at a time.
func (f *Facade) Scan(ctx context.Context, datasetID string, opts ScanOptions) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		tbl, scan, isc, err := f.planTableScan(ctx, datasetID, opts)
		if err != nil {
			yield(nil, err)
			return
		}
		if scan == nil {
			return // a table with no snapshot is empty
		}
		sctx, cancel := context.WithCancel(compute.WithAllocator(ctx, f.s.Allocator))
		defer cancel()
		var recs iter.Seq2[arrow.RecordBatch, error]
		read, conds, extra := splitText(isc, opts)
		switch {
		case conds != nil:
			// Text conditions are applied here (see textCond), to the
			// files the scan with every condition plans.
			var tasks []table.FileScanTask
			// The same table and snapshot as scan: no second catalog load.
			read.SnapshotID = scan.Snapshot().SnapshotID
			rscan, _, err := scanOf(tbl, datasetID, read)
			if err == nil {
				tasks, err = f.planTasks(ctx, datasetID, tbl, scan, isc, opts)
			}
			if err == nil {
				recs, err = readText(sctx, rscan, tasks, conds, extra)
			}
			if err != nil {
				yield(nil, fmt.Errorf("facade: scan %q: %w", datasetID, err))
				return
			}
		case len(opts.In) == 0:
			_, recs, err = scan.ToArrowRecords(sctx)
		default:
			var tasks []table.FileScanTask
			if tasks, err = f.planTasks(ctx, datasetID, tbl, scan, isc, opts); err == nil {
				_, recs, err = scan.ReadTasks(sctx, tasks)
			}
		}
		yieldWithPgMetadata(yield, recs, err, isc, fmt.Sprintf("facade: scan %q", datasetID))
	}
}

// yieldWithPgMetadata yields the batches of a scan (recs, or err when the
// scan could not start) relabeled with the Postgres types of isc
// (lakewrite.pg_type field metadata), releasing each scanned batch. It stops
// at the first error, wrapped as "what: err", or when yield returns false.
func yieldWithPgMetadata(yield func(arrow.RecordBatch, error) bool, recs iter.Seq2[arrow.RecordBatch, error], err error, isc *iceberg.Schema, what string) {
	if err != nil {
		yield(nil, fmt.Errorf("%s: %w", what, err))
		return
	}
	var outSchema *arrow.Schema
	for rec, err := range recs {
		if err != nil {
			yield(nil, fmt.Errorf("%s: %w", what, err))
			return
		}
		if outSchema == nil || !sameFields(outSchema, rec.Schema()) {
			outSchema = identity.WithPgMetadata(rec.Schema(), isc)
		}
		out := array.NewRecordBatch(outSchema, rec.Columns(), rec.NumRows())
		rec.Release()
		more := yield(out, nil)
		out.Release()
		if !more {
			return
		}
	}
}

// planScan builds the iceberg-go scan of opts (nil when the table has no
// snapshot) and the schema of the snapshot it reads.
func (f *Facade) planScan(ctx context.Context, datasetID string, opts ScanOptions) (*table.Scan, *iceberg.Schema, error) {
	_, scan, isc, err := f.planTableScan(ctx, datasetID, opts)
	return scan, isc, err
}

// planTableScan is planScan that also returns the table it loaded.
func (f *Facade) planTableScan(ctx context.Context, datasetID string, opts ScanOptions) (*table.Table, *table.Scan, *iceberg.Schema, error) {
	tbl, err := f.loadWithin(ctx, datasetID)
	if err != nil {
		return nil, nil, nil, err
	}
	scan, isc, err := scanOf(tbl, datasetID, opts)
	return tbl, scan, isc, err
}

// scanOf is planScan on the loaded table tbl.
func scanOf(tbl *table.Table, datasetID string, opts ScanOptions) (*table.Scan, *iceberg.Schema, error) {
	snap := tbl.CurrentSnapshot()
	if opts.SnapshotID != 0 {
		snap = tbl.SnapshotByID(opts.SnapshotID)
		if snap == nil {
			return nil, nil, fmt.Errorf("%w: %d in dataset %q", ErrSnapshotNotFound, opts.SnapshotID, datasetID)
		}
	}
	if snap == nil {
		return nil, nil, nil
	}
	isc := tbl.Schema()
	if snap.SchemaID != nil {
		if s, ok := tbl.Schemas()[*snap.SchemaID]; ok {
			isc = s
		}
	}
	var cols []string
	for _, fld := range isc.Fields() {
		if opts.Columns != nil && !slices.Contains(opts.Columns, fld.Name) {
			continue
		}
		if opts.ExcludeIdentity && identity.IsIdentity(fld.Name) {
			continue
		}
		cols = append(cols, fld.Name)
	}
	for _, c := range opts.Columns {
		if _, ok := isc.FindFieldByName(c); !ok {
			return nil, nil, fmt.Errorf("%w: no column %q in dataset %q", ErrInvalidRequest, c, datasetID)
		}
	}
	scanOpts := []table.ScanOption{table.WithSnapshotID(snap.SnapshotID), table.WithSelectedFields(cols...),
		table.WithMaxConcurrency(1)}
	ins, err := bindIns(isc, opts.In)
	if err != nil {
		return nil, nil, fmt.Errorf("dataset %q: %w", datasetID, err)
	}
	filter, err := filterExpr(isc, opts.Filter, ins)
	if err != nil {
		return nil, nil, fmt.Errorf("dataset %q: %w", datasetID, err)
	}
	if filter != nil {
		scanOpts = append(scanOpts, table.WithRowFilter(filter))
	}
	return tbl.Scan(scanOpts...), isc, nil
}

func bindIns(isc *iceberg.Schema, ins []In) ([]inSet, error) {
	out := make([]inSet, 0, len(ins))
	for _, in := range ins {
		s, err := bindIn(isc, in)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// planTasks plans the files scan reads (of a planTableScan of opts on
// table tbl and schema isc): the data files pruned by partition and statistics, less those no
// value of opts.In can be in.
func (f *Facade) planTasks(ctx context.Context, datasetID string, tbl *table.Table, scan *table.Scan, isc *iceberg.Schema, opts ScanOptions) ([]table.FileScanTask, error) {
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return nil, err
	}
	ins, err := bindIns(isc, opts.In)
	if err != nil {
		return nil, err
	}
	tasks = slices.DeleteFunc(tasks, func(t table.FileScanTask) bool {
		return slices.ContainsFunc(ins, func(s inSet) bool { return !s.set.MayContain(t.File) })
	})
	if opts.ChangedSince == 0 || len(opts.In) == 0 || len(tasks) == 0 {
		return tasks, nil
	}
	old, err := filesBefore(ctx, tbl, scan.Snapshot(), opts)
	if err != nil || old == nil {
		return tasks, err
	}
	n := len(tasks)
	tasks = slices.DeleteFunc(tasks, func(t table.FileScanTask) bool { return old[t.File.FilePath()] })
	f.s.Logger.DebugContext(ctx, "lakewrite key-set scan reads only the files written since a snapshot",
		"dataset", datasetID, "snapshot", opts.ChangedSince, "files", len(tasks), "of", n)
	return tasks, nil
}

// filesBefore returns the data files of tbl live at snapshot opts.ChangedSince,
// which a scan of snapshot snap need not read under the statement of
// opts.ChangedSince, or nil when the writes since then do not allow it
// (see ScanOptions.ChangedSince).
func filesBefore(ctx context.Context, tbl *table.Table, snap *table.Snapshot, opts ScanOptions) (map[string]bool, error) {
	if !keyedSince(tbl, snap, opts.ChangedSince, opts.In) {
		return nil, nil
	}
	tasks, err := scanfiles.Plan(ctx, tbl.Scan(table.WithSnapshotID(opts.ChangedSince)))
	if err != nil {
		return nil, fmt.Errorf("plan the files of snapshot %d: %w", opts.ChangedSince, err)
	}
	old := make(map[string]bool, len(tasks))
	for _, t := range tasks {
		old[t.File.FilePath()] = true
	}
	return old, nil
}

// keyedSince reports whether every snapshot after since up to snap (since
// an ancestor of snap) is a compaction or a merge by a key whose columns
// ins all name, at least one a merge: then no row of a data file live at
// since holds the key of a row one of them added or deleted.
func keyedSince(tbl *table.Table, snap *table.Snapshot, since int64, ins []In) bool {
	merged := false
	for snap != nil && snap.SnapshotID != since {
		var props iceberg.Properties
		if snap.Summary != nil {
			props = snap.Summary.Properties
		}
		switch props[vocab.SummaryMode] {
		case compactMode:
		case string(Replace):
			var key []string
			if json.Unmarshal([]byte(props[vocab.SummaryMergeKey]), &key) != nil || len(key) == 0 {
				return false
			}
			for _, k := range key {
				if !slices.ContainsFunc(ins, func(in In) bool { return in.Column == k }) {
					return false
				}
			}
			merged = true
		default:
			return false
		}
		if snap.ParentSnapshotID == nil {
			return false
		}
		snap = tbl.SnapshotByID(*snap.ParentSnapshotID)
	}
	return merged && snap != nil
}

func sameFields(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.NumFields() {
		if a.Field(i).Name != b.Field(i).Name || !arrow.TypeEqual(a.Field(i).Type, b.Field(i).Type) {
			return false
		}
	}
	return true
}

// Checksum is ChecksumBatches over a snapshot's business columns (0 = the
// current snapshot). An empty table has the zero checksum.
func (f *Facade) Checksum(ctx context.Context, datasetID string, snapshotID int64) (Checksum, error) {
	return ChecksumBatches(f.Scan(ctx, datasetID, ScanOptions{SnapshotID: snapshotID, ExcludeIdentity: true}))
}

// Unchanged reports whether the table of datasetID still holds the rows
// snapshot snapshotID committed: snapshotID is its head, or every
// snapshot after it on the current branch is a "replace" (files rewritten
// without changing a row: a compaction). Otherwise why says what differs:
// no table, another write after it, or a head that does not descend from
// it (the table rolled back, or dropped and created again). A caller that
// patches the rows it wrote last (an incremental recompute) checks this
// first. The snapshot itself may be expired.
func (f *Facade) Unchanged(ctx context.Context, datasetID string, snapshotID int64) (why string, err error) {
	tbl, err := f.loadWithin(ctx, datasetID)
	if errors.Is(err, ErrTableNotFound) {
		return "its table does not exist", nil
	}
	if err != nil {
		return "", err
	}
	for s := tbl.CurrentSnapshot(); ; {
		switch {
		case s == nil:
			return fmt.Sprintf("its table's retained history does not reach snapshot %d (rolled back, dropped and created again, or expired)", snapshotID), nil
		case s.SnapshotID == snapshotID:
			return "", nil
		case s.Summary == nil || s.Summary.Operation != table.OpReplace:
			op := "unknown"
			if s.Summary != nil {
				op = string(s.Summary.Operation)
			}
			return fmt.Sprintf("its table's head is not snapshot %d nor compactions after it (snapshot %d is a %s: a write after it, a rollback or a table created again)", snapshotID, s.SnapshotID, op), nil
		case s.ParentSnapshotID == nil:
			s = nil
		case *s.ParentSnapshotID == snapshotID:
			return "", nil
		default:
			s = tbl.SnapshotByID(*s.ParentSnapshotID)
		}
	}
}
