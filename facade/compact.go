package facade

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/lakewrite/lakewrite/facade/internal/identity"
	"github.com/lakewrite/lakewrite/internal/scanfiles"
	"github.com/lakewrite/lakewrite/internal/vocab"
)

// Compaction rewrites the small data files of a table's current snapshot
// into fewer, larger ones, and commits one snapshot that replaces exactly
// those files. It changes the layout only: every row keeps its
// __row_index, __row_id, __created_at and business values, the table
// schema (types, field ids) is untouched, and the snapshot is an Iceberg
// "replace" operation that adds and removes no rows.
//
// Why not iceberg-go's Transaction.RewriteDataFiles: it reads and writes a
// group through ExecuteCompactionGroup with bounded memory, but on a write
// error it returns without deleting the files it already wrote, and its
// result carries only counts, so after a failed catalog commit the caller
// cannot delete the new files either; nor can it order rows across files.
// compact writes the files itself, with the writer writeFiles uses for the
// table (the facade's own, pqwrite.go, or table.WriteRecords), and stages
// them with Transaction.NewRewrite, the builder RewriteDataFiles uses
// underneath: same snapshot operation and conflict validation, with the
// new files in our hands for cleanup.

const (
	// compactMode is the lakewrite.mode of a compaction snapshot.
	compactMode = "compact"
	// compactMergeWidth caps how many files with overlapping __row_index
	// ranges are merged row by row at once: each holds one decoded batch
	// while merging. Files of one write by several parallel writers overlap
	// (one file per writer); a wider group is written in lower-bound order
	// instead, still preserving every row.
	compactMergeWidth = 16
	// compactBatchRows caps the rows per decoded batch while reading.
	compactBatchRows = 64 << 10
)

// compactOptions selects and sizes a compaction.
type compactOptions struct {
	// MinFiles: compact only when at least this many small files exist.
	// Default 8.
	MinFiles int
	// SmallBytes: data files smaller than this are compacted. Default
	// TargetBytes/4.
	SmallBytes int64
	// TargetBytes: the compacted files roll at about this size. Default
	// Config.TargetFileSize.
	TargetBytes int64
}

func (f *Facade) compactDefaults(o compactOptions) compactOptions {
	if o.MinFiles <= 0 {
		o.MinFiles = 8
	}
	if o.TargetBytes <= 0 {
		o.TargetBytes = f.s.TargetFileSize
	}
	if o.SmallBytes <= 0 {
		o.SmallBytes = o.TargetBytes / 4
	}
	return o
}

// compactReport says what one compaction did. The zero value means
// nothing to do.
type compactReport struct {
	CompactedFiles int   // data files replaced
	WrittenFiles   int   // data files written in their place
	CompactedBytes int64 // total size of the replaced files
	CompactedRows  int64 // rows rewritten
	SnapshotID     int64 // the compaction snapshot; 0 when nothing was done
}

// compactFile is one selected data file and its __row_index range.
type compactFile struct {
	task   table.FileScanTask
	lo, hi int64
	bounds bool
	// drop, for a rewrite by a copy-on-write merge, holds the sorted file
	// positions the rewrite leaves out: the rows the file's deletes remove
	// and those the merge removes. The file is then read whole, without its
	// deletes (see mergeStream.dropRows).
	drop     []int64
	dropping bool
}

// live is the rows of cf's file that its rewrite keeps.
func (cf compactFile) live() int64 {
	if cf.dropping {
		return cf.task.File.Count() - int64(len(cf.drop))
	}
	return liveRows(cf.task)
}

