package facade

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/lakewrite/lakewrite/facade/internal/identity"
)

// SlicedWrite is one write whose rows arrive as several streams, the
// slices of the output, written concurrently and staged together as one
// snapshot (see "Sliced writes" in the package documentation). Begin it
// with BeginSliced, write each slice with WriteSlice (safe for concurrent
// use), then Stage the slices' files: the Staged commits as one written by
// Stage would. Nothing is visible before that commit; files of slices never
// staged are deleted by Abort, or by the lifecycle's orphan pass when the
// process died.
type SlicedWrite struct {
	f         *Facade
	target    Target
	ident     table.Identifier
	req       WriteRequest
	cols      []identity.Column
	rowIDIdx  int
	createdIx int
	tbl       *table.Table
	create    *postgresCatalog
	createNS  string
	rowBase   int64
	createdAt time.Time
	writeID   uuid.UUID
	replay    *CommitResult
}

// SliceFiles is what WriteSlice wrote for one slice: rows, checksum and
// data files, handed to SlicedWrite.Stage.
type SliceFiles struct {
	Index int
	// First is the __row_index of the slice's first row, relative to the
	// write's first index.
	First    int64
	Rows     int64
	Checksum Checksum
	// DataFiles are the slice's data files (a report; Stage uses its own
	// copy of their statistics).
	DataFiles []DataFile

	w     *SlicedWrite
	files []iceberg.DataFile
	// spec and schema of the staged table the files were written for
	// (EncodeSlice).
	spec   iceberg.PartitionSpec
	schema *iceberg.Schema
}

// BeginSliced begins a sliced write of req (whose Rows is ignored: the
// rows come through WriteSlice): the table is loaded (or, on the catalog of
// NewPostgresCatalog, prepared for creation by the commit) and the schema
// checked, before any slice is written. An append whose txn id already
// landed is a replay: WriteSlice then refuses, and Stage returns the
// earlier result.
func (f *Facade) BeginSliced(ctx context.Context, target Target, req WriteRequest) (*SlicedWrite, error) {
	ident, err := f.s.Naming(target.DatasetID)
	if err != nil {
		return nil, err
	}
	req.Rows = func(func(arrow.RecordBatch, error) bool) {}
	if err := validateRequest(req); err != nil {
		return nil, err
	}
	cols, rowIDIdx, createdIdx, err := identity.RequestColumns(req.Schema)
	if err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("%w: no business columns", ErrInvalidRequest)
	}
	w := &SlicedWrite{f: f, target: target, ident: ident, req: req, cols: cols, rowIDIdx: rowIDIdx, createdIx: createdIdx}
	err = f.withCatalogWait(ctx, func(ctx context.Context) (err error) {
		w.tbl, w.create, w.createNS, err = f.loadOrCreate(ctx, target.DatasetID, ident, cols)
		return err
	})
	if err != nil {
		return nil, err
	}
	if req.Mode == Append && req.TxnID != "" {
		if snap := findInAncestry(w.tbl, SummaryTxnID, req.TxnID); snap != nil {
			res, err := f.resultFromSnapshot(ctx, w.tbl, target.DatasetID, snap, true)
			if err != nil {
				return nil, err
			}
			res.Replayed = true
			w.replay = &res
			return w, nil
		}
	}
	if err := checkRowIDVersion(target.DatasetID, w.tbl.Properties()); err != nil {
		return nil, err
	}
	if _, err := f.prepareSchema(w.tbl.NewTransaction(), w.tbl.Schema(), target.DatasetID, req.Mode, cols); err != nil {
		return nil, err
	}
	if req.Mode == Append {
		if w.rowBase, err = nextRowIndex(ctx, w.tbl); err != nil {
			return nil, err
		}
	}
	w.createdAt = f.s.now().UTC().Truncate(time.Microsecond)
	w.writeID = uuid.New()
	return w, nil
}

// Replay is the earlier result of an append whose txn id already landed
// (nil otherwise): there is nothing to write.
func (w *SlicedWrite) Replay() *CommitResult { return w.replay }

