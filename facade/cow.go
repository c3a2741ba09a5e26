package facade

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
)

// Copy-on-write merges. A merge that removes mergeCoWShare or more of the
// live rows of the data files it touches (the old versions of changed
// rows and the rows whose key is gone, against the rows those files hold
// before the merge) rewrites those files instead of deleting positions in
// them: each file's live rows, its existing deletes applied and the
// merge's removed positions left out, every column kept (lakewrite's
// identity columns and, on format v3, the Iceberg row lineage), are
// written to new files by compaction's rewrite (rewriteFiles), within the
// file's partition and spec. One overwrite snapshot, on the snapshot the
// probe read, removes the rewritten files with their delete files and
// deletion vectors and adds the rewrites and the merge's new rows: readers
// see exactly the rows of merge-on-read, with no deletes left to apply.
//
// A merge stays merge-on-read when a touched file has a position delete
// file that also covers other data files, is written under a spec whose
// source columns are gone, or, on v3, when some touched files have row
// lineage and others not yet (a rewrite of both would drop it).

// cowRewrite is the copy-on-write of a merge.
type cowRewrite struct {
	old      []iceberg.DataFile // the rewritten data files
	deletes  []iceberg.DataFile // their delete files and deletion vectors
	rewrites map[string]bool    // paths of the files written in their place
	carried  int64              // rows the rewrites carry
}

// The share of the touched files' live rows from which a merge is
// copy-on-write, by format version (see "Merges" in the package
// documentation; Config.mergeCoWShare overrides both in tests), from
// BenchmarkMergeCrossover (examples/bench/README.md). On v2, a merge
// plus one full read cost about the same either way between 20% and 30%
// of the rows changed, copy-on-write is ahead from 50%, and from a fifth
// on a merge-on-read file is due for compaction's rewrite anyway. On v3
// deletion vectors cost reads little and a rewrite, which carries the row
// lineage, cost more than merge-on-read at every share up to 90%: only a
// merge that empties the files it touches drops them instead.
const (
	mergeCoWShareV2 = 0.2
	mergeCoWShareV3 = 1
)

// mergeCoWShare is the crossover of a merge committed to a table of
// format version v, or the configured one.
func (f *Facade) mergeCoWShare(v int) float64 {
	switch {
	case f.s.mergeCoWShare > 0:
		return f.s.mergeCoWShare
	case v >= 3:
		return mergeCoWShareV3
	}
	return mergeCoWShareV2
}

// copyOnWrite reports whether the merge, whose deletes are dels (see
// deletes), rewrites the files it touches: it removes share or more of
// their live rows and every touched file can be rewritten.
func (p *mergePlan) copyOnWrite(tbl *table.Table, share float64, dels map[int32][]int64) bool {
	if len(dels) == 0 {
		return false
	}
	writable := specWritable(tbl)
	var removed, live int64
	lineage := 0
	for fi, ps := range dels {
		t := p.tasks[fi]
		if !onlyPositionDeletes(t) || !writable(int(t.File.SpecID())) {
			return false
		}
		if t.FirstRowID != nil {
			lineage++
		}
		removed += int64(len(ps))
		live += t.File.Count() - int64(len(p.dead[fi]))
	}
	if tbl.Metadata().Version() >= 3 && lineage != 0 && lineage != len(dels) {
		return false
	}
	return float64(removed) >= share*float64(live)
}

// writeChanges writes what the merge changes besides its new rows: the
// rewrites of the files it touches when it is copy-on-write (see
// copyOnWrite; base is the table the probe read), else its deletes (on
// staged, the table the write commits to). It returns the files written,
// also on error (the caller deletes them).
func (p *mergePlan) writeChanges(ctx context.Context, f *Facade, base, staged *table.Table, writeID uuid.UUID) ([]iceberg.DataFile, error) {
	dels := p.deletes()
	if !p.copyOnWrite(base, f.mergeCoWShare(staged.Metadata().Version()), dels) {
		return p.writeDeletes(ctx, f, staged, dels, writeID)
	}
	return p.rewrite(ctx, f, base, dels, writeID)
}

// mergeMode is the StageInfo.Merge of merge p on a table of format
// version (after the write's upgrade).
func mergeMode(p *mergePlan, version int) MergeMode {
	switch {
	case p.cow != nil:
		return MergeCopyOnWrite
	case version >= 3:
		return MergeDeletionVectors
	default:
		return MergePositionDeletes
	}
}

