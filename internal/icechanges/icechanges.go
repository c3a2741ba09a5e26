// Package icechanges reads the rows that changed between two snapshots of an
// Iceberg table, from the table's metadata and files: old images (rows a
// snapshot removed) and new images (rows it added), of chosen columns.
//
// Each snapshot after from, up to to, is read through the manifests it
// wrote (manifest added_snapshot_id) and their entries of that snapshot:
//   - an added data file: every row of it is a new image;
//   - a removed data file: every row of it that was live in the parent
//     snapshot (the parent's position deletes and deletion vector of the
//     file applied) is an old image;
//   - an added position delete file or deletion vector: the rows at the
//     positions it removes are old images, less the positions the deletes
//     live in the parent already removed (a deletion vector holds every
//     deleted position of its file, those of the vector it supersedes too).
//
// A "replace" snapshot (compaction: files rewritten, no row changed)
// contributes nothing. In a snapshot that removes data files and adds
// others (a copy-on-write merge, a full replace), a removed row and an
// added row with the same __row_id and the same business values cancel
// out: the rewrite that carries a row is no change. That netting keeps 17
// bytes per live row of the removed files; beyond Reader.NetMaxRows rows
// it is skipped and every removed and added row is reported (a superset:
// each unchanged row then comes as an old and an equal new image).
//
// A history that cannot be read exactly is an error matching ErrUnknown:
// from not an ancestor of to, a snapshot between them expired, a manifest
// or file gone, equality deletes, a delete file removed without its data
// file. from itself may be expired when the snapshot after it is one whose
// changes do not need the files live before it: a compaction (which a
// table's maintenance commits right after a write, so that the write's
// snapshot soon ages out) or an append.
package icechanges

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// ErrUnknown: the changes between the two snapshots cannot be known from
// the table (see the package documentation).
var ErrUnknown = errors.New("facade: changes between the snapshots unknown")

// DefaultNetMaxRows is the Reader.NetMaxRows used when it is zero.
const DefaultNetMaxRows = 1 << 22

// Change is a batch of old images (Removed) or new images. The receiver
// releases Rows.
type Change struct {
	Removed bool
	Rows    arrow.RecordBatch
}

// Deleted returns the positions of t's data file that t's position delete
// files and deletion vector remove.
type Deleted func(ctx context.Context, fs iceio.IO, t table.FileScanTask) (map[int64]bool, error)

// Reader reads the changes of one table.
type Reader struct {
	Table   *table.Table
	FS      iceio.IO
	Mem     memory.Allocator
	Deleted Deleted
	// NetColumns are the columns a removed and an added row must agree on
	// to cancel out, RowID among them; RowHashes hashes a batch's rows over
	// them (the identity columns other than RowID left out).
	NetColumns []string
	RowID      string
	RowHashes  func(rec arrow.RecordBatch, h []uint64) ([]uint64, error)
	// Relabel gives an output schema the table's type metadata.
	Relabel func(*arrow.Schema) *arrow.Schema
	// NetMaxRows bounds the live rows of the data files one snapshot
	// removes that are netted against the rows it adds (0:
	// DefaultNetMaxRows).
	NetMaxRows int
	// Cache, when set, keeps the requested columns of the data files read
	// whole for old images, when they are all integers.
	Cache Cache
}

// Read yields the changes after snapshot from (0: before the table's first
// snapshot) up to snapshot to, of columns (names of to's schema, in that
// order), each batch's schema relabeled by Relabel.
func (r *Reader) Read(ctx context.Context, from int64, to *table.Snapshot, columns []string) iter.Seq2[Change, error] {
	return func(yield func(Change, error) bool) {
		steps, err := chain(r.Table, from, to)
		if err != nil {
			yield(Change{}, err)
			return
		}
		if len(steps) == 0 {
			return
		}
		ctx = compute.WithAllocator(ctx, r.Mem)
		rd := &run{r: r, ctx: ctx, cols: columns, yield: yield}
		if to.SchemaID != nil {
			rd.schemaID = *to.SchemaID
		}
		rd.proj = r.Table.Scan(table.WithSnapshotID(to.SnapshotID), table.WithSelectedFields(columns...), table.WithMaxConcurrency(1))
		netCols := slices.Clone(columns)
		for _, c := range r.NetColumns {
			if !slices.Contains(netCols, c) {
				netCols = append(netCols, c)
			}
		}
		rd.net = r.Table.Scan(table.WithSnapshotID(to.SnapshotID), table.WithSelectedFields(netCols...), table.WithMaxConcurrency(1))
		for _, s := range steps {
			if err := rd.step(s); err != nil {
				if !errors.Is(err, errStopped) {
					yield(Change{}, err)
				}
				return
			}
		}
	}
}