// compact rewrites the current snapshot's data files smaller than
// SmallBytes into files of up to TargetBytes, in __row_index order, when at
// least MinFiles of them exist, and commits one snapshot replacing exactly
// those files. It returns the table after the commit (tbl itself when
// there was nothing to do).
//
// Memory is bounded independently of the number of files: files are read
// one at a time (a group of files with overlapping __row_index ranges, at
// most compactMergeWidth, together, one decoded batch each) and streamed
// into the Parquet writer.
//
// The commit asserts that the branch head is still the snapshot the
// compaction read; it is never retried. On a conflict (an error
// matching ErrCommitConflict), any read, write or validation error, or
// cancellation, nothing is committed and the files written so far are
// deleted. When the catalog leaves the outcome unknown and the snapshot
// cannot be found, the error wraps ErrCommitStateUnknown and the files
// are kept (a landed snapshot may reference them; the orphan cleanup
// reclaims them otherwise). A crash leaves only unreferenced files.
func (f *Facade) compact(ctx context.Context, tbl *table.Table, opt compactOptions) (*table.Table, compactReport, error) {
	opt = f.compactDefaults(opt)
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return tbl, compactReport{}, nil
	}
	dataset := datasetOf(tbl)
	files, err := selectSmallFiles(ctx, tbl, snap, opt.SmallBytes)
	if err != nil {
		return nil, compactReport{}, fmt.Errorf("facade: compact %q: %w", dataset, err)
	}
	// A partitioned table is compacted within each partition, files of an
	// older spec within theirs (partition.go).
	groups := [][]compactFile{sizeTiered(files)}
	if spec := tbl.Spec(); !spec.IsUnpartitioned() {
		groups = partitionGroups(specWritable(tbl), files)
	}
	files = slices.Concat(groups...)
	if (len(files) < opt.MinFiles || len(files) < 2) && !slices.ContainsFunc(files, hasDeletes) {
		return tbl, compactReport{}, nil
	}
	rep := compactReport{CompactedFiles: len(files)}
	for _, cf := range files {
		rep.CompactedBytes += cf.task.File.FileSizeBytes()
		rep.CompactedRows += liveRows(cf.task)
	}

	writeID := uuid.New()
	var written []iceberg.DataFile
	for gi, g := range groups {
		id := writeID
		if gi > 0 {
			id = uuid.NewSHA1(writeID, []byte(strconv.Itoa(gi))) // iceberg-go numbers files per call
		}
		w, err := f.rewriteFiles(ctx, tbl, snap, g, opt.TargetBytes, id)
		written = append(written, w...)
		if err != nil {
			f.deleteFiles(tbl, written)
			return nil, compactReport{}, fmt.Errorf("facade: compact %q: %w", dataset, err)
		}
	}
	rep.WrittenFiles = len(written)

	// No txn id, rows or checksum: a compaction is no write of the
	// pipeline. The write id identifies the snapshot after an ambiguous
	// commit.
	props := iceberg.Properties{
		vocab.SummaryMode:    compactMode,
		vocab.SummaryWriteID: writeID.String(),
	}
	if snap.Summary != nil {
		if v, ok := snap.Summary.Properties[summaryNextRowIndex]; ok {
			props[summaryNextRowIndex] = v
		}
		if live, err := strconv.Atoi(snap.Summary.Properties["total-data-files"]); err == nil {
			props[summaryCompactBase] = strconv.Itoa(live - len(files) + len(written))
		}
	}
	shadowed, err := shadowedDeletes(ctx, tbl, snap, files)
	if err != nil {
		f.deleteFiles(tbl, written)
		return nil, compactReport{}, fmt.Errorf("facade: compact %q: %w", dataset, err)
	}
	newTbl, snapID, err := f.commitCompaction(ctx, tbl, dataset, files, written, shadowed, props)
	if err != nil {
		return nil, compactReport{}, err
	}
	rep.SnapshotID = snapID
	return newTbl, rep, nil
}

// summaryCompactBase records, on every snapshot the facade commits, how
// many data files the table held after its last compaction (or replace):
// compaction is due once CompactMinFiles or more files were added since
// (see maintenanceDue), which needs no file listing.
const summaryCompactBase = "lakewrite.compact-base"

// compactBase is the summaryCompactBase a new snapshot on parent carries:
// a replace resets it to its own file count, an append keeps the parent's.
func compactBase(parent *table.Snapshot, mode WriteMode, files int) string {
	if mode == Replace || parent == nil || parent.Summary == nil {
		return strconv.Itoa(files)
	}
	if v, ok := parent.Summary.Properties[summaryCompactBase]; ok {
		return v
	}
	return "0"
}

