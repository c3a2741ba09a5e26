package facade

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/lakewrite/lakewrite/facade/internal/identity"
)

// A sliced write across processes. The process that began a SlicedWrite
// (the coordinator) hands its Ref to other processes; each resumes the
// same write with ResumeSliced, writes slices with WriteSlice and returns
// them as bytes (EncodeSlice); the coordinator decodes them (DecodeSlice)
// and stages them with Stage as if written in its own process. Every
// process must use a Facade of the same configuration (catalog, naming,
// compression, layout) over the same warehouse.

// ErrSlicedWriteMoved: a process resuming a sliced write (ResumeSliced)
// finds the table created by someone else since the write began: the
// write would conflict at its commit, so no slice is written.
var ErrSlicedWriteMoved = errors.New("facade: the table of a sliced write was created since the write began")

// SlicedWriteRef identifies a sliced write as plain data (JSON) for
// ResumeSliced: the target, the mode, the request's schema and the
// identity the write stamps on every row.
type SlicedWriteRef struct {
	Target Target    `json:"target"`
	Mode   WriteMode `json:"mode"`
	TxnID  string    `json:"txn_id,omitempty"`
	// Schema is the request's Arrow schema as an Arrow IPC stream.
	Schema []byte `json:"schema"`
	// Metadata is the location of the table metadata the write began on;
	// empty when the write creates the table (catalog of
	// NewPostgresCatalog).
	Metadata string `json:"metadata,omitempty"`
	// RowBase is the write's first __row_index; CreatedAt its one
	// __created_at; WriteID names its files.
	RowBase   int64     `json:"row_base"`
	CreatedAt time.Time `json:"created_at"`
	WriteID   string    `json:"write_id"`
}

// Ref returns the write's identity for ResumeSliced in another process. A
// replay (Replay not nil) has nothing to write and no Ref.
func (w *SlicedWrite) Ref() (SlicedWriteRef, error) {
	if w.replay != nil {
		return SlicedWriteRef{}, fmt.Errorf("%w: the append's txn id already landed (a replay): nothing to write", ErrInvalidRequest)
	}
	var buf bytes.Buffer
	iw := ipc.NewWriter(&buf, ipc.WithSchema(w.req.Schema))
	if err := iw.Close(); err != nil {
		return SlicedWriteRef{}, fmt.Errorf("facade: encode the schema of a sliced write: %w", err)
	}
	return SlicedWriteRef{Target: w.target, Mode: w.req.Mode, TxnID: w.req.TxnID, Schema: buf.Bytes(),
		Metadata: w.tbl.MetadataLocation(), RowBase: w.rowBase, CreatedAt: w.createdAt, WriteID: w.writeID.String()}, nil
}

// ResumeSliced opens, in this process, the sliced write ref identifies
// (from SlicedWrite.Ref in the coordinator's process), to write slices
// with WriteSlice and return them with EncodeSlice. The table is read as
// of the metadata the write began on, so every slice is written for the
// table the coordinator stages on. Its Stage, Abort of other processes'
// slices and Ref behave as the coordinator's; only the coordinator stages.
func (f *Facade) ResumeSliced(ctx context.Context, ref SlicedWriteRef) (*SlicedWrite, error) {
	writeID, err := uuid.Parse(ref.WriteID)
	if err != nil {
		return nil, fmt.Errorf("%w: sliced write id %q: %w", ErrInvalidRequest, ref.WriteID, err)
	}
	if ref.CreatedAt.IsZero() || ref.RowBase < 0 {
		return nil, fmt.Errorf("%w: sliced write with created_at %v and first row index %d", ErrInvalidRequest, ref.CreatedAt, ref.RowBase)
	}
	ir, err := ipc.NewReader(bytes.NewReader(ref.Schema))
	if err != nil {
		return nil, fmt.Errorf("%w: schema of a sliced write: %w", ErrInvalidRequest, err)
	}
	sc := ir.Schema()
	ir.Release()
	ident, err := f.s.Naming(ref.Target.DatasetID)
	if err != nil {
		return nil, err
	}
	req := WriteRequest{Mode: ref.Mode, Schema: sc, TxnID: ref.TxnID, Rows: func(func(arrow.RecordBatch, error) bool) {}}
	if err := validateRequest(req); err != nil {
		return nil, err
	}
	cols, rowIDIdx, createdIdx, err := identity.RequestColumns(sc)
	if err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("%w: no business columns", ErrInvalidRequest)
	}
	w := &SlicedWrite{f: f, target: ref.Target, ident: ident, req: req, cols: cols, rowIDIdx: rowIDIdx, createdIx: createdIdx,
		rowBase: ref.RowBase, createdAt: ref.CreatedAt.UTC(), writeID: writeID}
	err = f.withCatalogWait(ctx, func(ctx context.Context) (err error) {
		w.tbl, w.create, w.createNS, err = f.loadOrCreate(ctx, ref.Target.DatasetID, ident, cols)
		return err
	})
	if err != nil {
		return nil, err
	}
	if cur := w.tbl.MetadataLocation(); cur != ref.Metadata {
		if ref.Metadata == "" {
			return nil, fmt.Errorf("%w: dataset %q", ErrSlicedWriteMoved, ref.Target.DatasetID)
		}
		// The table moved since the write began: write for the metadata
		// the coordinator stages on (its commit detects the move).
		cat, _ := f.cat.(table.CatalogIO)
		tbl, err := table.NewFromLocation(ctx, ident, ref.Metadata, w.tbl.FS, cat)
		if err != nil {
			return nil, fmt.Errorf("facade: metadata %s of a sliced write of %q: %w", ref.Metadata, ref.Target.DatasetID, err)
		}
		w.tbl = tbl
	}
	if err := checkRowIDVersion(ref.Target.DatasetID, w.tbl.Properties()); err != nil {
		return nil, err
	}
	if _, err := f.prepareSchema(w.tbl.NewTransaction(), w.tbl.Schema(), ref.Target.DatasetID, req.Mode, cols); err != nil {
		return nil, err
	}
	return w, nil
}

