package facade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/lakewrite/lakewrite/facade/internal/identity"
	"github.com/lakewrite/lakewrite/internal/scanfiles"
	"github.com/lakewrite/lakewrite/internal/vocab"
)

// mergeRows is implemented by the batches of a Replace that asks to be
// written as a merge by key (see "Merges" in the package documentation):
// MergeKey names the key columns, MergeDone receives, once the stream
// has been read, how many rows were left in place.
type mergeRows interface {
	MergeKey() []string
	MergeDone(preserved int64)
}

// errMergeShape: the table holds something a merge cannot update in place.
var errMergeShape = errors.New("facade: merge")

// mergeEntry is one live row of the target, as the probe found it.
type mergeEntry struct {
	hash  uint64 // the row hash of its business columns
	khash uint64 // the row hash of its key columns
	key   uint64 // its key, exactly (see mergeKeys)
	pos   int64  // position in its data file
	file  int32  // index into mergePlan.files
	knull bool   // its key is NULL (an integer key, see mergeKeys)
	seen  bool   // an output row has the same key
	keep  bool   // ... and the same row hash: left in place
}

// mergePlan is the probe of a merge's target and what the merge found:
// the live rows by key, then the rows the merge keeps, writes and deletes.
type mergePlan struct {
	key     []string
	files   []iceberg.DataFile
	tasks   []table.FileScanTask // the scan task of each of files
	entries []mergeEntry         // in the order the probe read them
	keys    mergeKeys            // the entries' keys
	byKey   keyIndex
	// next is the entry after the one the last output row matched: the
	// output mostly comes in the target's order (unchanged rows stay in
	// place), so the next row's entry is tried there before the index.
	next int

	// dead holds, for the data files that already have deletes, the
	// positions they remove (a v3 merge carries them into the file's
	// new deletion vector), and olds those delete files.
	dead map[int32]map[int64]bool
	olds map[int32][]iceberg.DataFile
	// superseded are the live deletion vectors that the deletion vectors
	// written by writeDeletes replace (removed in the merge's snapshot).
	superseded []iceberg.DataFile
	// cow is the copy-on-write of the merge, when it rewrites the files
	// it touches (see copyOnWrite); nil for merge-on-read.
	cow *cowRewrite
	// scope: the plan is a scoped replace's (see probeScope); its entries
	// are the in-scope rows only, and it has no keys.
	scope *scopePlan

	rows      int64 // output rows
	written   int64 // output rows written (new or changed)
	preserved int64 // output rows left in place
	sum       identity.Checksum
}

