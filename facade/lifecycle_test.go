package facade_test

import (
	"context"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/internal/contract"
)

// locStats is what a table's location holds on disk.
type locStats struct {
	files, metaFiles int   // all files; *.metadata.json files
	bytes            int64 // all files
	metaSize         int64 // the current metadata.json
	maxFile          int64 // the largest file but metadata.json files
	dataFiles        int   // *.parquet
}

func tableDir(t *testing.T, f *facade.Facade, dataset string) string {
	t.Helper()
	tbl, err := f.LoadTable(context.Background(), dataset)
	require.NoError(t, err)
	return strings.TrimPrefix(tbl.Location(), "file://")
}

func statLocation(t *testing.T, f *facade.Facade, dataset string) locStats {
	t.Helper()
	tbl, err := f.LoadTable(context.Background(), dataset)
	require.NoError(t, err)
	var s locStats
	require.NoError(t, filepath.WalkDir(tableDir(t, f, dataset), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		s.files++
		s.bytes += info.Size()
		if !strings.HasSuffix(p, ".metadata.json") {
			s.maxFile = max(s.maxFile, info.Size())
		}
		switch {
		case strings.HasSuffix(p, ".metadata.json"):
			s.metaFiles++
		case strings.HasSuffix(p, ".parquet"):
			s.dataFiles++
		}
		return nil
	}))
	info, err := os.Stat(strings.TrimPrefix(tbl.MetadataLocation(), "file://"))
	require.NoError(t, err)
	s.metaSize = info.Size()
	return s
}

// liveManifests is the number of manifests in the head's manifest list,
// and their bytes.
func liveManifests(t *testing.T, tbl *table.Table) (int, int64) {
	t.Helper()
	if tbl.CurrentSnapshot() == nil {
		return 0, 0
	}
	fsys, err := tbl.FS(context.Background())
	require.NoError(t, err)
	mfs, err := tbl.CurrentSnapshot().Manifests(fsys)
	require.NoError(t, err)
	var b int64
	for _, m := range mfs {
		b += m.Length()
	}
	return len(mfs), b
}

// writeRows writes rows [from, from+n) of the contract schema.
func writeRows(t *testing.T, e *icebergEnv, f *facade.Facade, dataset string, mode facade.WriteMode, from, n int, txn string) facade.CommitResult {
	t.Helper()
	bs := contract.Batches(e.mem, contract.Schema(), from, n, max(min(n, 100), 1), 1<<30)
	defer func() {
		for _, b := range bs {
			b.Release()
		}
	}()
	res, err := f.Write(context.Background(), facade.Target{DatasetID: dataset, WriterID: "w"},
		facade.WriteRequest{Mode: mode, Schema: contract.Schema(), Rows: contract.Seq(bs), TxnID: txn})
	require.NoError(t, err)
	return res
}

func addChecksum(a, b facade.Checksum) facade.Checksum {
	return facade.Checksum{Rows: a.Rows + b.Rows, Sum: a.Sum + b.Sum, Sum2: a.Sum2 + b.Sum2}
}

// rowIndices scans the current snapshot's __row_index values, sorted.
func rowIndices(t *testing.T, f *facade.Facade, dataset string) []int64 {
	t.Helper()
	var out []int64
	for rec, err := range f.Scan(context.Background(), dataset, facade.ScanOptions{Columns: []string{facade.ColRowIndex}}) {
		require.NoError(t, err)
		out = append(out, rec.Column(0).(*array.Int64).Int64Values()...)
	}
	slices.Sort(out)
	return out
}

func requireDense(t *testing.T, idx []int64, n int) {
	t.Helper()
	require.Len(t, idx, n)
	for i, v := range idx {
		if v != int64(i) {
			require.Failf(t, "__row_index not dense", "position %d holds %d", i, v)
		}
	}
}