// errStopped: the consumer stopped reading.
var errStopped = errors.New("stopped")

// chain returns the snapshots after from up to to, oldest first.
func chain(tbl *table.Table, from int64, to *table.Snapshot) ([]*table.Snapshot, error) {
	var out []*table.Snapshot
	for s := to; s.SnapshotID != from; {
		out = append(out, s)
		if s.ParentSnapshotID == nil {
			if from == 0 {
				break
			}
			return nil, fmt.Errorf("%w: snapshot %d is not an ancestor of snapshot %d", ErrUnknown, from, to.SnapshotID)
		}
		if *s.ParentSnapshotID == from {
			// from itself may be expired: s's changes are read from the
			// manifests s wrote, and a step that needs its parent's files
			// (removed data files, new deletes of older files) finds none
			// and is unknown.
			break
		}
		p := tbl.SnapshotByID(*s.ParentSnapshotID)
		if p == nil {
			return nil, fmt.Errorf("%w: snapshot %d, an ancestor of snapshot %d, is expired", ErrUnknown, *s.ParentSnapshotID, to.SnapshotID)
		}
		s = p
	}
	slices.Reverse(out)
	return out, nil
}

// run is one Read.
type run struct {
	r    *Reader
	ctx  context.Context
	cols []string
	proj *table.Scan // reads cols
	// schemaID is the schema of to, by which cols are named
	schemaID int
	net      *table.Scan // reads cols, the business columns and __row_id
	yield    func(Change, error) bool
}

// history wraps an error reading the table's history as ErrUnknown
// (cancellation stays itself).
func (rd *run) history(what string, err error) error {
	if cerr := rd.ctx.Err(); cerr != nil {
		return cerr
	}
	return fmt.Errorf("%w: %s: %w", ErrUnknown, what, err)
}

// delta is what one snapshot changed, from the entries of its manifests.
type delta struct {
	added, removed   []iceberg.DataFile // data files
	deletes, dropped []iceberg.DataFile // position delete files and deletion vectors
}

func (rd *run) entries(s *table.Snapshot) (delta, error) {
	var d delta
	mfs, err := s.Manifests(rd.r.FS)
	if err != nil {
		return d, rd.history(fmt.Sprintf("manifests of snapshot %d", s.SnapshotID), err)
	}
	for _, mf := range mfs {
		if mf.SnapshotID() != s.SnapshotID {
			continue
		}
		for e, err := range mf.Entries(rd.r.FS, false) {
			if err != nil {
				return d, rd.history("manifest "+mf.FilePath(), err)
			}
			if e.SnapshotID() != s.SnapshotID || e.Status() == iceberg.EntryStatusEXISTING {
				continue
			}
			df, add := e.DataFile(), e.Status() == iceberg.EntryStatusADDED
			switch df.ContentType() {
			case iceberg.EntryContentData:
				if add {
					d.added = append(d.added, df)
				} else {
					d.removed = append(d.removed, df)
				}
			case iceberg.EntryContentPosDeletes:
				if add {
					d.deletes = append(d.deletes, df)
				} else {
					d.dropped = append(d.dropped, df)
				}
			default:
				return d, fmt.Errorf("%w: snapshot %d has equality deletes (%s)", ErrUnknown, s.SnapshotID, df.FilePath())
			}
		}
	}
	return d, nil
}

// posDeletePathID is the field id of a position delete file's file_path.
const posDeletePathID = 2147483546

// referencedPath is the one data file a position delete file or deletion
// vector applies to ("" for a delete file of several data files).
func referencedPath(d iceberg.DataFile) string {
	if ref := d.ReferencedDataFile(); ref != nil && *ref != "" {
		return *ref
	}
	lo, hi := d.LowerBoundValues()[posDeletePathID], d.UpperBoundValues()[posDeletePathID]
	if len(lo) > 0 && string(lo) == string(hi) {
		return string(lo)
	}
	return ""
}