// encodedSlice is a slice's files as plain data: what SliceFiles holds,
// and its data files as one Avro manifest (format v2) of added entries,
// which carries every statistic the commit records (counts, sizes,
// bounds, partition, split offsets, sort order).
type encodedSlice struct {
	WriteID   string     `json:"write_id"`
	Index     int        `json:"index"`
	First     int64      `json:"first"`
	Rows      int64      `json:"rows"`
	Checksum  Checksum   `json:"checksum"`
	DataFiles []DataFile `json:"data_files"`
	SpecID    int        `json:"spec_id"`
	Manifest  []byte     `json:"manifest"`
}

// EncodeSlice encodes a slice written by w (WriteSlice) as JSON, for
// DecodeSlice in the process that stages the write.
func (w *SlicedWrite) EncodeSlice(p SliceFiles) ([]byte, error) {
	if p.w != w {
		return nil, fmt.Errorf("%w: slice %d is not of this write", ErrInvalidRequest, p.Index)
	}
	out := encodedSlice{WriteID: w.writeID.String(), Index: p.Index, First: p.First, Rows: p.Rows, Checksum: p.Checksum,
		DataFiles: p.DataFiles, SpecID: p.spec.ID()}
	if out.DataFiles == nil {
		out.DataFiles = []DataFile{}
	}
	var entries []iceberg.ManifestEntry
	for _, df := range p.files {
		if df.FirstRowID() != nil || df.ReferencedDataFile() != nil || df.ContentOffset() != nil || df.ContentType() != iceberg.EntryContentData {
			return nil, fmt.Errorf("%w: data file %s of slice %d is not a plain data file", ErrInvalidRequest, df.FilePath(), p.Index)
		}
		if int(df.SpecID()) != p.spec.ID() {
			return nil, fmt.Errorf("%w: data file %s of slice %d has partition spec %d, the slice %d", ErrInvalidRequest, df.FilePath(), p.Index, df.SpecID(), p.spec.ID())
		}
		entries = append(entries, iceberg.NewManifestEntry(iceberg.EntryStatusADDED, nil, nil, nil, df))
	}
	var buf bytes.Buffer
	if _, err := iceberg.WriteManifest("slice.avro", &buf, 2, p.spec, p.schema, -1, entries); err != nil {
		return nil, fmt.Errorf("facade: encode the files of slice %d: %w", p.Index, err)
	}
	out.Manifest = buf.Bytes()
	return json.Marshal(out)
}

// DecodeSlice decodes a slice of w encoded by EncodeSlice (in any
// process that resumed the write): the result stages with w's other
// slices. Data that is not a slice of this write is an ErrInvalidRequest.
func (w *SlicedWrite) DecodeSlice(data []byte) (SliceFiles, error) {
	var in encodedSlice
	if err := json.Unmarshal(data, &in); err != nil {
		return SliceFiles{}, fmt.Errorf("%w: encoded slice: %w", ErrInvalidRequest, err)
	}
	if in.WriteID != w.writeID.String() {
		return SliceFiles{}, fmt.Errorf("%w: slice %d of write %s, not of write %s", ErrInvalidRequest, in.Index, in.WriteID, w.writeID)
	}
	if in.Index < 0 || in.First < 0 || in.Rows < 0 || in.Checksum.Rows != in.Rows {
		return SliceFiles{}, fmt.Errorf("%w: slice %d with first index %d, %d rows, checksum of %d rows", ErrInvalidRequest, in.Index, in.First, in.Rows, in.Checksum.Rows)
	}
	mf := iceberg.NewManifestFile(2, "slice.avro", int64(len(in.Manifest)), int32(in.SpecID), -1).Build()
	entries, err := iceberg.ReadManifest(mf, bytes.NewReader(in.Manifest), false)
	if err != nil {
		return SliceFiles{}, fmt.Errorf("%w: files of slice %d: %w", ErrInvalidRequest, in.Index, err)
	}
	out := SliceFiles{Index: in.Index, First: in.First, Rows: in.Rows, Checksum: in.Checksum, w: w}
	var rows int64
	for _, e := range entries {
		df := e.DataFile()
		out.files = append(out.files, df)
		out.DataFiles = append(out.DataFiles, DataFile{Path: df.FilePath(), Rows: df.Count(), SizeBytes: df.FileSizeBytes()})
		rows += df.Count()
	}
	if rows != in.Rows {
		return SliceFiles{}, fmt.Errorf("%w: slice %d has %d rows in its files, %d declared", ErrInvalidRequest, in.Index, rows, in.Rows)
	}
	return out, nil
}