// TestLongHistoryStaysBounded: one dataset replaced 300 times, then
// appended 300 times, running Maintain whenever a commit says it is due.
// After every run the history, the metadata and the files on disk stay
// under bounds that do not depend on the number of writes, the contents are
// right, and the last txn is found.
func TestLongHistoryStaysBounded(t *testing.T) {
	t.Parallel()
	// No file grace in this test: the run after an expiry deletes what it
	// dereferenced. With the default minute of grace, a test writing many
	// times a second would keep a minute's worth of writes on disk: bounded
	// by the write rate, not by a constant these assertions can state.
	pol := facade.Lifecycle{FileGrace: -1}
	e := newIcebergEnv(t, func(c *facade.Config) { c.Lifecycle = pol })
	defer e.mem.AssertSize(t, 0)
	ctx := context.Background()
	const (
		ds       = "long"
		writes   = 300
		rows     = 20
		keepLast = facade.DefaultKeepLast
		every    = facade.DefaultEveryCommits
	)
	var (
		want         facade.Checksum
		wantRows     int
		runs, expiry int
		lastTxn      string
		deleted      int
	)
	check := func(i int, rep facade.MaintenanceReport) {
		t.Helper()
		tbl, err := e.f.LoadTable(ctx, ds)
		require.NoError(t, err)
		snaps := len(tbl.Metadata().Snapshots())
		st := statLocation(t, e.f, ds)
		live, liveManifestBytes := liveManifests(t, tbl)
		// Bounds independent of the write count:
		require.LessOrEqual(t, snaps, keepLast+every, "write %d", i)
		require.LessOrEqual(t, st.metaFiles, facade.DefaultMetadataVersions+1, "write %d: metadata.json files", i)
		// ~1.5 KB per retained snapshot (summary with the lakewrite keys),
		// the schema, the 10-entry metadata log and snapshot log.
		require.Less(t, st.metaSize, int64(48<<10), "write %d: metadata.json size", i)
		// Files: the live data files and the live manifests, plus per
		// retained snapshot its manifest list, at most two manifests and
		// one data file it alone references, plus the metadata files.
		headFiles := tbl.CurrentSnapshot().Summary.Properties["total-data-files"]
		liveData, err := strconv.Atoi(headFiles)
		require.NoError(t, err)
		bound := liveData + live + 4*(keepLast+every) + facade.DefaultMetadataVersions + 1
		require.LessOrEqual(t, st.files, bound, "write %d: files in the table location", i)
		// Bytes: the live data and manifests, the metadata files, and per retained
		// snapshot its list, manifests and own data file, each at most the
		// largest file (a data file, or the head's manifest list once it
		// lists many manifests).
		liveBytes, err := strconv.ParseInt(tbl.CurrentSnapshot().Summary.Properties["total-files-size"], 10, 64)
		require.NoError(t, err)
		byteBound := liveBytes + liveManifestBytes + int64(facade.DefaultMetadataVersions+1)*(48<<10) + int64(4*(keepLast+every))*st.maxFile
		require.LessOrEqual(t, st.bytes, byteBound, "write %d: bytes in the table location", i)
		require.Equal(t, strconv.Itoa(wantRows), tbl.CurrentSnapshot().Summary.Properties["total-records"], "write %d", i)
		if rep.SnapshotsExpired+rep.FilesDeleted+rep.OrphansDeleted+rep.CompactedFiles > 0 {
			// A run that changed nothing cannot have changed the rows; this
			// keeps the scans off the runs the many small appended files
			// make due while nothing compacts them.
			sum, err := e.f.Checksum(ctx, ds, 0)
			require.NoError(t, err)
			require.Equal(t, want, sum, "write %d", i)
			require.EqualValues(t, wantRows, sum.Rows)
		}
		res, found, err := e.f.FindTxn(ctx, ds, lastTxn)
		require.NoError(t, err)
		require.True(t, found, "write %d: last txn", i)
		// The last write is the head, or the parent of the compaction
		// that maintenance just committed.
		head := tbl.CurrentSnapshot()
		if rep.SnapshotID != 0 {
			require.Equal(t, head.SnapshotID, rep.SnapshotID)
			require.NotNil(t, head.ParentSnapshotID)
			require.Equal(t, *head.ParentSnapshotID, res.SnapshotID, "write %d", i)
		} else {
			require.Equal(t, head.SnapshotID, res.SnapshotID, "write %d", i)
		}
		if runs%10 == 1 || i == 2*writes-1 {
			t.Logf("write %3d: run %2d expired %2d deleted %2d files (%6d B): snapshots %2d, metadata.json %5d B x %2d, live manifests %3d, files %3d (%7d B), data files %3d (live %3d)",
				i+1, runs, rep.SnapshotsExpired, rep.FilesDeleted, rep.BytesDeleted, snaps, st.metaSize, st.metaFiles, live, st.files, st.bytes, st.dataFiles, liveData)
		}
	}
	for i := range 2 * writes {
		mode := facade.Replace
		if i >= writes {
			mode = facade.Append
		}
		lastTxn = "txn-" + strconv.Itoa(i)
		from := i * rows
		if mode == facade.Replace {
			from = (i % 7) * rows // some replaces repeat content
		}
		res := writeRows(t, e, e.f, ds, mode, from, rows, lastTxn)
		if mode == facade.Replace {
			want, wantRows = res.Checksum, rows
		} else {
			want, wantRows = addChecksum(want, res.Checksum), wantRows+rows
		}
		if !res.MaintenanceDue {
			continue
		}
		runs++
		rep, err := e.f.Maintain(ctx, ds)
		require.NoError(t, err)
		if rep.SnapshotsExpired > 0 {
			expiry++
		}
		deleted += rep.FilesDeleted
		check(i, rep)
	}
	// Maintenance ran on a minority of the writes; appends with no
	// compaction yet make every write due once the head has 16 small files.
	t.Logf("maintenance runs: %d (%d expiring), files deleted: %d", runs, expiry, deleted)
	require.Greater(t, expiry, 2*writes/every-4)
	require.Greater(t, deleted, 0)
	// __row_index continued across every expiry.
	requireDense(t, rowIndices(t, e.f, ds), rows+writes*rows)
}

