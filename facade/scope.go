package facade

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/lakewrite/lakewrite/facade/internal/identity"
	"github.com/lakewrite/lakewrite/facade/internal/keycache"
	"github.com/lakewrite/lakewrite/internal/scanfiles"
	"github.com/lakewrite/lakewrite/internal/vocab"
)

// Scope limits a Replace to part of the table (WriteRequest.Scope; see
// "Scoped replace" in the package documentation): the rows whose Columns
// hold one of Keys' rows, compared as a merge compares keys (NULL equal to
// NULL, integers of any width by value).
type Scope struct {
	// Columns are business columns of the table, at least one, each once.
	Columns []string
	// Keys has one column per Columns, in that order, typed as the
	// request's column of that name (an integer of any width for an
	// integer column). Its rows need not be distinct; no rows: the write
	// changes nothing.
	Keys arrow.RecordBatch
}

// scopePlan is what a scoped replace adds to its mergePlan: the key set,
// the in-scope live rows not yet matched by row hash (indices into
// mergePlan.entries, in the order read) and the checksum of the table
// before the write.
type scopePlan struct {
	set    *identity.KeySet
	byHash map[uint64][]int32
	base   identity.Checksum
}

// validateScope checks the shape of req.Scope against req.Schema.
func validateScope(req WriteRequest) error {
	switch {
	case req.Scope == nil:
		return nil
	case req.Mode != Replace:
		return fmt.Errorf("%w: a Scope needs mode %q", ErrInvalidRequest, Replace)
	}
	return identity.CheckScope(req.Schema, req.Scope.Columns, req.Scope.Keys)
}

// newScopeSet is the key set of req.Scope, its values encoded as the
// request's columns are.
func newScopeSet(req WriteRequest) (*identity.KeySet, error) {
	fields := make([]arrow.Field, len(req.Scope.Columns))
	for i, c := range req.Scope.Columns {
		fields[i] = req.Schema.Field(req.Schema.FieldIndices(c)[0])
	}
	return identity.NewKeySet(req.Scope.Columns, fields, req.Scope.Keys)
}

// scopeRows is the mergeRows of a scoped replace: its MergeDone is the
// first batch's, when it has one (a MergeKey is not used).
func scopeRows(first arrow.RecordBatch) mergeRows {
	d, _ := first.(interface{ MergeDone(int64) })
	return scopeDone{d}
}

type scopeDone struct{ d interface{ MergeDone(int64) } }

func (scopeDone) MergeKey() []string { return nil }

func (s scopeDone) MergeDone(n int64) {
	if s.d != nil {
		s.d.MergeDone(n)
	}
}