// rewrite writes the live rows of the files the merge touches, less the
// rows it removes, to new data files (one rewrite per partition and spec)
// and records them in p.cow.
func (p *mergePlan) rewrite(ctx context.Context, f *Facade, tbl *table.Table, dels map[int32][]int64, writeID uuid.UUID) ([]iceberg.DataFile, error) {
	snap := tbl.CurrentSnapshot()
	fieldID := -1
	if fld, ok := tbl.Schema().FindFieldByName(ColRowIndex); ok {
		fieldID = fld.ID
	}
	cow := &cowRewrite{rewrites: map[string]bool{}}
	var files []compactFile
	for _, fi := range slices.Sorted(maps.Keys(dels)) {
		t := p.tasks[fi]
		drop := slices.Concat(dels[fi], slices.Collect(maps.Keys(p.dead[fi])))
		slices.Sort(drop)
		drop = slices.Compact(drop)
		cf := withBounds(compactFile{task: t, drop: drop, dropping: true}, fieldID)
		files = append(files, cf)
		cow.old = append(cow.old, t.File)
		cow.deletes = append(cow.deletes, fileScopedDeletes(t)...)
	}
	shadowed, err := shadowedDeletes(ctx, tbl, snap, files)
	if err != nil {
		return nil, fmt.Errorf("facade: merge: %w", err)
	}
	cow.deletes = append(cow.deletes, shadowed...)

	// A file left with no rows is removed, not rewritten.
	slices.SortFunc(files, byRowIndex)
	idx := map[string]int{}
	var groups [][]compactFile
	for _, cf := range files {
		if cf.live() == 0 {
			continue
		}
		k := fmt.Sprint(cf.task.File.SpecID(), cf.task.File.Partition())
		i, ok := idx[k]
		if !ok {
			i = len(groups)
			idx[k] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], cf)
		cow.carried += cf.live()
	}
	var out []iceberg.DataFile
	for gi, g := range groups {
		id := uuid.NewSHA1(writeID, []byte("rewrite-"+strconv.Itoa(gi))) // iceberg-go numbers files per call
		w, err := f.rewriteFiles(ctx, tbl, snap, g, f.s.TargetFileSize, id)
		out = append(out, w...)
		if err != nil {
			return out, fmt.Errorf("facade: merge: rewrite: %w", err)
		}
	}
	for _, df := range out {
		cow.rewrites[df.FilePath()] = true
	}
	p.cow = cow
	return out, nil
}

// buildCoW adds the snapshot of a copy-on-write merge to txn: one
// overwrite that removes the rewritten files with their delete files and
// adds data (the rewrites and the merge's new rows).
func (s *icebergStaged) buildCoW(ctx context.Context, txn *table.Transaction, data []iceberg.DataFile, summary iceberg.Properties) error {
	var added []iceberg.DataFile
	for _, df := range data {
		if !s.cow.rewrites[df.FilePath()] {
			added = append(added, df)
		}
	}
	if err := sameSpec(txn, added); err != nil {
		return err
	}
	switch {
	case stagedVersion(txn) >= 3:
		return addV3(ctx, txn, s.cow.old, s.cow.deletes, data, summary)
	case len(s.cow.deletes) > 0:
		return txn.ReplaceFiles(ctx, s.cow.old, data, s.cow.deletes, summary)
	default:
		return txn.ReplaceDataFilesWithDataFiles(ctx, s.cow.old, data, summary)
	}
}

// cowCompactBase is the summaryCompactBase of a copy-on-write merge on
// parent: its rewrites count as a compaction's (the files it added since
// are its new rows' alone).
func (p *mergePlan) cowCompactBase(parent *table.Snapshot) string {
	base, err := strconv.Atoi(compactBase(parent, Append, 0))
	if err != nil {
		base = 0
	}
	return strconv.Itoa(max(0, base-len(p.cow.old)+len(p.cow.rewrites)))
}

// positionDrop leaves out of a file's batches, read in file order, the
// rows at the sorted positions pos.
type positionDrop struct {
	ctx  context.Context
	pos  []int64
	next int   // the first of pos at or after at
	at   int64 // the file position of the next batch's first row
	on   bool
}

// dropping makes s leave out the positions of cf's drop, when set.
func (s *mergeStream) dropping(ctx context.Context, cf compactFile) {
	if cf.dropping {
		s.drop = positionDrop{ctx: ctx, pos: cf.drop, on: true}
	}
}

// apply returns rec without the rows at the positions to drop (rec itself
// when it has none, else a new batch: rec is released).
func (d *positionDrop) apply(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	if !d.on {
		return rec, nil
	}
	n := rec.NumRows()
	lo := d.at
	d.at += n
	first := d.next
	for d.next < len(d.pos) && d.pos[d.next] < d.at {
		d.next++
	}
	if first == d.next {
		return rec, nil
	}
	mb := array.NewBooleanBuilder(memory.DefaultAllocator)
	defer mb.Release()
	mb.Reserve(int(n))
	j := first
	for i := range n {
		if j < d.next && d.pos[j] == lo+i {
			mb.UnsafeAppend(false)
			j++
			continue
		}
		mb.UnsafeAppend(true)
	}
	m := mb.NewBooleanArray()
	defer m.Release()
	out, err := compute.FilterRecordBatch(d.ctx, rec, m, compute.DefaultFilterOptions())
	rec.Release()
	if err != nil {
		return nil, err
	}
	return out, nil
}