// TestMetadataFilesBounded: with the lifecycle properties iceberg-go's
// commit deletes the metadata.json files it drops from the metadata log;
// a table that lacks them gets them from the next write, in that write's
// commit.
func TestMetadataFilesBounded(t *testing.T) {
	t.Parallel()
	e := newIcebergEnv(t)
	defer e.mem.AssertSize(t, 0)
	ctx := context.Background()
	for i := range 50 {
		writeRows(t, e, e.f, "meta", facade.Replace, i, 5, "")
	}
	st := statLocation(t, e.f, "meta")
	require.Equal(t, facade.DefaultMetadataVersions+1, st.metaFiles, "current + previous-versions-max")
	tbl, err := e.f.LoadTable(ctx, "meta")
	require.NoError(t, err)
	require.Equal(t, "true", tbl.Properties()[table.MetadataDeleteAfterCommitEnabledKey])
	require.Equal(t, "10", tbl.Properties()[table.MetadataPreviousVersionsMaxKey])

	// A table written without the lifecycle (as before it existed) keeps
	// every metadata.json, and no lifecycle property.
	old, err := facade.New(e.cat, &facade.Config{Allocator: e.mem, Lifecycle: facade.Lifecycle{Disabled: true}})
	require.NoError(t, err)
	for i := range 30 {
		writeRows(t, e, old, "legacy", facade.Replace, i, 5, "")
	}
	st = statLocation(t, e.f, "legacy")
	require.Equal(t, 31, st.metaFiles) // create + 30 commits
	tbl, err = e.f.LoadTable(ctx, "legacy")
	require.NoError(t, err)
	require.NotContains(t, tbl.Properties(), table.MetadataDeleteAfterCommitEnabledKey)
	require.NotContains(t, tbl.Properties(), facade.TablePropOrphansCheckedAt)
	snaps := len(tbl.Metadata().Snapshots())
	// The next write through the default policy sets the properties in
	// its own commit: one snapshot more, no other commit, and that commit
	// already trims the log and deletes the dropped files.
	res := writeRows(t, e, e.f, "legacy", facade.Replace, 0, 5, "t-legacy")
	tbl, err = e.f.LoadTable(ctx, "legacy")
	require.NoError(t, err)
	require.Len(t, tbl.Metadata().Snapshots(), snaps+1)
	require.Equal(t, res.SnapshotID, tbl.CurrentSnapshot().SnapshotID)
	require.Equal(t, "true", tbl.Properties()[table.MetadataDeleteAfterCommitEnabledKey])
	require.Contains(t, tbl.Properties(), facade.TablePropOrphansCheckedAt)
	st = statLocation(t, e.f, "legacy")
	require.Equal(t, facade.DefaultMetadataVersions+1, st.metaFiles)
}

