package facade

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/internal/scanfiles"
	"github.com/lakewrite/lakewrite/internal/vocab"
)

// peakAllocator tracks the peak of live bytes of a checked allocator.
type peakAllocator struct {
	*memory.CheckedAllocator
	peak atomic.Int64
}

func (a *peakAllocator) note() {
	cur := int64(a.CurrentAlloc())
	for {
		p := a.peak.Load()
		if cur <= p || a.peak.CompareAndSwap(p, cur) {
			return
		}
	}
}

func (a *peakAllocator) Allocate(n int) []byte {
	b := a.CheckedAllocator.Allocate(n)
	a.note()
	return b
}

func (a *peakAllocator) Reallocate(n int, b []byte) []byte {
	b = a.CheckedAllocator.Reallocate(n, b)
	a.note()
	return b
}

func (a *peakAllocator) reset() { a.peak.Store(int64(a.CurrentAlloc())) }

// hookCatalog runs hook (once) before forwarding the next CommitTable;
// with inject set, the next CommitTable returns inject instead, after
// committing for real when land is set.
type hookCatalog struct {
	catalog.Catalog
	mu     sync.Mutex
	hook   func()
	inject error
	land   bool
}

func (c *hookCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	c.mu.Lock()
	h, inject, land := c.hook, c.inject, c.land
	c.hook, c.inject, c.land = nil, nil, false
	c.mu.Unlock()
	if h != nil {
		h()
	}
	if inject != nil {
		if land {
			if _, _, err := c.Catalog.CommitTable(ctx, ident, reqs, updates); err != nil {
				return nil, "", err
			}
		}
		return nil, "", inject
	}
	return c.Catalog.CommitTable(ctx, ident, reqs, updates)
}

type compactEnv struct {
	f         *Facade
	raw       catalog.Catalog // the catalog without the hook
	cat       *hookCatalog
	mem       *peakAllocator
	warehouse string
}

func newCompactEnv(t testing.TB, tune ...func(*Config)) *compactEnv {
	t.Helper()
	wh := t.TempDir()
	sqlcat, err := OpenSQLCatalog(context.Background(), CatalogConfig{DatabaseURL: pgtest.URL(t), Warehouse: wh})
	require.NoError(t, err)
	t.Cleanup(func() { sqlcat.Close() })
	mem := &peakAllocator{CheckedAllocator: memory.NewCheckedAllocator(memory.NewGoAllocator())}
	hc := &hookCatalog{Catalog: sqlcat}
	cfg := &Config{Allocator: mem, CommitRetries: -1}
	for _, fn := range tune {
		fn(cfg)
	}
	f, err := New(hc, cfg)
	require.NoError(t, err)
	return &compactEnv{f: f, raw: sqlcat, cat: hc, mem: mem, warehouse: wh}
}

var compactSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "payload", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// compactBatch makes n rows with ids from; withNulls puts NULLs in every
// third row's optional columns; payload adds that many bytes per row.
func compactBatch(mem memory.Allocator, from, n int, withNulls bool, payload int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, compactSchema)
	defer b.Release()
	pad := strings.Repeat("x", payload)
	for i := range n {
		id := from + i
		b.Field(0).(*array.Int64Builder).Append(int64(id))
		if withNulls && i%3 == 0 {
			b.Field(1).AppendNull()
			b.Field(2).AppendNull()
			b.Field(3).AppendNull()
			continue
		}
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("name-%d", id%97))
		b.Field(2).(*array.Float64Builder).Append(float64(id) / 7)
		b.Field(3).(*array.StringBuilder).Append(fmt.Sprintf("%d%s", id, pad))
	}
	return b.NewRecordBatch()
}

func oneBatch(rec arrow.RecordBatch) func(func(arrow.RecordBatch, error) bool) {
	return func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
}

// batches yields n rows in batches of size, building each on demand.
func batches(mem memory.Allocator, n, size, payload int) func(func(arrow.RecordBatch, error) bool) {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for from := 0; from < n; from += size {
			rec := compactBatch(mem, from, min(size, n-from), false, payload)
			ok := yield(rec, nil)
			rec.Release()
			if !ok {
				return
			}
		}
	}
}