// probeMerge reads the live rows of tbl's current snapshot: the key hash,
// the row hash and the position of each, file by file, existing position
// deletes and deletion vectors applied. Tables with equality deletes, and
// targets holding a key twice, are refused (errMergeShape).
func (f *Facade) probeMerge(ctx context.Context, tbl *table.Table, key []string, reqSchema *arrow.Schema) (*mergePlan, error) {
	// The rows are hashed over the request's business columns, which the
	// table must have: a column the table holds beyond them (one an
	// earlier schema kept) is not part of the comparison.
	var business []string
	for _, fld := range reqSchema.Fields() {
		if identity.IsIdentity(fld.Name) {
			continue
		}
		if _, ok := tbl.Schema().FindFieldByName(fld.Name); !ok {
			return nil, fmt.Errorf("%w: merge: column %q is not a column of the table", ErrInvalidRequest, fld.Name)
		}
		business = append(business, fld.Name)
	}
	for _, k := range key {
		if !slices.Contains(business, k) {
			return nil, fmt.Errorf("%w: key column %q is not a column of the table", ErrInvalidRequest, k)
		}
	}
	snap := tbl.CurrentSnapshot()
	scan := tbl.Scan(table.WithSnapshotID(snap.SnapshotID), table.WithSelectedFields(business...))
	tasks, err := scanfiles.Plan(ctx, scan)
	if err != nil {
		return nil, fmt.Errorf("facade: merge: plan files: %w", err)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("facade: merge: %w", err)
	}
	p := &mergePlan{key: key, keys: mergeKeys{cols: key, hash: f.s.keyHash}, dead: map[int32]map[int64]bool{}, olds: map[int32][]iceberg.DataFile{}}
	var rows int64
	for _, t := range tasks {
		rows += t.File.Count()
	}
	p.entries = make([]mergeEntry, 0, min(rows, 1<<31-1))
	var h, kh []uint64
	for _, t := range tasks {
		if len(t.EqualityDeleteFiles) > 0 {
			return nil, fmt.Errorf("%w: data file %s has equality deletes", errMergeShape, t.File.FilePath())
		}
		dead, err := f.deletedPositions(ctx, fs, t)
		if err != nil {
			return nil, err
		}
		fi := int32(len(p.files))
		p.files, p.tasks = append(p.files, t.File), append(p.tasks, t)
		if len(dead) > 0 {
			p.dead[fi], p.olds[fi] = dead, slices.Concat(t.DeleteFiles, t.DeletionVectorFiles)
		}
		whole := t
		whole.DeleteFiles, whole.DeletionVectorFiles = nil, nil // positions count every row of the file
		_, recs, err := scan.ReadTasks(ctx, []table.FileScanTask{whole})
		if err != nil {
			return nil, fmt.Errorf("facade: merge: read %s: %w", t.File.FilePath(), err)
		}
		var pos int64
		for rec, err := range recs {
			if err != nil {
				return nil, fmt.Errorf("facade: merge: read %s: %w", t.File.FilePath(), err)
			}
			if h, err = identity.RowHashes(rec, h); err == nil {
				kh, err = p.keys.batch(rec, kh)
			}
			for i := 0; i < len(h) && err == nil; i++ {
				if dead[pos] {
					pos++
					continue
				}
				e := mergeEntry{hash: h[i], khash: kh[i], file: fi, pos: pos}
				if a := p.keys.i64; a != nil { // the common key, without calls
					e.key, e.knull = uint64(a.Value(i)), a.IsNull(i)
				} else {
					var k probeKey
					if k, err = p.keys.at(i); err == nil {
						err = p.keys.store(&e, k)
					}
				}
				p.entries = append(p.entries, e)
				pos++
			}
			rec.Release()
			if err != nil {
				return nil, err
			}
		}
	}
	if p.byKey, err = buildKeyIndex(p.entries, &p.keys); err != nil {
		return nil, err
	}
	return p, nil
}

// deletedPositions reads the positions of t's data file that its position
// delete files and its deletion vector remove. The positions of a
// position delete file are taken from the scope index cache when it holds
// them (deletePositions).
func (f *Facade) deletedPositions(ctx context.Context, fs iceio.IO, t table.FileScanTask) (map[int64]bool, error) {
	dead := map[int64]bool{}
	path := t.File.FilePath()
	if err := readDeletionVectors(fs, t, dead); err != nil {
		return nil, err
	}
	for _, df := range t.DeleteFiles {
		if df.ContentType() != iceberg.EntryContentPosDeletes || df.FileFormat() != iceberg.ParquetFile {
			return nil, fmt.Errorf("%w: delete file %s is not a Parquet position delete file", errMergeShape, df.FilePath())
		}
		id := deletesID(df.FilePath(), path)
		pos, ok := f.keys.Get(id).(deletePositions)
		if !ok {
			var err error
			if pos, err = readPositionDeletes(ctx, fs, df.FilePath(), path); err != nil {
				return nil, err
			}
			f.keys.Put(id, pos)
		}
		for _, p := range pos {
			dead[p] = true
		}
	}
	return dead, nil
}

// deletePositions is what the scope index cache keeps of a position
// delete file: the positions it removes from one data file. A delete
// file never changes once written, so they never go stale. The facade
// keeps those of the delete files it writes and reads: a table merged
// run after run gains delete files on its data files until compaction,
// and each merge's probe would read them all again.
type deletePositions []int64

// Bytes is the memory the positions hold.
func (d deletePositions) Bytes() int64 { return int64(len(d))*8 + 64 }

// deletesID is the cache id of the positions delete file deletes removes
// from data file dataPath.
func deletesID(deletes, dataPath string) string {
	return "\x01deletes\x00" + deletes + "\x00" + dataPath
}