// clock is a settable clock for the Config (facade.SetNow).
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

func exists(p string) bool {
	_, err := os.Stat(strings.TrimPrefix(p, "file://"))
	return err == nil
}

// TestGraceProtectsReader: a Scan of an old snapshot that started before
// the snapshot was expired reads all its rows, because the files stay for
// FileGrace; a run after the grace deletes them. Without grace the same
// scan fails (the control that shows the scan reads files after expiry).
func TestGraceProtectsReader(t *testing.T) {
	t.Parallel()
	for _, grace := range []time.Duration{time.Hour, -1} {
		name := "grace"
		if grace < 0 {
			name = "no-grace"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clk := &clock{}
			pol := facade.Lifecycle{KeepLast: 1, EveryCommits: 1, FileGrace: grace}
			// three files per write, read one at a time by Scan
			e := newIcebergEnv(t, func(c *facade.Config) {
				c.Lifecycle, c.WriteWorkers, c.RowGroupRows = pol, 3, 100
				facade.SetNow(c, clk.now)
			})
			defer e.mem.AssertSize(t, 0)
			ctx := context.Background()
			old := writeRows(t, e, e.f, "grace", facade.Replace, 0, 300, "t0")
			require.Len(t, old.DataFiles, 3)

			next, stop := iter.Pull2(e.f.Scan(ctx, "grace", facade.ScanOptions{SnapshotID: old.SnapshotID, ExcludeIdentity: true}))
			defer stop()
			first, err, ok := next()
			require.True(t, ok)
			require.NoError(t, err)
			first.Retain()
			batches := []arrow.RecordBatch{first}
			defer func() {
				for _, b := range batches {
					b.Release()
				}
			}()

			for i := 1; i <= 3; i++ {
				writeRows(t, e, e.f, "grace", facade.Replace, i*1000, 300, "t"+strconv.Itoa(i))
			}
			rep, err := e.f.Maintain(ctx, "grace")
			require.NoError(t, err)
			require.Equal(t, 3, rep.SnapshotsExpired)
			rep, err = e.f.Maintain(ctx, "grace") // the record is due at once without grace
			require.NoError(t, err)
			if grace > 0 {
				require.Zero(t, rep.FilesDeleted, "still in grace")
				for _, df := range old.DataFiles {
					require.True(t, exists(df.Path))
				}
			} else {
				require.Positive(t, rep.FilesDeleted)
			}

			var scanErr error
			for {
				b, err, ok := next()
				if !ok {
					break
				}
				if err != nil {
					scanErr = err
					break
				}
				b.Retain()
				batches = append(batches, b)
			}
			if grace < 0 {
				require.Error(t, scanErr, "the files were deleted under the reader")
				return
			}
			require.NoError(t, scanErr)
			sum, err := facade.ChecksumBatches(contract.Seq(batches))
			require.NoError(t, err)
			require.Equal(t, old.Checksum, sum, "the reader saw every row of its snapshot")

			// Past the grace, the next run deletes them.
			clk.advance(2 * time.Hour)
			rep, err = e.f.Maintain(ctx, "grace")
			require.NoError(t, err)
			require.GreaterOrEqual(t, rep.FilesDeleted, 3*3+3) // 3 files per write, plus manifests and lists
			for _, df := range old.DataFiles {
				require.False(t, exists(df.Path), "deleted after the grace: %s", df.Path)
			}
			tbl, err := e.f.LoadTable(ctx, "grace")
			require.NoError(t, err)
			require.NotContains(t, tbl.Properties(), facade.TablePropExpired, "the record is dropped")
			sum, err = e.f.Checksum(ctx, "grace", 0)
			require.NoError(t, err)
			require.EqualValues(t, 300, sum.Rows)
		})
	}
}