// sizeTiered keeps, of the candidate files, the ones worth rewriting
// together: taken by size in rows, smallest first, each next file is taken while
// it is at most twice all the taken ones together. A file that outweighs
// everything smaller than it by more is left alone until enough small
// files have accumulated. So a row is rewritten only when its file grows by
// half or more (O(log n) rewrites over a table's history, not one per
// compaction), and the files left between compactions have geometrically
// growing sizes (O(log n) of them). The result keeps files' __row_index
// order.
func sizeTiered(files []compactFile) []compactFile {
	if len(files) < 2 {
		return files
	}
	bySize := slices.Clone(files)
	slices.SortStableFunc(bySize, func(a, b compactFile) int {
		return cmp.Compare(a.task.File.Count(), b.task.File.Count())
	})
	keep := map[string]bool{}
	var sum int64
	taken := 0
	for _, cf := range bySize {
		if hasDeletes(cf) {
			// a file with deletes is rewritten whatever its size: the
			// rewrite applies them (compactdeletes.go)
			keep[cf.task.File.FilePath()] = true
		}
	}
	for _, cf := range bySize {
		if hasDeletes(cf) {
			continue
		}
		size := cf.task.File.Count() // rows: a small file's bytes are mostly its footer
		if taken > 0 && size > 2*sum {
			break
		}
		taken++
		sum += size
		keep[cf.task.File.FilePath()] = true
	}
	out := files[:0:0]
	for _, cf := range files {
		if keep[cf.task.File.FilePath()] {
			out = append(out, cf)
		}
	}
	return out
}

// datasetOf names a table's dataset for errors: the id recorded when the
// facade created it, else the table name.
func datasetOf(tbl *table.Table) string {
	if id := tbl.Properties()["lakewrite.dataset-id"]; id != "" {
		return id
	}
	ident := tbl.Identifier()
	if len(ident) == 0 {
		return ""
	}
	return ident[len(ident)-1]
}

// selectSmallFiles returns snap's data files below small bytes or with a
// deleted share of compactDeletedShare or more (position deletes and
// deletion vectors; a file with equality deletes is left alone), ordered
// by their __row_index lower bound (files without bounds last, by path).
func selectSmallFiles(ctx context.Context, tbl *table.Table, snap *table.Snapshot, small int64) ([]compactFile, error) {
	// one whole-file task per file: a file over the split size is planned
	// as several tasks, and compaction must count and read it once
	tasks, err := scanfiles.Plan(ctx, tbl.Scan(table.WithSnapshotID(snap.SnapshotID)))
	if err != nil {
		return nil, fmt.Errorf("plan files: %w", err)
	}
	fieldID := -1
	if fld, ok := tbl.Schema().FindFieldByName(ColRowIndex); ok {
		fieldID = fld.ID
	}
	var out []compactFile
	for _, t := range tasks {
		if len(t.EqualityDeleteFiles) > 0 || t.File.ContentType() != iceberg.EntryContentData ||
			!onlyPositionDeletes(t) || t.File.FileSizeBytes() >= small && !deleteHeavy(t) {
			continue
		}
		out = append(out, withBounds(compactFile{task: t}, fieldID))
	}
	slices.SortFunc(out, byRowIndex)
	return out, nil
}

// byRowIndex orders files by their __row_index lower bound, files without
// bounds last, by path.
func byRowIndex(a, b compactFile) int {
	switch {
	case a.bounds != b.bounds:
		if a.bounds {
			return -1
		}
		return 1
	case a.bounds && a.lo != b.lo:
		return cmp.Compare(a.lo, b.lo)
	case a.bounds && a.hi != b.hi:
		return cmp.Compare(a.hi, b.hi)
	}
	return strings.Compare(a.task.File.FilePath(), b.task.File.FilePath())
}

// withBounds sets cf's __row_index range from its file's bounds of field
// fieldID (none when fieldID < 0).
func withBounds(cf compactFile, fieldID int) compactFile {
	if fieldID >= 0 {
		lo, okLo := int64Bound(cf.task.File.LowerBoundValues()[fieldID])
		hi, okHi := int64Bound(cf.task.File.UpperBoundValues()[fieldID])
		cf.lo, cf.hi, cf.bounds = lo, hi, okLo && okHi
	}
	return cf
}

// int64Bound decodes an Iceberg single-value serialization of a long.
func int64Bound(b []byte) (int64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return int64(uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56), true
}

// mergeGroups splits the ordered files into groups whose __row_index
// ranges overlap (at most compactMergeWidth files each); files without
// bounds form groups of one.
func mergeGroups(files []compactFile) [][]compactFile {
	var groups [][]compactFile
	var maxHi int64
	for i, cf := range files {
		if i > 0 && cf.bounds && files[i-1].bounds {
			g := groups[len(groups)-1]
			if cf.lo <= maxHi && len(g) < compactMergeWidth {
				groups[len(groups)-1] = append(g, cf)
				maxHi = max(maxHi, cf.hi)
				continue
			}
		}
		groups = append(groups, []compactFile{cf})
		maxHi = cf.hi
	}
	return groups
}