// readPositionDeletes returns the positions of data file dataPath that
// position delete file deletes removes.
func readPositionDeletes(ctx context.Context, fs iceio.IO, deletes, dataPath string) (deletePositions, error) {
	fh, err := fs.Open(deletes)
	if err != nil {
		return nil, fmt.Errorf("facade: merge: open %s: %w", deletes, err)
	}
	defer fh.Close()
	pr, err := file.NewParquetReader(fh)
	if err != nil {
		return nil, fmt.Errorf("facade: merge: read %s: %w", deletes, err)
	}
	defer pr.Close()
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("facade: merge: read %s: %w", deletes, err)
	}
	tbl, err := fr.ReadTable(ctx)
	if err != nil {
		return nil, fmt.Errorf("facade: merge: read %s: %w", deletes, err)
	}
	defer tbl.Release()
	sc := tbl.Schema()
	pi, ps := sc.FieldIndices("file_path"), sc.FieldIndices("pos")
	if len(pi) != 1 || len(ps) != 1 {
		return nil, fmt.Errorf("%w: %s has no file_path and pos columns", errMergeShape, deletes)
	}
	out := deletePositions{}
	paths, poss := tbl.Column(pi[0]).Data().Chunks(), tbl.Column(ps[0]).Data().Chunks()
	for c := range paths {
		pa, ok1 := paths[c].(*array.String)
		po, ok2 := poss[c].(*array.Int64)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%w: %s: unexpected column types", errMergeShape, deletes)
		}
		for i := 0; i < pa.Len(); i++ {
			if pa.Value(i) == dataPath {
				out = append(out, po.Value(i))
			}
		}
	}
	return out, nil
}

// filter classifies the output rows against the probe and yields only the
// rows to write (new keys, changed rows); it checksums and counts every
// output row, and reports the rows left in place to done once the rows
// are read to the end.
func (p *mergePlan) filter(ctx context.Context, rows iter.Seq2[arrow.RecordBatch, error], done func(int64)) iter.Seq2[arrow.RecordBatch, error] {
	if p.scope != nil {
		return p.scopeFilter(ctx, rows, done)
	}
	return func(yield func(arrow.RecordBatch, error) bool) {
		var h, kh []uint64
		mask := array.NewBooleanBuilder(memory.DefaultAllocator)
		defer mask.Release()
		for rec, err := range rows {
			if err != nil {
				yield(nil, err)
				return
			}
			var herr error
			if h, herr = identity.RowHashes(rec, h); herr == nil {
				kh, herr = p.keys.batch(rec, kh)
			}
			if herr != nil {
				yield(nil, herr)
				return
			}
			p.sum.Add(h)
			p.rows += int64(len(h))
			write := 0
			for i := range h {
				keep := false
				k, err := p.keys.at(i)
				if err != nil {
					yield(nil, err)
					return
				}
				j := p.next
				if j >= len(p.entries) || p.entries[j].khash != kh[i] || !p.keys.equal(&p.entries[j], k) {
					j = p.byKey.find(p.entries, &p.keys, kh[i], k)
				}
				if j >= 0 {
					p.next = j + 1
					e := &p.entries[j]
					if e.seen {
						yield(nil, fmt.Errorf("%w: the rows hold a key twice", ErrInvalidRequest))
						return
					}
					e.seen, e.keep = true, e.hash == h[i]
					keep = e.keep
				}
				mask.Append(!keep)
				if !keep {
					write++
				}
			}
			p.preserved += int64(len(h) - write)
			p.written += int64(write)
			if !yieldMasked(ctx, rec, mask, write, yield) {
				return
			}
		}
		done(p.preserved)
	}
}

// yieldMasked yields the rows of rec that mask (one value per row, taken
// from the builder) marks, write of them: nothing, rec itself, or a
// filtered copy. It reports whether to go on.
func yieldMasked(ctx context.Context, rec arrow.RecordBatch, mask *array.BooleanBuilder, write int, yield func(arrow.RecordBatch, error) bool) bool {
	m := mask.NewBooleanArray()
	defer m.Release()
	switch write {
	case 0:
		return true
	case int(rec.NumRows()):
		return yield(rec, nil)
	}
	out, err := compute.FilterRecordBatch(ctx, rec, m, compute.DefaultFilterOptions())
	if err != nil {
		yield(nil, fmt.Errorf("facade: merge: %w", err))
		return false
	}
	defer out.Release()
	return yield(out, nil)
}