// probeScope reads the in-scope live rows of tbl's current snapshot:
// the scope columns of the data files the key set's min/max bounds do not
// rule out, then the business columns of the files holding in-scope rows,
// whose row hashes and positions become the plan's entries.
func (f *Facade) probeScope(ctx context.Context, tbl *table.Table, datasetID string, req WriteRequest) (*mergePlan, error) {
	set, err := newScopeSet(req)
	if err != nil {
		return nil, err
	}
	p := &mergePlan{dead: map[int32]map[int64]bool{}, olds: map[int32][]iceberg.DataFile{},
		scope: &scopePlan{set: set, byHash: map[uint64][]int32{}}}
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return p, nil // no rows: every row of the request is new
	}
	business, err := scopeColumns(tbl, datasetID, req)
	if err != nil {
		return nil, err
	}
	if p.scope.base, err = f.baseChecksum(ctx, tbl, datasetID); err != nil {
		return nil, err
	}
	if set.Len() == 0 {
		return p, nil
	}
	var bounds []scanfiles.Set
	for i, c := range req.Scope.Columns {
		fld, _ := tbl.Schema().FindFieldByName(c)
		if b, ok := scanfiles.SetOf(fld, req.Scope.Keys.Column(i)); ok {
			bounds = append(bounds, b)
		}
	}
	bscan := tbl.Scan(table.WithSnapshotID(snap.SnapshotID), table.WithSelectedFields(business...))
	kscan := tbl.Scan(table.WithSnapshotID(snap.SnapshotID), table.WithSelectedFields(req.Scope.Columns...))
	tasks, err := scanfiles.Plan(ctx, bscan)
	if err != nil {
		return nil, fmt.Errorf("facade: scoped replace: plan files: %w", err)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("facade: scoped replace: %w", err)
	}
	var h []uint64
	var cacheID string
	if f.keys.Enabled() && set.Ints() {
		cacheID = fmt.Sprintf("\x00%d\x00%q\x00%q", tbl.Schema().ID, req.Scope.Columns, business)
	}
	for _, t := range tasks {
		if slices.ContainsFunc(bounds, func(b scanfiles.Set) bool { return !b.MayContain(t.File) }) {
			continue
		}
		dead, err := f.deletedPositions(ctx, fs, t)
		if err == nil && len(t.EqualityDeleteFiles) > 0 {
			err = fmt.Errorf("%w: data file %s has equality deletes", errMergeShape, t.File.FilePath())
		}
		if errors.Is(err, errMergeShape) {
			return nil, fmt.Errorf("%w: a scoped replace cannot update the table in place: %s", ErrInvalidRequest, err)
		}
		if err != nil {
			return nil, err
		}
		in, h, err := f.scopeRows(ctx, bscan, kscan, t, dead, set, cacheID, req.Scope.Columns, h[:0])
		if err != nil {
			return nil, err
		}
		if len(in) == 0 {
			continue
		}
		fi := int32(len(p.files))
		p.files, p.tasks = append(p.files, t.File), append(p.tasks, t)
		if len(dead) > 0 {
			p.dead[fi], p.olds[fi] = dead, slices.Concat(t.DeleteFiles, t.DeletionVectorFiles)
		}
		for k, pos := range in {
			p.scope.byHash[h[k]] = append(p.scope.byHash[h[k]], int32(len(p.entries)))
			p.entries = append(p.entries, mergeEntry{hash: h[k], file: fi, pos: pos})
		}
	}
	return p, nil
}

// scopeColumns returns the request's business columns, which must be the
// table's, of the same or a promotable type: a scoped replace keeps the
// rows outside its scope as they are, so it cannot change what they hold.
func scopeColumns(tbl *table.Table, datasetID string, req WriteRequest) ([]string, error) {
	cols, _, _, err := identity.RequestColumns(req.Schema)
	if err != nil {
		return nil, err
	}
	ch, err := identity.PlanChange(datasetID, Replace, identity.SchemaPolicy{}, identity.IcebergCols(tbl.Schema()), cols)
	if err != nil {
		return nil, err
	}
	if err := identity.ScopeKeepsColumns(ch); err != nil {
		return nil, err
	}
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Field.Name
	}
	return out, nil
}

// baseChecksum is the checksum of the table at its current snapshot: the
// lakewrite.checksum of its last replace (a replace, a merge and a scoped
// replace record the whole table's) when only compactions followed it,
// else the table read whole (an append records its own rows only; a
// snapshot of another engine records none).
func (f *Facade) baseChecksum(ctx context.Context, tbl *table.Table, datasetID string) (identity.Checksum, error) {
	for snap := tbl.CurrentSnapshot(); snap != nil && snap.Summary != nil; {
		props := snap.Summary.Properties
		if props[vocab.SummaryMode] == string(Replace) {
			if c, err := parseChecksum(props[vocab.SummaryChecksum]); err == nil {
				return identity.Checksum(c), nil
			}
			break
		}
		if props[vocab.SummaryMode] != compactMode || snap.ParentSnapshotID == nil {
			break
		}
		snap = tbl.SnapshotByID(*snap.ParentSnapshotID)
	}
	f.s.Logger.InfoContext(ctx, "lakewrite scoped replace reads the whole table for its checksum", "table", tbl.Identifier())
	c, err := f.Checksum(ctx, datasetID, tbl.CurrentSnapshot().SnapshotID)
	return identity.Checksum(c), err
}

// readFile reads the data file of t through scan, its deletes not applied
// (positions count every row), calling fn with each batch and the file
// position of its first row.
func readFile(ctx context.Context, scan *table.Scan, t table.FileScanTask, fn func(rec arrow.RecordBatch, at int64) error) error {
	whole := t
	whole.DeleteFiles, whole.DeletionVectorFiles = nil, nil
	_, recs, err := scan.ReadTasks(ctx, []table.FileScanTask{whole})
	var at int64
	for rec, rerr := range recs {
		if err = rerr; err == nil {
			err = fn(rec, at)
			at += rec.NumRows()
			rec.Release()
		}
		if err != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("facade: scoped replace: read %s: %w", t.File.FilePath(), err)
	}
	return nil
}