// fullRows is every row of the current snapshot, identity included, in
// __row_index order, one string per row.
func fullRows(t *testing.T, f *Facade, ds string) []string {
	t.Helper()
	type row struct {
		idx int64
		s   string
	}
	var rows []row
	for rec, err := range f.Scan(context.Background(), ds, ScanOptions{}) {
		require.NoError(t, err)
		ix := rec.Schema().FieldIndices(ColRowIndex)[0]
		for i := range int(rec.NumRows()) {
			var b strings.Builder
			for c := range int(rec.NumCols()) {
				fmt.Fprintf(&b, "%s=%v|", rec.Schema().Field(c).Name, rec.Column(c).GetOneForMarshal(i))
			}
			rows = append(rows, row{rec.Column(ix).(*array.Int64).Value(i), b.String()})
		}
		rec.Release()
	}
	slices.SortFunc(rows, func(a, b row) int { return int(a.idx - b.idx) })
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.s
	}
	return out
}

// scanIndexes is __row_index of the current snapshot in scan order.
func scanIndexes(t *testing.T, f *Facade, ds string) []int64 {
	t.Helper()
	var out []int64
	for rec, err := range f.Scan(context.Background(), ds, ScanOptions{Columns: []string{ColRowIndex}}) {
		require.NoError(t, err)
		out = append(out, rec.Column(0).(*array.Int64).Int64Values()...)
		rec.Release()
	}
	return out
}

func liveFiles(t *testing.T, tbl *table.Table) []iceberg.DataFile {
	t.Helper()
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	require.NoError(t, err)
	return scanfiles.DataFiles(tasks)
}

// manifestCounts is the head's manifest list length and its DELETED entries.
func manifestCounts(t *testing.T, tbl *table.Table) (manifests, deleted int) {
	t.Helper()
	fsys, err := tbl.FS(context.Background())
	require.NoError(t, err)
	mfs, err := tbl.CurrentSnapshot().Manifests(fsys)
	require.NoError(t, err)
	for _, mf := range mfs {
		for e, err := range mf.Entries(fsys, false) {
			require.NoError(t, err)
			if e.Status() == iceberg.EntryStatusDELETED {
				deleted++
			}
		}
	}
	return len(mfs), deleted
}

func parquetFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".parquet") {
			out = append(out, p)
		}
		return nil
	}))
	slices.Sort(out)
	return out
}

func localPaths(files []iceberg.DataFile) []string {
	out := make([]string, len(files))
	for i, df := range files {
		out[i] = strings.TrimPrefix(df.FilePath(), "file://")
	}
	slices.Sort(out)
	return out
}

func (e *compactEnv) append(t *testing.T, ds, txn string, rec arrow.RecordBatch) CommitResult {
	t.Helper()
	res, err := e.f.Write(context.Background(), Target{DatasetID: ds}, WriteRequest{Mode: Append, Schema: compactSchema, Rows: oneBatch(rec), TxnID: txn})
	require.NoError(t, err)
	return res
}