// deletes returns, per data file (index into p.files), the sorted
// positions the merge removes: the old versions of changed rows and the
// rows whose key the output no longer holds. Call it after filter.
func (p *mergePlan) deletes() map[int32][]int64 {
	out := map[int32][]int64{}
	for _, e := range p.entries {
		if e.keep {
			continue
		}
		out[e.file] = append(out[e.file], e.pos)
	}
	for _, ps := range out {
		slices.Sort(ps)
	}
	return out
}

// writeDeletes writes the deletes of the merge (dels, see deletes), named
// under writeID: on a format v3 table one deletion vector per data file
// that loses rows (see writeDVs), else one position delete file per such
// data file.
func (p *mergePlan) writeDeletes(ctx context.Context, f *Facade, tbl *table.Table, dels map[int32][]int64, writeID uuid.UUID) ([]iceberg.DataFile, error) {
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("facade: merge: %w", err)
	}
	wfs, ok := fsys.(iceio.WriteFileIO)
	if !ok {
		return nil, fmt.Errorf("facade: merge: the table's file system cannot write")
	}
	order := make([]int32, 0, len(dels))
	for fi := range dels {
		order = append(order, fi)
	}
	slices.Sort(order)
	locs, err := tbl.LocationProvider()
	if err != nil {
		return nil, fmt.Errorf("facade: merge: %w", err)
	}
	if tbl.Metadata().Version() >= 3 {
		return p.writeDVs(ctx, tbl, wfs, dels, order, locs.NewDataLocation(writeID.String()+"-dv.puffin"))
	}
	// A merge of changes all over the table writes a small file for each
	// of its data files: mostly the file system's and the writer's fixed
	// costs, which overlap when the files are written side by side.
	files := make([]iceberg.DataFile, len(order))
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	sem := make(chan struct{}, deleteWriters)
	for n, fi := range order {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			df := p.files[fi]
			path := locs.NewDataLocation(fmt.Sprintf("%s-deletes-%05d.parquet", writeID, n))
			files[n], errs[n] = writePositionDeletes(ctx, wfs, tbl, df, path, dels[fi])
			if errs[n] == nil {
				// the next merge's probe finds them without reading the
				// file (deletedPositions); a file whose commit fails is
				// never named
				f.keys.Put(deletesID(path, df.FilePath()), deletePositions(slices.Clone(dels[fi])))
			}
		}()
	}
	wg.Wait()
	// The files written are returned with the first error: the caller
	// removes them.
	out := make([]iceberg.DataFile, 0, len(files))
	for _, d := range files {
		if d != nil {
			out = append(out, d)
		}
	}
	return out, errors.Join(errs...)
}