func isDV(d iceberg.DataFile) bool { return d.FileFormat() == iceberg.PuffinFile }

// live is, for data files live in a snapshot, the file and its deletes.
type live struct {
	file    iceberg.DataFile
	deletes []iceberg.DataFile
}

// liveIn reads, from the manifests of s, the data files at paths and the
// delete files that apply to them.
func (rd *run) liveIn(s *table.Snapshot, paths map[string]bool) (map[string]*live, error) {
	out := map[string]*live{}
	if len(paths) == 0 || s == nil {
		return out, nil
	}
	mfs, err := s.Manifests(rd.r.FS)
	if err != nil {
		return nil, rd.history(fmt.Sprintf("manifests of snapshot %d", s.SnapshotID), err)
	}
	var shared []iceberg.DataFile // delete files of several data files
	for _, mf := range mfs {
		for e, err := range mf.Entries(rd.r.FS, true) {
			if err != nil {
				return nil, rd.history("manifest "+mf.FilePath(), err)
			}
			df := e.DataFile()
			path := df.FilePath()
			if df.ContentType() != iceberg.EntryContentData {
				if path = referencedPath(df); path == "" {
					shared = append(shared, df)
					continue
				}
			}
			if !paths[path] {
				continue
			}
			l := out[path]
			if l == nil {
				l = &live{}
				out[path] = l
			}
			switch df.ContentType() {
			case iceberg.EntryContentData:
				l.file = df
			case iceberg.EntryContentPosDeletes:
				l.deletes = append(l.deletes, df)
			default:
				return nil, fmt.Errorf("%w: data file %s has equality deletes", ErrUnknown, path)
			}
		}
	}
	for _, l := range out {
		l.deletes = append(l.deletes, shared...)
	}
	return out, nil
}

// positions reads the positions of df that the delete files dels remove.
func (rd *run) positions(df iceberg.DataFile, dels []iceberg.DataFile) (map[int64]bool, error) {
	if len(dels) == 0 {
		return map[int64]bool{}, nil
	}
	t := table.FileScanTask{File: df, Start: 0, Length: df.FileSizeBytes()}
	for _, d := range dels {
		if isDV(d) {
			t.DeletionVectorFiles = append(t.DeletionVectorFiles, d)
		} else {
			t.DeleteFiles = append(t.DeleteFiles, d)
		}
	}
	dead, err := rd.r.Deleted(rd.ctx, rd.r.FS, t)
	if err != nil {
		return nil, rd.history("deletes of "+df.FilePath(), err)
	}
	return dead, nil
}