// TestCompactSmallAppends: 60 appends of 50 rows compact into one file in
// one snapshot; every row keeps its identity and values, the checksum is
// unchanged, appends continue the row index, and FindTxn still finds the
// last append in the ancestry.
func TestCompactSmallAppends(t *testing.T) {
	t.Parallel()
	e := newCompactEnv(t)
	defer e.mem.AssertSize(t, 0)
	ctx := context.Background()
	const ds = "small_appends"
	var last CommitResult
	for i := range 60 {
		rec := compactBatch(e.mem, i*50, 50, i == 10 || i == 40, 8)
		if i < 59 {
			last = e.append(t, ds, fmt.Sprintf("t%d", i), rec)
		} else {
			// The last append carries lakewrite.next-row-index, which the
			// compaction snapshot must copy.
			st, err := e.f.Stage(ctx, Target{DatasetID: ds}, WriteRequest{Mode: Append, Schema: compactSchema, Rows: oneBatch(rec), TxnID: "t59"})
			require.NoError(t, err)
			st.(*icebergStaged).props[summaryNextRowIndex] = "3000"
			last, err = st.Commit(ctx)
			require.NoError(t, err)
		}
		rec.Release()
	}
	tbl, err := e.f.LoadTable(ctx, ds)
	require.NoError(t, err)
	require.Len(t, liveFiles(t, tbl), 60)
	nManifests, _ := manifestCounts(t, tbl)
	require.LessOrEqual(t, nManifests, manifestMinMergeCount+1, "appends merge their manifests")
	t.Logf("after 60 appends: %d manifests", nManifests)

	beforeRows := fullRows(t, e.f, ds)
	require.Len(t, beforeRows, 3000)
	beforeSum, err := e.f.Checksum(ctx, ds, 0)
	require.NoError(t, err)
	beforeSchema := tbl.Schema()
	beforeSnaps := len(tbl.Metadata().Snapshots())

	e.mem.reset()
	start := time.Now()
	tbl, rep, err := e.f.compact(ctx, tbl, compactOptions{})
	require.NoError(t, err)
	t.Logf("compacted %d files (%d bytes) into %d in %v", rep.CompactedFiles, rep.CompactedBytes, rep.WrittenFiles, time.Since(start))
	require.Equal(t, 60, rep.CompactedFiles)
	require.Equal(t, 1, rep.WrittenFiles)
	require.Positive(t, rep.CompactedBytes)

	head := tbl.CurrentSnapshot()
	require.Equal(t, rep.SnapshotID, head.SnapshotID)
	require.Len(t, tbl.Metadata().Snapshots(), beforeSnaps+1)
	require.Equal(t, last.SnapshotID, *head.ParentSnapshotID)
	require.Equal(t, table.OpReplace, head.Summary.Operation)
	require.Equal(t, compactMode, head.Summary.Properties[vocab.SummaryMode])
	require.Equal(t, "3000", head.Summary.Properties[summaryNextRowIndex])
	_, hasTxn := head.Summary.Properties[SummaryTxnID]
	require.False(t, hasTxn, "a compaction is no transaction")

	files := liveFiles(t, tbl)
	require.Len(t, files, 1)
	require.EqualValues(t, 3000, files[0].Count())
	require.Equal(t, beforeSchema.ID, tbl.Schema().ID)
	require.True(t, beforeSchema.Equals(tbl.Schema()))
	// the Parquet file carries the table's field ids
	pf, err := file.OpenParquetFile(strings.TrimPrefix(files[0].FilePath(), "file://"), false)
	require.NoError(t, err)
	psc := pf.MetaData().Schema
	for i := range psc.NumColumns() {
		col := psc.Column(i)
		fld, ok := tbl.Schema().FindFieldByName(col.Name())
		require.True(t, ok, col.Name())
		require.EqualValues(t, fld.ID, col.SchemaNode().FieldID(), col.Name())
	}
	require.NoError(t, pf.Close())

	afterSum, err := e.f.Checksum(ctx, ds, 0)
	require.NoError(t, err)
	require.Equal(t, beforeSum, afterSum)
	require.Equal(t, beforeRows, fullRows(t, e.f, ds))
	idx := scanIndexes(t, e.f, ds)
	require.True(t, slices.IsSorted(idx), "the compacted file is in __row_index order")

	got, found, err := e.f.FindTxn(ctx, ds, "t59")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, last.SnapshotID, got.SnapshotID)
	require.EqualValues(t, 50, got.Rows)
	require.Len(t, got.DataFiles, 1)

	rec := compactBatch(e.mem, 3000, 50, false, 8)
	e.append(t, ds, "t60", rec)
	rec.Release()
	idx = scanIndexes(t, e.f, ds)
	slices.Sort(idx)
	require.Len(t, idx, 3050)
	for i, v := range idx {
		require.EqualValues(t, i, v)
	}

	// nothing left to do: one small file is below MinFiles
	tbl, err = e.f.LoadTable(ctx, ds)
	require.NoError(t, err)
	again, rep, err := e.f.compact(ctx, tbl, compactOptions{})
	require.NoError(t, err)
	require.Zero(t, rep)
	require.Same(t, tbl, again)
}