// scopeRows returns the live positions of t's data file (not in dead)
// whose key is in set, ascending, and their row hashes (appended to h).
// With a scope index kept for the file it reads nothing; else it reads
// the key column and, when some row is in scope and the index can be
// kept (cacheID set), builds the index from the business columns, or
// hashes the rows in scope.
func (f *Facade) scopeRows(ctx context.Context, bscan, kscan *table.Scan, t table.FileScanTask, dead map[int64]bool, set *identity.KeySet, cacheID string, cols []string, h []uint64) ([]int64, []uint64, error) {
	if x := f.keptIndex(t, cacheID); x != nil {
		in, h := lookupScope(x, set, dead, nil, h)
		return in, h, nil
	}
	in, err := scopePositions(ctx, kscan, t, dead, set)
	if err != nil || len(in) == 0 {
		return nil, h, err
	}
	if x, err := f.scopeIndex(ctx, bscan, t, cacheID, cols); err != nil {
		return nil, h, err
	} else if x != nil {
		in, h = lookupScope(x, set, dead, in[:0], h)
		return in, h, nil
	}
	h, err = hashPositions(ctx, bscan, t, in, h)
	return in, h, err
}

// scopeIndexID is the id of t's data file's scope index in the cache, ""
// when none can be kept.
func scopeIndexID(t table.FileScanTask, cacheID string) string {
	if cacheID == "" || t.File.Count() > keycache.MaxRows {
		return ""
	}
	// A data file never changes once written; its size and row count
	// guard against a path written again (a table dropped and created
	// anew at the same location by another writer).
	return fmt.Sprintf("%s\x00%d\x00%d%s", t.File.FilePath(), t.File.FileSizeBytes(), t.File.Count(), cacheID)
}

// keptIndex is the scope index of t's data file kept in the cache, or nil.
func (f *Facade) keptIndex(t table.FileScanTask, cacheID string) *keycache.Index {
	id := scopeIndexID(t, cacheID)
	if id == "" {
		return nil
	}
	x, _ := f.keys.Get(id).(*keycache.Index)
	return x
}