// TestExpiryKeepsRecovery: with KeepLast=1 only the head survives, and
// everything recovery and replay need is in it.
func TestExpiryKeepsRecovery(t *testing.T) {
	t.Parallel()
	pol := facade.Lifecycle{KeepLast: 1, EveryCommits: 1, FileGrace: -1}
	e := newIcebergEnv(t, func(c *facade.Config) { c.Lifecycle = pol })
	t.Cleanup(func() { e.mem.AssertSize(t, 0) }) // after appendReq's cleanups
	ctx := context.Background()
	for i := range 5 {
		writeRows(t, e, e.f, "rec", facade.Replace, 0, 50, "r"+strconv.Itoa(i))
	}
	rep, err := e.f.Maintain(ctx, "rec")
	require.NoError(t, err)
	require.Equal(t, 4, rep.SnapshotsExpired)
	tbl, err := e.f.LoadTable(ctx, "rec")
	require.NoError(t, err)
	require.Len(t, tbl.Metadata().Snapshots(), 1, "never the current snapshot")
	res, found, err := e.f.FindTxn(ctx, "rec", "r4")
	require.NoError(t, err)
	require.True(t, found, "the head's txn")
	require.Equal(t, tbl.CurrentSnapshot().SnapshotID, res.SnapshotID)
	require.Len(t, res.DataFiles, 1)
	_, found, err = e.f.FindTxn(ctx, "rec", "r0")
	require.NoError(t, err)
	require.False(t, found, "an expired txn is outside the retained history")

	// An append whose txn landed and is the head is replayed after expiry.
	a1 := writeRows(t, e, e.f, "rec", facade.Append, 50, 30, "a1")
	_, err = e.f.Maintain(ctx, "rec")
	require.NoError(t, err)
	tbl, err = e.f.LoadTable(ctx, "rec")
	require.NoError(t, err)
	require.Len(t, tbl.Metadata().Snapshots(), 1)
	files := len(dataFiles(t, e.warehouse))
	again := writeRows(t, e, e.f, "rec", facade.Append, 50, 30, "a1")
	require.True(t, again.Replayed)
	require.Equal(t, a1.SnapshotID, again.SnapshotID)
	require.Equal(t, a1.Checksum, again.Checksum)
	require.Len(t, dataFiles(t, e.warehouse), files, "nothing written")

	// Commit's retry path: the same txn lands while this one is staged;
	// the conflict retry finds it at the head and replays.
	st, err := e.f.Stage(ctx, facade.Target{DatasetID: "rec"}, appendReq(t, e, 80, 10, "a2"))
	require.NoError(t, err)
	a2 := writeRows(t, e, e.f, "rec", facade.Append, 80, 10, "a2")
	_, err = e.f.Maintain(ctx, "rec")
	require.NoError(t, err)
	got, err := st.Commit(ctx)
	require.NoError(t, err)
	require.True(t, got.Replayed)
	require.Equal(t, a2.SnapshotID, got.SnapshotID)

	// __row_index continues from the head's summary after expiry, and
	// from the data files for a head written without the summary key.
	requireDense(t, rowIndices(t, e.f, "rec"), 90)
	st, err = e.f.Stage(ctx, facade.Target{DatasetID: "rec"}, appendReq(t, e, 90, 10, "a3"))
	require.NoError(t, err)
	facade.StripSummaryKey(st, facade.SummaryNextRowIndex)
	res, err = st.Commit(ctx)
	require.NoError(t, err)
	require.NotContains(t, res.Summary, facade.SummaryNextRowIndex)
	last := writeRows(t, e, e.f, "rec", facade.Append, 100, 10, "a4")
	require.Equal(t, "110", last.Summary[facade.SummaryNextRowIndex])
	requireDense(t, rowIndices(t, e.f, "rec"), 110)
}