// step yields the changes of snapshot s.
func (rd *run) step(s *table.Snapshot) error {
	if s.Summary != nil && s.Summary.Operation == table.OpReplace {
		return nil // files rewritten, no row changed
	}
	d, err := rd.entries(s)
	if err != nil {
		return err
	}
	removed := map[string]bool{}
	need := map[string]bool{}
	for _, df := range d.removed {
		removed[df.FilePath()] = true
		need[df.FilePath()] = true
	}
	newDels := map[string][]iceberg.DataFile{}
	for _, del := range d.deletes {
		ref := referencedPath(del)
		if ref == "" {
			return fmt.Errorf("%w: snapshot %d adds a position delete file of several data files (%s)", ErrUnknown, s.SnapshotID, del.FilePath())
		}
		newDels[ref] = append(newDels[ref], del)
		need[ref] = true
	}
	for _, del := range d.dropped {
		// a deletion vector superseded by a new one, or the deletes of a
		// removed data file; any other removal would bring rows back
		if ref := referencedPath(del); !removed[ref] && !slices.ContainsFunc(newDels[ref], isDV) {
			return fmt.Errorf("%w: snapshot %d removes delete file %s", ErrUnknown, s.SnapshotID, del.FilePath())
		}
	}
	var parent *table.Snapshot
	if s.ParentSnapshotID != nil {
		parent = rd.r.Table.SnapshotByID(*s.ParentSnapshotID)
	}
	before, err := rd.liveIn(parent, need)
	if err != nil {
		return err
	}

	// rows removed by the new deletes
	for _, path := range slices.Sorted(maps.Keys(newDels)) {
		l := before[path]
		var df iceberg.DataFile
		var prior []iceberg.DataFile
		if l != nil && l.file != nil {
			df, prior = l.file, l.deletes
		} else if i := slices.IndexFunc(d.added, func(a iceberg.DataFile) bool { return a.FilePath() == path }); i >= 0 {
			df = d.added[i]
		} else {
			return fmt.Errorf("%w: snapshot %d deletes rows of data file %s, not live before it", ErrUnknown, s.SnapshotID, path)
		}
		had, err := rd.positions(df, prior)
		if err != nil {
			return err
		}
		now, err := rd.positions(df, newDels[path])
		if err != nil {
			return err
		}
		var pos []int64
		for p := range now {
			if !had[p] {
				pos = append(pos, p)
			}
		}
		slices.Sort(pos)
		if len(pos) == 0 {
			continue
		}
		if err := rd.emitRemoved(df, pos, nil); err != nil {
			return err
		}
	}

	// removed data files, their rows live before s
	gone := make([]removedFile, 0, len(d.removed))
	for _, df := range d.removed {
		l := before[df.FilePath()]
		if l == nil || l.file == nil {
			return fmt.Errorf("%w: snapshot %d removes data file %s, not live before it", ErrUnknown, s.SnapshotID, df.FilePath())
		}
		dead, err := rd.positions(l.file, l.deletes)
		if err != nil {
			return err
		}
		gone = append(gone, removedFile{file: l.file, dead: dead})
	}
	if len(gone) > 0 && len(d.added) > 0 {
		netted, err := rd.netted(gone, d.added)
		if err != nil || netted {
			return err
		}
	}
	for _, g := range gone {
		if err := rd.emitRemoved(g.file, nil, g.liveAt); err != nil {
			return err
		}
	}
	for _, df := range d.added {
		if err := rd.emitFile(rd.proj, df, false, nil); err != nil {
			return err
		}
	}
	return nil
}

// removedFile is a data file a snapshot removes and the positions of it
// already deleted before.
type removedFile struct {
	file iceberg.DataFile
	dead map[int64]bool
}

func (g removedFile) liveAt(p int64) bool { return !g.dead[p] }

// readFile streams every row of df (in file order, no delete applied)
// through scan's projection: fn gets each batch and the file position of
// its first row.
func (rd *run) readFile(scan *table.Scan, df iceberg.DataFile, fn func(rec arrow.RecordBatch, at int64) error) error {
	t := table.FileScanTask{File: df, Start: 0, Length: df.FileSizeBytes()}
	_, recs, err := scan.ReadTasks(rd.ctx, []table.FileScanTask{t})
	if err != nil {
		return rd.history("read "+df.FilePath(), err)
	}
	var at int64
	for rec, err := range recs {
		if err != nil {
			return rd.history("read "+df.FilePath(), err)
		}
		n := rec.NumRows()
		err = fn(rec, at)
		rec.Release()
		if err != nil {
			return err
		}
		at += n
	}
	return nil
}

// emitFile yields the rows of df whose position keep accepts (every row
// when keep is nil), projected to the requested columns.
func (rd *run) emitFile(scan *table.Scan, df iceberg.DataFile, removed bool, keep func(int64) bool) error {
	return rd.readFile(scan, df, func(rec arrow.RecordBatch, at int64) error {
		return rd.emit(rec, removed, func(i int) bool { return keep == nil || keep(at+int64(i)) })
	})
}

// emit yields the rows i of rec (borrowed) for which keep(i), projected.
func (rd *run) emit(rec arrow.RecordBatch, removed bool, keep func(int) bool) error {
	n := int(rec.NumRows())
	mb := array.NewBooleanBuilder(rd.r.Mem)
	defer mb.Release()
	mb.Reserve(n)
	kept := 0
	for i := range n {
		k := keep(i)
		mb.UnsafeAppend(k)
		if k {
			kept++
		}
	}
	if kept == 0 {
		return nil
	}
	proj, err := rd.project(rec)
	if err != nil {
		return err
	}
	out := proj
	if kept < n {
		m := mb.NewBooleanArray()
		out, err = compute.FilterRecordBatch(rd.ctx, proj, m, compute.DefaultFilterOptions())
		m.Release()
		proj.Release()
		if err != nil {
			return fmt.Errorf("facade: changes: %w", err)
		}
	}
	if !rd.yield(Change{Removed: removed, Rows: out}, nil) {
		return errStopped
	}
	return nil
}