// TestCompactMergesInterleavedFiles: files of one write by parallel
// writers hold interleaved __row_index ranges; compaction writes them as
// one ascending sequence.
func TestCompactMergesInterleavedFiles(t *testing.T) {
	t.Parallel()
	e := newCompactEnv(t, func(c *Config) { c.WriteWorkers, c.RowGroupRows = 3, 100 })
	defer e.mem.AssertSize(t, 0)
	ctx := context.Background()
	const ds = "interleaved"
	_, err := e.f.Write(ctx, Target{DatasetID: ds}, WriteRequest{Mode: Replace, Schema: compactSchema, Rows: batches(e.mem, 3000, 50, 4)})
	require.NoError(t, err)
	tbl, err := e.f.LoadTable(ctx, ds)
	require.NoError(t, err)
	require.Len(t, liveFiles(t, tbl), 3)
	before := fullRows(t, e.f, ds)
	require.False(t, slices.IsSorted(scanIndexes(t, e.f, ds)))

	tbl, rep, err := e.f.compact(ctx, tbl, compactOptions{MinFiles: 2})
	require.NoError(t, err)
	require.Equal(t, 3, rep.CompactedFiles)
	require.Len(t, liveFiles(t, tbl), 1)
	idx := scanIndexes(t, e.f, ds)
	require.Len(t, idx, 3000)
	for i, v := range idx {
		require.EqualValues(t, i, v)
	}
	require.Equal(t, before, fullRows(t, e.f, ds))
}

// TestCompactBoundedMemory: compacting ~200 files totalling 1M rows holds
// a bounded amount of Arrow memory, far below the data's decoded size.
func TestCompactBoundedMemory(t *testing.T) {
	t.Parallel()
	// Many small files: every 5000-row row group rolls a file.
	e := newCompactEnv(t, func(c *Config) { c.TargetFileSize, c.RowGroupRows = 1, 5000 })
	defer e.mem.AssertSize(t, 0)
	ctx := context.Background()
	const ds, rows = "bounded", 1_000_000
	_, err := e.f.Write(ctx, Target{DatasetID: ds}, WriteRequest{Mode: Replace, Schema: compactSchema, Rows: batches(e.mem, rows, 5000, 40)})
	require.NoError(t, err)
	tbl, err := e.f.LoadTable(ctx, ds)
	require.NoError(t, err)
	files := liveFiles(t, tbl)
	require.GreaterOrEqual(t, len(files), 200)
	sum, err := e.f.Checksum(ctx, ds, 0)
	require.NoError(t, err)

	// The compacting facade has the default row groups (131072 rows).
	f2, err := New(e.cat, &Config{Allocator: e.mem})
	require.NoError(t, err)
	e.mem.reset()
	base := e.mem.CurrentAlloc()
	start := time.Now()
	tbl, rep, err := f2.compact(ctx, tbl, compactOptions{})
	require.NoError(t, err)
	elapsed := time.Since(start)
	peak := e.mem.peak.Load() - int64(base)
	t.Logf("compacted %d files, %d rows, %d MiB on disk, into %d file(s) in %v; peak Arrow memory %.1f MiB",
		rep.CompactedFiles, rows, rep.CompactedBytes>>20, rep.WrittenFiles, elapsed, float64(peak)/(1<<20))
	require.Equal(t, len(files), rep.CompactedFiles)
	require.Len(t, liveFiles(t, tbl), rep.WrittenFiles)

	// Decoded, the rows take ~100 MiB (payload ~48 B, name ~8 B, three
	// int64, a float64 and a timestamp per row). The compaction holds a few
	// read batches and what the writer buffers, whatever the file count.
	const bound = 16 << 20
	require.Less(t, peak, int64(bound), "peak Arrow memory while compacting")
	after, err := f2.Checksum(ctx, ds, 0)
	require.NoError(t, err)
	require.Equal(t, sum, after)
	idx := scanIndexes(t, f2, ds)
	require.Len(t, idx, rows)
	require.True(t, slices.IsSorted(idx))
}