// rewriteFiles streams the rows of files, in __row_index order, into new
// data files of about target bytes. It returns the files written, also on
// error (the caller deletes them).
//
// The files are written as writeFiles writes the table's (nativeRewriter).
// As in writeFiles, the stream handed to the writer never carries an error
// and never sees the caller's cancellation: on any failure it simply ends,
// so every file the writer produced is returned instead of leaking.
func (f *Facade) rewriteFiles(ctx context.Context, tbl *table.Table, snap *table.Snapshot, files []compactFile,
	target int64, writeID uuid.UUID) ([]iceberg.DataFile, error) {
	rctx := compute.WithAllocator(ctx, f.s.Allocator)
	wctx := compute.WithAllocator(context.WithoutCancel(ctx), f.s.Allocator)
	scanOpts := []table.ScanOption{table.WithSnapshotID(snap.SnapshotID), table.WithMaxConcurrency(1),
		table.WithArrowBatchSize(min(compactBatchRows, f.s.RowGroupRows))}
	lineage, err := lineageSchema(tbl, files)
	if err != nil {
		return nil, err
	}
	if lineage != nil {
		scanOpts = append(scanOpts, table.WithRowLineage())
	}
	scan := tbl.Scan(scanOpts...)
	rowIndexCol := -1

	// open reads one file; the returned stop ends its scan.
	var schema *arrow.Schema
	open := func(cf compactFile) (func() (arrow.RecordBatch, error, bool), func(), error) {
		task := cf.task
		if cf.dropping {
			task.DeleteFiles, task.DeletionVectorFiles = nil, nil // positions count every row of the file
		}
		sc, recs, err := scan.ReadTasks(rctx, []table.FileScanTask{task})
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", cf.task.File.FilePath(), err)
		}
		if schema == nil {
			schema = sc
			if ix := sc.FieldIndices(ColRowIndex); len(ix) == 1 {
				rowIndexCol = ix[0]
			}
		} else if !schema.Equal(sc) {
			return nil, nil, fmt.Errorf("read %s: schema %s differs from %s", cf.task.File.FilePath(), sc, schema)
		}
		next, stop := iter.Pull2(recs)
		return next, stop, nil
	}

	groups := mergeGroups(files)
	// The first file is opened before the writer starts: the writer needs
	// the schema, and its first batch decides the dictionary columns.
	next0, stop0, err := open(groups[0][0])
	if err != nil {
		return nil, err
	}
	s0 := &mergeStream{path: groups[0][0].task.File.FilePath(), col: rowIndexCol, next: next0, stop: stop0}
	s0.dropping(rctx, groups[0][0])
	defer s0.close() // idempotent; ends the scan if the writer never started
	if err := s0.advance(); err != nil {
		return nil, err
	}

	writeTbl := tbl
	if props := stagedWriteProps(s0.cur, tbl.Properties()); len(props) > 0 {
		txn := tbl.NewTransaction()
		if err := txn.SetProperties(props); err != nil {
			return nil, fmt.Errorf("stage writer properties: %w", err)
		}
		staged, err := txn.StagedTable()
		if err != nil {
			return nil, fmt.Errorf("stage writer properties: %w", err)
		}
		writeTbl = staged.Table
	}
	// Files of an older partition spec are rewritten under it.
	if specID := int(files[0].task.File.SpecID()); !tbl.Spec().IsUnpartitioned() {
		if writeTbl, err = withSpec(writeTbl, specID); err != nil {
			return nil, fmt.Errorf("write under partition spec %d: %w", specID, err)
		}
	}

	var (
		srcErr error
		halted bool
	)
	partNames := partitionSources(writeTbl)
	rows := func(yield func(arrow.RecordBatch, error) bool) {
		emit := func(rec arrow.RecordBatch) bool {
			if err := context.Cause(ctx); err != nil {
				rec.Release()
				srcErr, halted = err, true
				return false
			}
			rec = withOwnedValues(withValueBytes(rec), partNames)
			if !yield(rec, nil) { // WriteRecords releases rec
				halted = true
				return false
			}
			return true
		}
		for gi, g := range groups {
			err := func() error {
				streams := make([]*mergeStream, 0, len(g))
				defer func() {
					for _, s := range streams {
						s.close()
					}
				}()
				for fi, cf := range g {
					if gi == 0 && fi == 0 {
						streams = append(streams, s0)
						continue
					}
					next, stop, err := open(cf)
					if err != nil {
						return err
					}
					s := &mergeStream{path: cf.task.File.FilePath(), col: rowIndexCol, next: next, stop: stop}
					s.dropping(rctx, cf)
					streams = append(streams, s)
					if err := s.advance(); err != nil {
						return err
					}
				}
				return mergeStreams(streams, emit)
			}()
			if err != nil && srcErr == nil {
				srcErr = err
			}
			if srcErr != nil || halted {
				return
			}
		}
	}

	var (
		out  []iceberg.DataFile
		werr error
	)
	nf, err := f.nativeRewriter(wctx, writeTbl, schema, lineage, target, writeID)
	if err != nil {
		return nil, err
	}
	if nf != nil {
		out, werr = writeNative(nf, rows)
	} else {
		writeOpts := []table.WriteRecordOption{
			table.WithWriteUUID(writeID),
			table.WithRecordBatchBufferSize(f.s.WriteQueue),
			table.WithTargetFileSize(target),
			table.WithParquetRowGroupLimit(f.s.RowGroupRows),
			table.WithMaxWriteWorkers(1),
		}
		writeSchema := schema
		if lineage != nil {
			// the rows keep their _row_id and _last_updated_sequence_number
			if writeSchema, err = lineageArrowSchema(tbl, lineage); err != nil {
				return nil, err
			}
			writeOpts = append(writeOpts, table.WithPreserveRowLineage(lineage))
		}
		for df, err := range table.WriteRecords(wctx, writeTbl, writeSchema, rows, writeOpts...) {
			if err != nil {
				werr = errors.Join(werr, err)
				continue
			}
			out = append(out, df)
		}
	}
	if srcErr != nil {
		return out, srcErr
	}
	if werr != nil {
		return out, fmt.Errorf("write data files: %w", werr)
	}
	var before, after int64
	for _, cf := range files {
		before += cf.live()
	}
	for _, df := range out {
		after += df.Count()
	}
	if before != after {
		return out, fmt.Errorf("rewrote %d rows of %d", after, before)
	}
	return out, nil
}