// project returns the requested columns of rec, in the requested order,
// with the Postgres type metadata of the table schema.
func (rd *run) project(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	sc := rec.Schema()
	fields := make([]arrow.Field, len(rd.cols))
	cols := make([]arrow.Array, len(rd.cols))
	for i, c := range rd.cols {
		ix := sc.FieldIndices(c)
		if len(ix) != 1 {
			return nil, fmt.Errorf("facade: changes: column %q missing from a read batch", c)
		}
		fields[i], cols[i] = sc.Field(ix[0]), rec.Column(ix[0])
	}
	out := rd.r.Relabel(arrow.NewSchema(fields, nil))
	return array.NewRecordBatch(out, cols, rec.NumRows()), nil
}

// netKey identifies a row for netting: its __row_id and the hash of its
// business values.
type netKey struct{ id, h uint64 }

func cmpKey(a, b netKey) int {
	switch {
	case a.id != b.id:
		if a.id < b.id {
			return -1
		}
		return 1
	case a.h != b.h:
		if a.h < b.h {
			return -1
		}
		return 1
	}
	return 0
}

// keysOf appends to ks the net keys of the rows i of rec for which
// keep(i).
func (rd *run) keysOf(rec arrow.RecordBatch, h []uint64, ks []netKey, keep func(int) bool) ([]uint64, []netKey, error) {
	h, err := rd.r.RowHashes(rec, h)
	if err != nil {
		return h, ks, err
	}
	var ids *array.Int64
	if ix := rec.Schema().FieldIndices(rd.r.RowID); len(ix) == 1 {
		ids, _ = rec.Column(ix[0]).(*array.Int64)
	}
	for i := range h {
		if keep != nil && !keep(i) {
			continue
		}
		k := netKey{h: h[i]}
		if ids != nil && ids.IsValid(i) {
			k.id = uint64(ids.Value(i))
		}
		ks = append(ks, k)
	}
	return h, ks, nil
}

// netted yields the changes of a snapshot that removes the data files
// gone and adds added, a removed row and an added row with the same key
// cancelling out. It returns false, having yielded nothing, when the
// removed files hold more than NetMaxRows live rows.
func (rd *run) netted(gone []removedFile, added []iceberg.DataFile) (bool, error) {
	limit := rd.r.NetMaxRows
	if limit <= 0 {
		limit = DefaultNetMaxRows
	}
	var rows int64
	for _, g := range gone {
		rows += g.file.Count() - int64(len(g.dead))
	}
	if rows > int64(limit) {
		return false, nil
	}
	keys := make([]netKey, 0, rows)
	var h []uint64
	for _, g := range gone {
		err := rd.readFile(rd.net, g.file, func(rec arrow.RecordBatch, at int64) error {
			var err error
			h, keys, err = rd.keysOf(rec, h, keys, func(i int) bool { return g.liveAt(at + int64(i)) })
			return err
		})
		if err != nil {
			return false, err
		}
	}
	slices.SortFunc(keys, cmpKey)
	used := make([]bool, len(keys))
	// take marks the first key equal to k whose used flag is want,
	// flipping it; false when there is none.
	take := func(k netKey, want bool) bool {
		i := sort.Search(len(keys), func(i int) bool { return cmpKey(keys[i], k) >= 0 })
		for ; i < len(keys) && keys[i] == k; i++ {
			if used[i] == want {
				used[i] = !want
				return true
			}
		}
		return false
	}
	var ks []netKey
	for _, df := range added {
		err := rd.readFile(rd.net, df, func(rec arrow.RecordBatch, _ int64) error {
			var err error
			if h, ks, err = rd.keysOf(rec, h, ks[:0], nil); err != nil {
				return err
			}
			return rd.emit(rec, false, func(i int) bool { return !take(ks[i], false) })
		})
		if err != nil {
			return true, err
		}
	}
	for _, g := range gone {
		err := rd.readFile(rd.net, g.file, func(rec arrow.RecordBatch, at int64) error {
			var err error
			if h, ks, err = rd.keysOf(rec, h, ks[:0], nil); err != nil {
				return err
			}
			return rd.emit(rec, true, func(i int) bool { return g.liveAt(at+int64(i)) && !take(ks[i], true) })
		})
		if err != nil {
			return true, err
		}
	}
	return true, nil
}