// deleteWriters bounds the position delete files a merge writes at once.
const deleteWriters = 4

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// writePositionDeletes writes the positions of data file df as a
// file-scoped position delete file at path.
func writePositionDeletes(ctx context.Context, wfs iceio.WriteFileIO, tbl *table.Table, df iceberg.DataFile, path string, positions []int64) (iceberg.DataFile, error) {
	mem := memory.DefaultAllocator
	b := array.NewRecordBuilder(mem, table.PositionalDeleteArrowSchema)
	defer b.Release()
	pb, ob := b.Field(0).(*array.StringBuilder), b.Field(1).(*array.Int64Builder)
	for _, pos := range positions {
		pb.Append(df.FilePath())
		ob.Append(pos)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	fh, err := wfs.Create(path)
	if err != nil {
		return nil, fmt.Errorf("facade: merge: create %s: %w", path, err)
	}
	cw := &countingWriter{w: fh}
	props, err := deleteFileProps(tbl.Properties(), len(positions))
	if err != nil {
		_ = fh.Close()
		_ = wfs.Remove(path)
		return nil, err
	}
	pw, err := pqarrow.NewFileWriter(table.PositionalDeleteArrowSchema, cw, props, pqarrow.DefaultWriterProps())
	if err == nil {
		err = pw.Write(rec)
		if cerr := pw.Close(); err == nil {
			err = cerr
		}
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = wfs.Remove(path)
		return nil, fmt.Errorf("facade: merge: write %s: %w", path, err)
	}
	meta, err := pw.FileMetadata()
	if err != nil {
		_ = wfs.Remove(path)
		return nil, fmt.Errorf("facade: merge: %s: %w", path, err)
	}
	spec := tbl.Spec()
	if s := tbl.Metadata().PartitionSpecByID(int(df.SpecID())); s != nil {
		spec = *s
	}
	// The file is scoped to df by its file_path bounds, kept whole (equal
	// lower and upper bounds), which every engine's scan planning reads as
	// the referenced data file. The optional referenced_data_file field is
	// left unset: with it, iceberg-go's commit reads every data manifest of
	// the table to check that df is still live, which the merge knows (it
	// commits on the snapshot it probed, or not at all).
	stats := maps.Clone(tbl.Properties())
	if stats == nil {
		stats = iceberg.Properties{}
	}
	stats[table.MetricsModeColumnConfPrefix+".file_path"] = "full"
	out, err := table.DataFileFromMetadata(table.DataFileArgs{
		Schema: iceberg.PositionalDeleteSchema, Spec: spec, Format: iceberg.ParquetFile, Metadata: meta,
		FilePath: path, FileSize: cw.n, Content: iceberg.EntryContentPosDeletes, PartitionValues: df.Partition(),
		FormatVersion: tbl.Metadata().Version(), Properties: stats,
	})
	if err != nil {
		_ = wfs.Remove(path)
		return nil, fmt.Errorf("facade: merge: %s: %w", path, err)
	}
	return out, nil
}

// smallDeleteFile is the most positions a position delete file holds
// uncompressed (8 KiB of them).
const smallDeleteFile = 1024

// deleteFileProps are the Parquet properties of a position delete file of
// n positions. A merge that changes rows all over a table writes a small
// delete file for each of its data files: one path (a dictionary of one
// value) and a few positions. Compressing a few hundred bytes saves
// nothing, and a zstd encoder builds about a megabyte of tables to do it,
// anew whenever the garbage collector has emptied arrow-go's pool of
// them. So a file of up to smallDeleteFile positions is uncompressed,
// and a larger one takes the codec and level of the table's data files.
func deleteFileProps(props iceberg.Properties, n int) (*parquet.WriterProperties, error) {
	if n <= smallDeleteFile {
		return parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Uncompressed), parquet.WithStats(true)), nil
	}
	codec, err := parquetCodec(props.Get(table.ParquetCompressionKey, table.ParquetCompressionDefault))
	if err != nil {
		return nil, err
	}
	return parquet.NewWriterProperties(parquet.WithCompression(codec), parquet.WithStats(true),
		parquet.WithCompressionLevel(props.GetInt(table.ParquetCompressionLevelKey, table.ParquetCompressionLevelDefault))), nil
}

// buildMerge adds the merge's snapshot to txn: the written data files and
// the position delete files in one row delta (or, copy-on-write, the
// overwrite of buildCoW) on the snapshot the probe read (a table that
// moved since is a conflict: the positions may be stale).
func (s *icebergStaged) buildMerge(ctx context.Context, tbl *table.Table, txn *table.Transaction, summary iceberg.Properties) error {
	cur, base := int64(-1), s.baseSnapshotID // -1: no snapshot (a scoped replace into an empty table)
	if snap := tbl.CurrentSnapshot(); snap != nil {
		cur = snap.SnapshotID
	}
	if cur != base {
		return fmt.Errorf("%w: the table changed since the merge read it", ErrCommitConflict)
	}
	var data, dels []iceberg.DataFile
	for _, df := range s.files {
		if df.ContentType() == iceberg.EntryContentData {
			data = append(data, df)
		} else {
			dels = append(dels, df)
		}
	}
	if s.cow != nil {
		return s.buildCoW(ctx, txn, data, summary)
	}
	if err := sameSpec(txn, data); err != nil {
		return err
	}
	if len(data) == 0 && len(dels) == 0 {
		return emptySnapshot(ctx, txn, summary)
	}
	return txn.NewRowDelta(summary).AddRows(data...).AddDeletes(dels...).RemoveDeletes(s.supersede...).Commit(ctx)
}