// nativeRewriter returns the facade's own Parquet writer (pqwrite.go) for
// a rewrite of tbl's files whose rows are read as schema, when the facade
// writes tbl's files itself: the rewritten files then have the encodings,
// physical types, statistics and row groups of the files a write adds.
// lineage, when not nil, is the schema with the row lineage columns the
// rewrite carries. It returns nil when iceberg-go's writer writes tbl's
// files (a partition spec, a sort order, writer properties or column
// types the facade's writer leaves to it).
func (f *Facade) nativeRewriter(ctx context.Context, tbl *table.Table, schema *arrow.Schema, lineage *iceberg.Schema,
	target int64, writeID uuid.UUID) (*nativeFiles, error) {
	fileSchema := tbl.Schema()
	if lineage != nil {
		fileSchema = lineage
	}
	sc, err := table.SchemaToArrowSchemaWithOptions(fileSchema, table.ArrowSchemaOptions{
		IncludeFieldIDs: true, TableProperties: tbl.Metadata().Properties(),
	})
	if err != nil {
		return nil, fmt.Errorf("write schema: %w", err)
	}
	if !nativeWritable(tbl, sc) || !sameLayout(schema, sc) {
		return nil, nil
	}
	nf, err := newNativeFiles(ctx, tbl, sc, f.s.RowGroupRows, target, f.s.Allocator, writeID)
	if err != nil {
		return nil, err
	}
	nf.fileSchema = fileSchema
	return nf, nil
}

// sameLayout reports whether batches of schema a can be written as batches
// of b: the same names, types and nullability in the same order (b may add
// metadata, such as field ids).
func sameLayout(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i, fa := range a.Fields() {
		fb := b.Field(i)
		if fa.Name != fb.Name || fa.Nullable != fb.Nullable || !arrow.TypeEqual(fa.Type, fb.Type) {
			return false
		}
	}
	return true
}