func appendReq(t *testing.T, e *icebergEnv, from, n int, txn string) facade.WriteRequest {
	bs := contract.Batches(e.mem, contract.Schema(), from, n, n, 1<<30)
	t.Cleanup(func() {
		for _, b := range bs {
			b.Release()
		}
	})
	return facade.WriteRequest{Mode: facade.Append, Schema: contract.Schema(), Rows: contract.Seq(bs), TxnID: txn}
}

// TestOrphanPass: the orphan pass deletes an old stray data file (a killed
// staging) and an old metadata.json no longer in the metadata log, and
// keeps a fresh stray file, the files still in their grace, every
// referenced file and the version hint, even when all of them are old.
func TestOrphanPass(t *testing.T) {
	t.Parallel()
	pol := facade.Lifecycle{KeepLast: 2, EveryCommits: 1, FileGrace: time.Hour, OrphanEvery: -1}
	e := newIcebergEnv(t, func(c *facade.Config) { c.Lifecycle = pol })
	defer e.mem.AssertSize(t, 0)
	ctx := context.Background()
	var written []facade.CommitResult
	for i := range 6 {
		written = append(written, writeRows(t, e, e.f, "orph", facade.Replace, i*100, 50, ""))
	}
	rep, err := e.f.Maintain(ctx, "orph")
	require.NoError(t, err)
	require.Equal(t, 4, rep.SnapshotsExpired)
	require.Zero(t, rep.OrphansDeleted)

	dir := tableDir(t, e.f, "orph")
	oldStray := filepath.Join(dir, "data", "00000-0-killed-staging.parquet")
	freshStray := filepath.Join(dir, "data", "00000-0-running-staging.parquet")
	oldMeta := filepath.Join(dir, "metadata", "00000-0a0a0a0a-0000-0000-0000-000000000000.metadata.json")
	hint := filepath.Join(dir, "metadata", "version-hint.text")
	for _, p := range []string{oldStray, freshStray, oldMeta, hint} {
		require.NoError(t, os.WriteFile(p, []byte("PAR1 stray"), 0o644))
	}
	// Everything but the fresh stray file is older than OrphanAge.
	past := time.Now().Add(-3 * time.Hour)
	var before []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == freshStray {
			return err
		}
		before = append(before, p)
		return os.Chtimes(p, past, past)
	}))

	rep, err = e.f.Maintain(ctx, "orph")
	require.NoError(t, err)
	require.Equal(t, 2, rep.OrphansDeleted, "the old stray file and the old metadata.json")
	require.Zero(t, rep.FilesDeleted, "the expired files are in their grace")
	require.False(t, exists(oldStray))
	require.False(t, exists(oldMeta))
	require.True(t, exists(freshStray))
	require.True(t, exists(hint))
	for _, p := range before {
		if p != oldStray && p != oldMeta {
			require.True(t, exists(p), "kept: %s", p)
		}
	}
	for _, w := range written[:4] { // expired, pending their grace
		for _, df := range w.DataFiles {
			require.True(t, exists(df.Path))
		}
	}
	tbl, err := e.f.LoadTable(ctx, "orph")
	require.NoError(t, err)
	require.Contains(t, tbl.Properties(), facade.TablePropOrphansCheckedAt)
	sum, err := e.f.Checksum(ctx, "orph", 0)
	require.NoError(t, err)
	require.Equal(t, written[5].Checksum, sum)
}