// mergeOf returns the merge plan of req when its first batch asks for a
// merge (see mergeRows) and the table has rows to merge into, with the
// rows to merge: rows itself, or, when the probe ran while rows were read
// ahead (see probeAhead), the rows read ahead followed by the rest. scope
// is the probe of req.Scope's rows (nil without a scope), started before
// the first batch was read. stop ends the read of rows the merge began
// (call it once the rows are read or abandoned).
func (f *Facade) mergeOf(ctx context.Context, tbl *table.Table, req WriteRequest, scope *probeRun, rows iter.Seq2[arrow.RecordBatch, error],
	first arrow.RecordBatch, firstErr error) (_ *mergePlan, _ mergeRows, _ iter.Seq2[arrow.RecordBatch, error], stop func(), _ error) {
	stop = func() {}
	if scope != nil {
		if firstErr != nil {
			scope.abandon()
			return nil, nil, nil, stop, firstErr
		}
		p, rows, stop, err := f.probeAhead(ctx, tbl, scope, rows)
		return p, scopeRows(first), rows, stop, err
	}
	if req.Mode != Replace || firstErr != nil || first == nil || tbl.CurrentSnapshot() == nil {
		return nil, nil, rows, stop, nil
	}
	m, ok := first.(mergeRows)
	if !ok || len(m.MergeKey()) == 0 {
		return nil, nil, rows, stop, nil
	}
	p, rows, stop, err := f.probeAhead(ctx, tbl, startProbe(ctx, func(ctx context.Context) (*mergePlan, error) {
		return f.probeMerge(ctx, tbl, m.MergeKey(), req.Schema)
	}), rows)
	if err != nil {
		return nil, nil, nil, func() {}, err
	}
	if p == nil {
		return nil, nil, rows, stop, nil
	}
	return p, m, rows, stop, nil
}

// batchBytes is the size of rec's buffers.
func batchBytes(rec arrow.RecordBatch) int64 {
	var n int64
	var add func(d arrow.ArrayData)
	add = func(d arrow.ArrayData) {
		for _, b := range d.Buffers() {
			if b != nil {
				n += int64(b.Len())
			}
		}
		for _, c := range d.Children() {
			add(c)
		}
	}
	for _, c := range rec.Columns() {
		add(c.Data())
	}
	return n
}

// mergeReadAhead bounds the bytes of rows a merge reads ahead while its
// probe runs.
const mergeReadAhead = 32 << 20

// probeRun is a probe of the target running in its own goroutine (see
// startProbe).
type probeRun struct {
	done   chan struct{}
	cancel context.CancelFunc
	p      *mergePlan
	err    error
}

// startProbe runs probe in a goroutine, so that it reads the target while
// the caller waits for the source's rows. Every probeRun must end with
// wait or abandon before the call that started it returns.
func startProbe(ctx context.Context, probe func(context.Context) (*mergePlan, error)) *probeRun {
	ctx, cancel := context.WithCancel(ctx)
	r := &probeRun{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(r.done)
		r.p, r.err = probe(ctx)
	}()
	return r
}

// wait returns the probe's result once it has ended.
func (r *probeRun) wait() (*mergePlan, error) {
	<-r.done
	r.cancel()
	return r.p, r.err
}

// abandon stops a probe whose result is not wanted and waits for its end.
func (r *probeRun) abandon() {
	r.cancel()
	<-r.done
}