// writeNative writes rows (which carry no error) with nf, rolling files at
// its target size. It returns the files written, also on error (the open
// file is then removed; the caller deletes the others).
func writeNative(nf *nativeFiles, rows iter.Seq2[arrow.RecordBatch, error]) ([]iceberg.DataFile, error) {
	var out []iceberg.DataFile
	var err error
	for rec := range rows {
		out2 := array.NewRecordBatch(nf.sc, rec.Columns(), rec.NumRows())
		rec.Release()
		err = nf.write(out2)
		out2.Release()
		if err == nil && nf.full() {
			var df iceberg.DataFile
			if df, err = nf.close(); df != nil {
				out = append(out, df)
			}
		}
		if err != nil {
			nf.abort()
			return out, err
		}
	}
	df, err := nf.close()
	if df != nil {
		out = append(out, df)
	}
	return out, err
}

// mergeStream is one file's batches during a merge.
type mergeStream struct {
	path string
	col  int // __row_index column, -1 when absent
	next func() (arrow.RecordBatch, error, bool)
	stop func()
	cur  arrow.RecordBatch // owned; nil when done
	off  int
	done bool
	drop positionDrop // the positions left out (a copy-on-write rewrite)
}

// advance releases the current batch and pulls the next non-empty one.
func (s *mergeStream) advance() error {
	if s.cur != nil {
		s.cur.Release()
		s.cur = nil
	}
	s.off = 0
	for {
		rec, err, ok := s.next()
		if err != nil {
			s.done = true
			return fmt.Errorf("read %s: %w", s.path, err)
		}
		if !ok {
			s.done = true
			return nil
		}
		if rec, err = s.drop.apply(rec); err != nil {
			s.done = true
			return fmt.Errorf("read %s: %w", s.path, err)
		}
		if rec.NumRows() > 0 {
			s.cur = rec
			return nil
		}
		rec.Release()
	}
}

func (s *mergeStream) close() {
	if s.cur != nil {
		s.cur.Release()
		s.cur = nil
	}
	s.done = true
	s.stop()
}

func (s *mergeStream) index(i int) int64 {
	return s.cur.Column(s.col).(*array.Int64).Value(i)
}

// mergeStreams emits the rows of streams in __row_index order, as slices
// of their batches (owned by emit), assuming each stream is ascending.
// Streams without the column are emitted one after the other.
func mergeStreams(streams []*mergeStream, emit func(arrow.RecordBatch) bool) error {
	for {
		best := -1
		for i, s := range streams {
			if s.done {
				continue
			}
			if best < 0 || (s.col >= 0 && s.index(s.off) < streams[best].index(streams[best].off)) {
				best = i
			}
		}
		if best < 0 {
			return nil
		}
		s := streams[best]
		end := int(s.cur.NumRows())
		if s.col >= 0 {
			// take the run of s up to the smallest head of the others
			second, others := int64(math.MaxInt64), false
			for i, o := range streams {
				if i != best && !o.done {
					second, others = min(second, o.index(o.off)), true
				}
			}
			if others {
				e := s.off + 1
				for e < end && s.index(e) <= second {
					e++
				}
				end = e
			}
		}
		var rec arrow.RecordBatch
		if s.off == 0 && end == int(s.cur.NumRows()) {
			rec, s.cur = s.cur, nil
		} else {
			rec = s.cur.NewSlice(int64(s.off), int64(end))
			s.off = end
		}
		if !emit(rec) {
			return nil
		}
		if s.cur == nil || s.off >= int(s.cur.NumRows()) {
			if err := s.advance(); err != nil {
				return err
			}
		}
	}
}