// TestCompactConflict: a commit landing between the compaction's planning
// and its commit fails the compaction with ErrCommitConflict; the table
// keeps the other commit, and the compaction's files are deleted.
func TestCompactConflict(t *testing.T) {
	t.Parallel()
	e := newCompactEnv(t)
	defer e.mem.AssertSize(t, 0)
	ctx := context.Background()
	const ds = "conflict"
	for i := range 10 {
		rec := compactBatch(e.mem, i*20, 20, false, 8)
		e.append(t, ds, fmt.Sprintf("t%d", i), rec)
		rec.Release()
	}
	tbl, err := e.f.LoadTable(ctx, ds)
	require.NoError(t, err)
	other, err := New(e.raw, &Config{Allocator: e.mem})
	require.NoError(t, err)
	var landed CommitResult
	e.cat.hook = func() {
		rec := compactBatch(e.mem, 200, 20, false, 8)
		defer rec.Release()
		var err error
		landed, err = other.Write(ctx, Target{DatasetID: ds}, WriteRequest{Mode: Append, Schema: compactSchema, Rows: oneBatch(rec), TxnID: "other"})
		require.NoError(t, err)
	}
	_, _, err = e.f.compact(ctx, tbl, compactOptions{})
	require.ErrorIs(t, err, ErrCommitConflict)
	require.ErrorContains(t, err, fmt.Sprintf("dataset %q", ds))

	cur, err := e.f.LoadTable(ctx, ds)
	require.NoError(t, err)
	require.Equal(t, landed.SnapshotID, cur.CurrentSnapshot().SnapshotID)
	live := liveFiles(t, cur)
	require.Len(t, live, 11)
	require.Equal(t, localPaths(live), parquetFiles(t, e.warehouse), "the compaction's files are deleted")
	require.Len(t, scanIndexes(t, e.f, ds), 220)
}

// TestCompactUnknownOutcome: a catalog error that does not say whether the
// commit landed is reconciled by the snapshot's write id: landed means
// success; not found means ErrCommitStateUnknown with the files kept.
func TestCompactUnknownOutcome(t *testing.T) {
	t.Parallel()
	e := newCompactEnv(t)
	defer e.mem.AssertSize(t, 0)
	ctx := context.Background()
	const ds = "unknown"
	for i := range 8 {
		rec := compactBatch(e.mem, i*20, 20, false, 8)
		e.append(t, ds, fmt.Sprintf("t%d", i), rec)
		rec.Release()
	}
	tbl, err := e.f.LoadTable(ctx, ds)
	require.NoError(t, err)
	before := parquetFiles(t, e.warehouse)

	e.cat.inject = errors.New("injected: connection reset by peer")
	_, _, err = e.f.compact(ctx, tbl, compactOptions{})
	require.ErrorIs(t, err, ErrCommitStateUnknown)
	cur, err := e.f.LoadTable(ctx, ds)
	require.NoError(t, err)
	require.Equal(t, tbl.CurrentSnapshot().SnapshotID, cur.CurrentSnapshot().SnapshotID)
	kept := parquetFiles(t, e.warehouse)
	require.Len(t, kept, len(before)+1, "an unknown outcome keeps the written file")

	e.cat.inject, e.cat.land = errors.New("injected: connection reset by peer"), true
	got, rep, err := e.f.compact(ctx, tbl, compactOptions{})
	require.NoError(t, err, "the write id proves the compaction landed")
	require.Equal(t, rep.SnapshotID, got.CurrentSnapshot().SnapshotID)
	require.Equal(t, compactMode, got.CurrentSnapshot().Summary.Properties[vocab.SummaryMode])
	require.Len(t, liveFiles(t, got), 1)
	require.Len(t, scanIndexes(t, e.f, ds), 160)
}

// TestCompactCancelled: a compaction cancelled while writing commits
// nothing and leaves no file behind.
func TestCompactCancelled(t *testing.T) {
	t.Parallel()
	e := newCompactEnv(t, func(c *Config) { c.TargetFileSize, c.RowGroupRows = 1, 1000 })
	defer e.mem.AssertSize(t, 0)
	ctx := context.Background()
	const ds = "cancelled"
	_, err := e.f.Write(ctx, Target{DatasetID: ds}, WriteRequest{Mode: Replace, Schema: compactSchema, Rows: batches(e.mem, 20000, 1000, 8)})
	require.NoError(t, err)
	tbl, err := e.f.LoadTable(ctx, ds)
	require.NoError(t, err)
	before := parquetFiles(t, e.warehouse)
	require.Len(t, before, 20)

	// Cancel once the compaction has allocated a good deal (it is then
	// reading and writing); a small target makes it write several files.
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	boom := errors.New("stop compaction")
	var filesAtCancel int
	watch := &cancelAllocator{peakAllocator: e.mem, after: 4 << 20, cancel: func() {
		filesAtCancel = len(parquetFiles(t, e.warehouse))
		cancel(boom)
	}}
	f2, err := New(e.cat, &Config{Allocator: watch, RowGroupRows: 1000})
	require.NoError(t, err)
	_, _, err = f2.compact(cctx, tbl, compactOptions{TargetBytes: 1, SmallBytes: 1 << 30})
	require.ErrorIs(t, err, boom)
	require.Greater(t, filesAtCancel, len(before), "the compaction had written files when cancelled")
	cur, err := e.f.LoadTable(ctx, ds)
	require.NoError(t, err)
	require.Equal(t, tbl.CurrentSnapshot().SnapshotID, cur.CurrentSnapshot().SnapshotID)
	require.Equal(t, before, parquetFiles(t, e.warehouse))
}