// probeAhead waits for the probe of the target while it reads rows ahead
// (up to mergeReadAhead bytes, retained), so that the source keeps
// streaming while the target is read: the probe has ended when
// probeAhead returns. It returns the plan and the rows (those read ahead,
// then the rest), and stop, which ends the read of the rest.
func (f *Facade) probeAhead(ctx context.Context, tbl *table.Table, probe *probeRun,
	rows iter.Seq2[arrow.RecordBatch, error]) (*mergePlan, iter.Seq2[arrow.RecordBatch, error], func(), error) {
	next, stop := iter.Pull2(rows)
	var ahead []arrow.RecordBatch
	var aheadErr error
	release := func() {
		for _, rec := range ahead {
			rec.Release()
		}
		ahead = nil
	}
	var size int64
	more := true
read:
	for more && aheadErr == nil && size < mergeReadAhead {
		select {
		case <-probe.done:
			break read
		default:
		}
		var rec arrow.RecordBatch
		rec, aheadErr, more = next()
		if more && aheadErr == nil && rec != nil {
			rec.Retain() // borrowed until the next pull
			ahead = append(ahead, rec)
			size += batchBytes(rec)
		}
	}
	p, err := probe.wait()
	if err != nil && !errors.Is(err, errMergeShape) {
		release()
		stop()
		return nil, nil, func() {}, err
	}
	if err != nil {
		// The rows are the whole new contents: a table a merge cannot
		// update in place is replaced by them, as a Replace that is no
		// merge is, and the next merge finds a table it can update.
		f.s.Logger.WarnContext(ctx, "lakewrite merge written as a full replace", "table", tbl.Identifier(), "reason", err.Error())
		p = nil
	}
	out := func(yield func(arrow.RecordBatch, error) bool) {
		for len(ahead) > 0 {
			rec := ahead[0]
			ahead = ahead[1:]
			ok := yield(rec, nil)
			rec.Release()
			if !ok {
				return
			}
		}
		if aheadErr != nil {
			yield(nil, aheadErr)
			return
		}
		for more {
			var rec arrow.RecordBatch
			var err error
			if rec, err, more = next(); !more || !yield(rec, err) {
				return
			}
		}
	}
	return p, out, func() { release(); stop() }, nil
}

// summarize corrects the snapshot summary of a merge: the next row index
// follows the rows it wrote, and the table keeps its files as an append
// does (for compaction's base).
func (p *mergePlan) summarize(props iceberg.Properties, rowBase int64, parent *table.Snapshot, dataFiles int) {
	props[summaryNextRowIndex] = strconv.FormatInt(rowBase+p.written, 10)
	props[summaryCompactBase] = compactBase(parent, Append, dataFiles)
	if p.scope == nil && len(p.key) > 0 {
		// The merge read every live row of the target, refusing a target
		// holding a key twice, and left in place or deleted the live row
		// of each key it wrote: a row it added or deleted leaves no older
		// live row of its key behind (ScanOptions.ChangedSince relies on
		// it).
		k, _ := json.Marshal(p.key)
		props[vocab.SummaryMergeKey] = string(k)
	}
	if p.cow != nil {
		props[summaryCompactBase] = p.cowCompactBase(parent)
	}
}

// afterRows runs a function in its own goroutine once a stream of rows
// has been read to its end without error (wrap), so that it overlaps
// what the reader still does with the rows; wait returns its result.
type afterRows struct {
	fn    func() ([]iceberg.DataFile, error)
	done  chan struct{}
	files []iceberg.DataFile
	err   error
}

// wrap returns rows, which starts fn once read to the end without error.
func (a *afterRows) wrap(rows iter.Seq2[arrow.RecordBatch, error], fn func() ([]iceberg.DataFile, error)) iter.Seq2[arrow.RecordBatch, error] {
	a.fn = fn
	return func(yield func(arrow.RecordBatch, error) bool) {
		for rec, err := range rows {
			if !yield(rec, err) || err != nil {
				return
			}
		}
		a.done = make(chan struct{})
		go func() {
			defer close(a.done)
			a.files, a.err = fn()
		}()
	}
}

// wait returns what fn returned once it has ended. When the rows were
// not read to their end, fn runs now if ok (the reader succeeded without
// them all), else wait returns nothing.
func (a *afterRows) wait(ok bool) ([]iceberg.DataFile, error) {
	if a.done == nil {
		if !ok {
			return nil, nil
		}
		return a.fn()
	}
	<-a.done
	return a.files, a.err
}