// TestExpireSnapshotsPostCommit documents the iceberg-go behaviour Maintain
// avoids: with its default post-commit cleanup, ExpireSnapshots deletes the
// expired files at once and a failed delete (here: a file already gone)
// makes Commit return an error for a commit that landed.
func TestExpireSnapshotsPostCommit(t *testing.T) {
	t.Parallel()
	e := newIcebergEnv(t, func(c *facade.Config) { c.Lifecycle = facade.Lifecycle{Disabled: true} })
	defer e.mem.AssertSize(t, 0)
	ctx := context.Background()
	first := writeRows(t, e, e.f, "post", facade.Replace, 0, 10, "")
	writeRows(t, e, e.f, "post", facade.Replace, 100, 10, "")
	require.NoError(t, os.Remove(strings.TrimPrefix(first.DataFiles[0].Path, "file://")))
	tbl, err := e.f.LoadTable(ctx, "post")
	require.NoError(t, err)
	txn := tbl.NewTransaction()
	require.NoError(t, txn.ExpireSnapshots(table.WithRetainLast(1), table.WithOlderThan(0)))
	got, err := txn.Commit(ctx)
	require.Error(t, err, "a delete failed after the commit")
	require.NotNil(t, got)
	tbl, err = e.f.LoadTable(ctx, "post")
	require.NoError(t, err)
	require.Len(t, tbl.Metadata().Snapshots(), 1, "yet the expiry landed")
}

// TestKeepYoungerThan: snapshots younger than KeepYoungerThan survive
// expiry beyond KeepLast, and commits do not call for maintenance that
// would expire nothing.
func TestKeepYoungerThan(t *testing.T) {
	t.Parallel()
	pol := facade.Lifecycle{KeepLast: 1, EveryCommits: 1, KeepYoungerThan: time.Hour}
	e := newIcebergEnv(t, func(c *facade.Config) { c.Lifecycle = pol })
	defer e.mem.AssertSize(t, 0)
	ctx := context.Background()
	for i := range 3 {
		res := writeRows(t, e, e.f, "young", facade.Replace, i, 5, "")
		require.False(t, res.MaintenanceDue, "nothing expirable")
	}
	rep, err := e.f.Maintain(ctx, "young")
	require.NoError(t, err)
	require.Zero(t, rep.SnapshotsExpired)
	require.Equal(t, "nothing due", rep.Skipped)
	rep, err = e.f.MaintainWith(ctx, "young", facade.Lifecycle{KeepLast: 1, EveryCommits: 1})
	require.NoError(t, err)
	require.Equal(t, 2, rep.SnapshotsExpired)
	rep, err = e.f.MaintainWith(ctx, "young", facade.Lifecycle{Disabled: true})
	require.NoError(t, err)
	require.Equal(t, "disabled", rep.Skipped)
}

// Compaction is size-tiered: over a long run of small appends each row is
// rewritten a logarithmic number of times (not once per compaction), and
// the live data files stay few.
func TestCompactionIsTiered(t *testing.T) {
	t.Parallel()
	e := newIcebergEnv(t)
	defer e.mem.AssertSize(t, 0)
	ctx := context.Background()
	const (
		writes = 240
		rows   = 20
	)
	pol := facade.Lifecycle{FileGrace: -1}
	var rewritten, runs int64
	for i := range writes {
		res := writeRows(t, e, e.f, "tiered", facade.Append, i*rows, rows, "")
		if !res.MaintenanceDue {
			continue
		}
		rep, err := e.f.MaintainWith(ctx, "tiered", pol)
		require.NoError(t, err)
		rewritten += rep.CompactedRows
		runs++
	}
	tbl, err := e.f.LoadTable(ctx, "tiered")
	require.NoError(t, err)
	props := tbl.CurrentSnapshot().Summary.Properties
	live, err := strconv.Atoi(props["total-data-files"])
	require.NoError(t, err)
	size, err := strconv.ParseInt(props["total-files-size"], 10, 64)
	require.NoError(t, err)
	t.Logf("%d appends, %d maintenance runs: %d live files (%d B), %d rows rewritten by compaction (%.1fx the table's rows)",
		writes, runs, live, size, rewritten, float64(rewritten)/float64(writes*rows))
	// log2(240/16) < 4 tiers plus at most 2*CompactMinFiles new files.
	require.LessOrEqual(t, live, 2*facade.DefaultCompactMinFiles+6)
	// Rewriting everything at each of the ~15 compactions would be ~8x.
	require.Less(t, rewritten, int64(5*writes*rows))
	requireDense(t, rowIndices(t, e.f, "tiered"), writes*rows)
}