// cancelAllocator calls cancel once the bytes it allocated exceed after.
type cancelAllocator struct {
	*peakAllocator
	after  int64
	total  atomic.Int64
	once   sync.Once
	cancel func()
}

func (a *cancelAllocator) Allocate(n int) []byte {
	if a.total.Add(int64(n)) > a.after {
		a.once.Do(a.cancel)
	}
	return a.peakAllocator.Allocate(n)
}

// TestManifestListBounded: the head's manifest list stays bounded under
// many appends (merged at manifestMinMergeCount), many replaces, and
// compactions, also for a table created without the merge properties.
func TestManifestListBounded(t *testing.T) {
	t.Parallel()
	e := newCompactEnv(t)
	defer e.mem.AssertSize(t, 0)
	ctx := context.Background()
	write := func(ds string, mode WriteMode, i int) {
		rec := compactBatch(e.mem, i*10, 10, false, 4)
		defer rec.Release()
		_, err := e.f.Write(ctx, Target{DatasetID: ds}, WriteRequest{Mode: mode, Schema: compactSchema, Rows: oneBatch(rec)})
		require.NoError(t, err)
	}
	counts := func(ds string) (int, int) {
		tbl, err := e.f.LoadTable(ctx, ds)
		require.NoError(t, err)
		return manifestCounts(t, tbl)
	}
	const n = 3*manifestMinMergeCount + 5
	const bound = manifestMinMergeCount + 1

	maxSeen := 0
	for i := range n {
		write("appends", Append, i)
		m, _ := counts("appends")
		maxSeen = max(maxSeen, m)
	}
	m, d := counts("appends")
	t.Logf("%d appends: %d manifests (max %d along the way), %d DELETED entries", n, m, maxSeen, d)
	require.LessOrEqual(t, maxSeen, bound)

	for i := range n {
		write("replaces", Replace, i)
	}
	m, d = counts("replaces")
	t.Logf("%d replaces: %d manifests, %d DELETED entries", n, m, d)
	require.LessOrEqual(t, m, 2)
	require.LessOrEqual(t, d, 1)

	// An existing table without the properties gets them on its next
	// commit; appends then stay bounded, compactions too.
	write("legacy", Append, 0)
	tbl, err := e.f.LoadTable(ctx, "legacy")
	require.NoError(t, err)
	txn := tbl.NewTransaction()
	require.NoError(t, txn.RemoveProperties([]string{table.ManifestMergeEnabledKey, table.ManifestMinMergeCountKey}))
	_, err = txn.Commit(ctx)
	require.NoError(t, err)
	maxSeen = 0
	for i := 1; i < n; i++ {
		write("legacy", Append, i)
		m, _ := counts("legacy")
		maxSeen = max(maxSeen, m)
		if i%20 == 0 {
			tbl, err := e.f.LoadTable(ctx, "legacy")
			require.NoError(t, err)
			_, rep, err := e.f.compact(ctx, tbl, compactOptions{})
			require.NoError(t, err)
			require.Positive(t, rep.CompactedFiles)
			m, _ := counts("legacy")
			maxSeen = max(maxSeen, m)
		}
	}
	tbl, err = e.f.LoadTable(ctx, "legacy")
	require.NoError(t, err)
	require.Equal(t, "true", tbl.Properties()[table.ManifestMergeEnabledKey])
	m, d = counts("legacy")
	t.Logf("legacy table, %d appends and compactions: %d manifests (max %d), %d DELETED entries", n, m, maxSeen, d)
	require.LessOrEqual(t, maxSeen, bound)
	require.Len(t, scanIndexes(t, e.f, "legacy"), n*10)
}