// scopeIndex builds the scope index of t's data file by reading its
// business columns whole through bscan, and keeps it in the cache. It
// returns nil when there is no cache to keep one (cacheID empty:
// Config.ScopeIndexBytes is 0, or the scope is not one integer column) or
// the file cannot be indexed.
func (f *Facade) scopeIndex(ctx context.Context, bscan *table.Scan, t table.FileScanTask, cacheID string, cols []string) (*keycache.Index, error) {
	id := scopeIndexID(t, cacheID)
	if id == "" {
		return nil, nil
	}
	var b keycache.Builder
	var h []uint64
	err := readFile(ctx, bscan, t, func(rec arrow.RecordBatch, at int64) error {
		idx := rec.Schema().FieldIndices(cols[0])
		if len(idx) != 1 {
			return fmt.Errorf("%w: scope column %q is not in the table's rows", ErrInvalidRequest, cols[0])
		}
		var err error
		if h, err = identity.RowHashes(rec, h); err != nil {
			return err
		}
		k := rec.Column(idx[0])
		for i := range int(rec.NumRows()) {
			v, null, ok := identity.IntKey(k, i)
			b.Add(v, null, ok, at+int64(i), h[i])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	x := b.Index()
	if x != nil {
		f.keys.Put(id, x)
	}
	return x, nil
}

// lookupScope appends to in and h the live positions of x's file (not in
// dead) whose key is in set, in ascending order, and their row hashes.
func lookupScope(x *keycache.Index, set *identity.KeySet, dead map[int64]bool, in []int64, h []uint64) ([]int64, []uint64) {
	type row struct {
		pos  int64
		hash uint64
	}
	var rows []row
	add := func(pos int64, hash uint64) {
		if !dead[pos] {
			rows = append(rows, row{pos, hash})
		}
	}
	set.EachInt(func(v int64, null bool) {
		if null {
			x.LookupNull(add)
		} else {
			x.Lookup(v, add)
		}
	})
	slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(a.pos, b.pos) })
	for _, r := range rows {
		in, h = append(in, r.pos), append(h, r.hash)
	}
	return in, h
}

// scopePositions returns the live positions of t's file (not in dead)
// whose scope columns hold a key of set, in order.
func scopePositions(ctx context.Context, kscan *table.Scan, t table.FileScanTask, dead map[int64]bool, set *identity.KeySet) ([]int64, error) {
	var out []int64
	err := readFile(ctx, kscan, t, func(rec arrow.RecordBatch, at int64) error {
		if err := set.Bind(rec); err != nil {
			return err
		}
		for i := range int(rec.NumRows()) {
			in, err := set.Has(i)
			if err != nil {
				return err
			}
			if in && !dead[at+int64(i)] {
				out = append(out, at+int64(i))
			}
		}
		return nil
	})
	return out, err
}

// hashPositions appends to h the row hashes of the rows of t's file at
// the sorted positions pos, only those hashed.
func hashPositions(ctx context.Context, bscan *table.Scan, t table.FileScanTask, pos []int64, h []uint64) ([]uint64, error) {
	var rh []uint64
	err := readFile(ctx, bscan, t, func(rec arrow.RecordBatch, at int64) error {
		n := rec.NumRows()
		lo := sort.Search(len(pos), func(i int) bool { return pos[i] >= at })
		hi := sort.Search(len(pos), func(i int) bool { return pos[i] >= at+n })
		if lo == hi {
			return nil
		}
		sel := rec
		if hi-lo < int(n) {
			keep := make([]bool, n)
			for _, p := range pos[lo:hi] {
				keep[p-at] = true
			}
			mb := array.NewBooleanBuilder(memory.DefaultAllocator)
			mb.AppendValues(keep, nil)
			m := mb.NewBooleanArray()
			mb.Release()
			var err error
			sel, err = compute.FilterRecordBatch(ctx, rec, m, compute.DefaultFilterOptions())
			m.Release()
			if err != nil {
				return err
			}
			defer sel.Release()
		}
		var err error
		rh, err = identity.RowHashes(sel, rh)
		h = append(h, rh...)
		return err
	})
	return h, err
}

// scopeFilter is filter for a scoped replace: every row must fall in the
// scope; a row whose row hash equals that of an in-scope table row not
// yet matched leaves that row in place, every other row is yielded to be
// written. Once the rows are read, the table rows left unmatched are the
// deletes, and the plan's rows and checksum become the whole table's.
func (p *mergePlan) scopeFilter(ctx context.Context, rows iter.Seq2[arrow.RecordBatch, error], done func(int64)) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		sp := p.scope
		var h, wh []uint64
		var added identity.Checksum
		mask := array.NewBooleanBuilder(memory.DefaultAllocator)
		defer mask.Release()
		for rec, err := range rows {
			if err == nil {
				if h, err = identity.RowHashes(rec, h); err == nil {
					err = sp.set.Bind(rec)
				}
			}
			wh = wh[:0]
			for i := 0; i < len(h) && err == nil; i++ {
				var in bool
				if in, err = sp.set.Has(i); err == nil && !in {
					err = fmt.Errorf("%w: scoped replace: a row is outside the scope", ErrInvalidRequest)
				}
				keep := false
				if q := sp.byHash[h[i]]; len(q) > 0 && err == nil {
					p.entries[q[0]].keep, sp.byHash[h[i]], keep = true, q[1:], true
				} else {
					wh = append(wh, h[i])
				}
				mask.Append(!keep)
			}
			if err != nil {
				yield(nil, err)
				return
			}
			added.Add(wh)
			p.preserved += int64(len(h) - len(wh))
			p.written += int64(len(wh))
			if !yieldMasked(ctx, rec, mask, len(wh), yield) {
				return
			}
		}
		var rh []uint64
		for _, e := range p.entries {
			if !e.keep {
				rh = append(rh, e.hash)
			}
		}
		var removed identity.Checksum
		removed.Add(rh)
		p.sum = sp.base.Plus(added).Sub(removed)
		p.rows = p.sum.Rows
		done(p.preserved)
	}
}