// WriteSlice writes the rows of slice index as data files, stamped as the
// rows of a write whose first __row_index is the write's plus first (so
// __row_id of the slice's rows is that of such a write: see "Sliced
// writes"). Each call encodes on its own (Config.WriteWorkers writers),
// with the memory of one write. A failing stream, an input error or a
// cancelled context deletes the slice's files and returns the error.
func (w *SlicedWrite) WriteSlice(ctx context.Context, index int, first int64, rows iter.Seq2[arrow.RecordBatch, error]) (SliceFiles, error) {
	f := w.f
	if w.replay != nil {
		return SliceFiles{}, fmt.Errorf("%w: the append's txn id already landed (a replay): nothing to write", ErrInvalidRequest)
	}
	if index < 0 || first < 0 {
		return SliceFiles{}, fmt.Errorf("%w: slice %d with first index %d", ErrInvalidRequest, index, first)
	}
	txn := w.tbl.NewTransaction()
	if _, err := f.prepareSchema(txn, w.tbl.Schema(), w.target.DatasetID, w.req.Mode, w.cols); err != nil {
		return SliceFiles{}, err
	}
	rows, stop, firstRec, firstErr := peekFirst(rows)
	defer stop()
	if firstErr == nil {
		if props := stagedWriteProps(firstRec, w.tbl.Properties()); len(props) > 0 {
			if err := txn.SetProperties(props); err != nil {
				return SliceFiles{}, fmt.Errorf("facade: stage writer properties: %w", err)
			}
		}
	}
	if err := f.evolveLayout(txn, w.target.DatasetID); err != nil {
		return SliceFiles{}, err
	}
	if err := f.upgradeFormat(txn, w.target.DatasetID); err != nil {
		return SliceFiles{}, err
	}
	stagedTbl, err := txn.StagedTable()
	if err != nil {
		return SliceFiles{}, fmt.Errorf("facade: stage schema: %w", err)
	}
	writeSchema, err := table.SchemaToArrowSchema(stagedTbl.Schema(), nil, true, false)
	if err != nil {
		return SliceFiles{}, fmt.Errorf("facade: table schema to arrow: %w", err)
	}
	required := map[string]bool{}
	for _, fld := range stagedTbl.Schema().Fields() {
		if fld.Required && !identity.IsIdentity(fld.Name) {
			required[fld.Name] = true
		}
	}
	st := identity.NewStamper(f.s.Allocator, w.target.DatasetID, w.req.Schema, writeSchema, required, w.rowIDIdx, w.createdIx,
		w.rowBase+first, w.createdAt.UnixMicro(), f.s.ordinalSlots)
	// Distinct file names per slice (iceberg-go numbers files per writer).
	id := uuid.NewSHA1(w.writeID, []byte("slice-"+strconv.Itoa(index)))
	files, err := f.writeFiles(ctx, stagedTbl.Table, writeSchema, rows, st, id)
	if err != nil {
		f.deleteFiles(w.tbl, files)
		return SliceFiles{}, err
	}
	out := SliceFiles{Index: index, First: first, Rows: st.Checksum().Rows, Checksum: Checksum(st.Checksum()), w: w, files: files,
		spec: stagedTbl.Spec(), schema: stagedTbl.Schema()}
	for _, df := range files {
		out.DataFiles = append(out.DataFiles, DataFile{Path: df.FilePath(), Rows: df.Count(), SizeBytes: df.FileSizeBytes()})
	}
	return out, nil
}

// Abort deletes the files of slices written but not staged (best effort).
func (w *SlicedWrite) Abort(parts ...SliceFiles) {
	for _, p := range parts {
		if p.w == w {
			w.f.deleteFiles(w.tbl, p.files)
		}
	}
}

// Stage stages the slices' files as one write: one snapshot carrying the
// write's txn id, rows (the slices' sum), checksum (the checksum of all
// their rows) and next row index (one past the last index a slice gave).
// The slices are taken in Index order; an index given twice, or a slice of
// another write, is an ErrInvalidRequest and their files are deleted. The
// returned Staged commits, aborts and reports as Stage's does (a TxStaged
// on the catalog of NewPostgresCatalog).
func (w *SlicedWrite) Stage(ctx context.Context, parts []SliceFiles) (Staged, error) {
	if w.replay != nil {
		res := *w.replay
		return &replayStaged{info: StageInfo{DatasetID: w.target.DatasetID, Rows: res.Rows, DataFiles: res.DataFiles, Replay: &res}}, nil
	}
	parts = slices.Clone(parts)
	slices.SortFunc(parts, func(a, b SliceFiles) int { return a.Index - b.Index })
	var (
		files []iceberg.DataFile
		sum   Checksum
		next  int64
		info  = StageInfo{DatasetID: w.target.DatasetID, WriteID: w.writeID.String(), CreatedAt: w.createdAt}
	)
	for i, p := range parts {
		if p.w != w || (i > 0 && parts[i-1].Index == p.Index) {
			w.Abort(parts...)
			return nil, fmt.Errorf("%w: slice %d given twice or not of this write", ErrInvalidRequest, p.Index)
		}
		files = append(files, p.files...)
		info.DataFiles = append(info.DataFiles, p.DataFiles...)
		sum.Rows, sum.Sum, sum.Sum2 = sum.Rows+p.Checksum.Rows, sum.Sum+p.Checksum.Sum, sum.Sum2+p.Checksum.Sum2
		if p.Rows > 0 {
			next = max(next, p.First+p.Rows)
		}
	}
	info.Rows = sum.Rows
	baseSnapshotID := int64(-1)
	if snap := w.tbl.CurrentSnapshot(); snap != nil {
		baseSnapshotID = snap.SnapshotID
	}
	staged := &icebergStaged{
		f: w.f, target: w.target, ident: w.ident, req: w.req, cols: w.cols, base: w.tbl, rowBase: w.rowBase,
		files: files, info: info, checksum: sum, baseSnapshotID: baseSnapshotID,
		props:  w.f.summary(w.target, w.req, info, sum, w.rowBase, w.tbl.CurrentSnapshot()),
		create: w.create, createNS: w.createNS,
	}
	staged.props[summaryNextRowIndex] = strconv.FormatInt(w.rowBase+next, 10)
	staged.props[summarySlices] = strconv.Itoa(len(parts))
	if tc, ok := w.f.cat.(txCatalog); ok {
		staged.info.CommitsInTx = true
		return &icebergTxStaged{icebergStaged: staged, cat: tc}, nil
	}
	return staged, nil
}

// summarySlices records the number of slices of a sliced write.
const summarySlices = "lakewrite.slices"