// commitCompaction commits one snapshot replacing files by written on tbl's
// current snapshot (with their deletes, and the shadowed position delete
// files), asserting that the branch head has not moved. It returns the
// table after the commit and the compaction snapshot's id.
func (f *Facade) commitCompaction(ctx context.Context, tbl *table.Table, dataset string, files []compactFile,
	written, shadowed []iceberg.DataFile, props iceberg.Properties) (*table.Table, int64, error) {
	obs := &observedCatalog{Catalog: f.cat}
	base := table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, obs)
	fail := func(err error) (*table.Table, int64, error) {
		f.deleteFiles(tbl, written)
		return nil, 0, fmt.Errorf("facade: compact %q: %w", dataset, err)
	}
	txn := base.NewTransaction()
	// Pin the head: even with commit retries configured on the table,
	// iceberg-go must not replay the rewrite onto a newer head.
	if err := txn.AssertRefSnapshotID(table.MainBranch); err != nil {
		return fail(err)
	}
	rw := txn.NewRewrite(props)
	for _, cf := range files {
		rw.DeleteFile(cf.task.File)
		for _, del := range fileScopedDeletes(cf.task) {
			rw.DeleteFile(del) // applied by the rewrite
		}
	}
	for _, del := range shadowed {
		rw.DeleteFile(del)
	}
	for _, df := range written {
		rw.AddDataFile(df)
	}
	if err := rw.Commit(ctx); err != nil {
		return fail(fmt.Errorf("prepare snapshot: %w", err))
	}
	newTbl, err := txn.Commit(ctx)
	called, cerr := obs.outcome()
	switch {
	case called && cerr == nil:
		if newTbl == nil || newTbl.CurrentSnapshot() == nil {
			return f.reconcileCompaction(ctx, tbl, dataset, props[vocab.SummaryWriteID], err)
		}
		return newTbl, newTbl.CurrentSnapshot().SnapshotID, nil
	case !called:
		if err == nil {
			err = errors.New("the catalog was not asked to commit")
		}
		return fail(err)
	case isConflict(cerr):
		f.deleteFiles(tbl, written)
		return nil, 0, identity.CommitError(ErrCommitConflict, dataset, 1, cerr)
	default:
		return f.reconcileCompaction(ctx, tbl, dataset, props[vocab.SummaryWriteID], cerr)
	}
}

// reconcileCompaction looks for the compaction snapshot after an ambiguous
// commit: found (at the head or, if later commits landed, in its
// ancestry) means committed; otherwise the outcome stays unknown and the
// written files are kept.
func (f *Facade) reconcileCompaction(ctx context.Context, tbl *table.Table, dataset, writeID string, cause error) (*table.Table, int64, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if fresh, err := f.cat.LoadTable(rctx, tbl.Identifier()); err == nil {
		if snap := findInAncestry(fresh, vocab.SummaryWriteID, writeID); snap != nil {
			return fresh, snap.SnapshotID, nil
		}
	}
	if cause == nil {
		cause = errors.New("the catalog returned no table")
	}
	return nil, 0, identity.CommitError(ErrCommitStateUnknown, dataset, 1, cause)
}

// Bounded manifest lists.
//
// Measured with iceberg-go v0.7.0 (one table, 200 writes of 10 rows):
// replaces keep the head's manifest list at 2 manifests (the new data and
// one manifest of the DELETED entries; the overwrite producer drops parent
// manifests whose entries are all deleted, so DELETED-only manifests are
// not carried forward). Appends through the default fast-append producer
// add one manifest each: 200 after 200 appends, and every scan plan reads
// them all. With commit.manifest-merge.enabled, AddDataFiles uses the
// merge-append producer, which rewrites the manifests into one (as
// EXISTING entries keeping their snapshot ids and sequence numbers,
// dropping DELETED entries of earlier snapshots) whenever their count
// reaches commit.manifest.min-count-to-merge.
//
// The facade turns merging on with a minimum count of
// manifestMinMergeCount, so the head of a table holds at most
// manifestMinMergeCount+1 manifests (the +1: a compaction's manifest of
// DELETED entries until the next merge) while its manifests fit in one
// merge bin (commit.manifest.target-size-bytes, 8 MiB: thousands of data
// files); beyond that, one more manifest per 8 MiB of manifests.
const manifestMinMergeCount = 16

// manifestProperties are the table properties that bound the manifest
// list. New tables get them; existing tables get those they lack on
// their next commit (missingManifestProperties). A table property set
// explicitly (Config.TableProperties or another tool) is never changed.
func manifestProperties() iceberg.Properties {
	return iceberg.Properties{
		table.ManifestMergeEnabledKey:  "true",
		table.ManifestMinMergeCountKey: strconv.Itoa(manifestMinMergeCount),
	}
}

// missingManifestProperties returns the manifestProperties a table lacks.
func missingManifestProperties(have iceberg.Properties) iceberg.Properties {
	var out iceberg.Properties
	for k, v := range manifestProperties() {
		if _, ok := have[k]; ok {
			continue
		}
		if out == nil {
			out = iceberg.Properties{}
		}
		out[k] = v
	}
	return out
}
