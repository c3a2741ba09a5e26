package writestrategy_test

import (
	"context"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/writestrategy"

	"github.com/lakewrite/lakewrite/sink"
)

// The Dispatcher keeps tables healthy with no configuration: over many
// writes the table lifecycle runs by itself (under a maintenance intent,
// never on most writes), snapshots and data files stay bounded, and the
// dataset's rows, checksum, row count and watermark are those of the
// writes alone (maintenance stamps only maintained_at).

// facade.Lifecycle's documented defaults (KeepLast, EveryCommits,
// MetadataVersions).
const keepLast, everyCommits, metadataVersions = 10, 10, 10

func TestDispatchLifecycleByDefault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 40)
	ensureOutputs(t, w.pool, "appended", "replaced")
	w.iceberg("appended", "replaced")
	f := w.lake.(*facade.Facade)

	const writes = 60
	for _, out := range []string{"appended", "replaced"} {
		var s writestrategy.WriteStrategy = writestrategy.Transform{Output: out, Source: "orders"}
		if out == "appended" {
			s = writestrategy.Deploy{Mode: writestrategy.KindAppendAlways, Source: "orders", Target: out}
		}
		runs := 0
		var last writestrategy.WriteResult
		for i := range writes {
			res := w.mustWrite(s)
			last = res[0]
			if last.Maintenance != nil {
				runs++
			}
			tbl, err := f.LoadTable(ctx, out)
			require.NoError(t, err)
			require.LessOrEqual(t, len(tbl.Metadata().Snapshots()), keepLast+everyCommits+1, "%s write %d", out, i)
			files, err := strconv.Atoi(tbl.CurrentSnapshot().Summary.Properties["total-data-files"])
			require.NoError(t, err)
			require.LessOrEqual(t, files, 2*8+1, "%s write %d: live data files", out, i)
		}
		require.Positive(t, runs, out)
		require.Less(t, runs, writes/2, "%s: maintenance runs on a minority of writes", out)

		ds, err := w.ledger.Dataset(ctx, out)
		require.NoError(t, err)
		require.False(t, ds.MaintainedAt.IsZero(), out)
		require.NotEmpty(t, ds.Maintenance, out)
		require.True(t, ds.SourceWatermark.Equal(last.CommittedAt), "%s: the watermark is the last write's", out)
		wantRows := int64(40)
		if out == "appended" {
			wantRows = 40 * writes
		}
		require.Equal(t, wantRows, ds.RowCount, out)
		sum := w.checksum(out)
		require.Equal(t, wantRows, sum.Rows, out)
		// Committed windows list the writes only, never maintenance.
		txns, err := w.ledger.Committed(ctx, out, time.Time{}, time.Now().Add(time.Hour))
		require.NoError(t, err)
		require.Len(t, txns, writes, out)
	}
	// Same rows as the row store's compute, in __row_index order.
	requireDenseRowIndex(t, f, "appended", 40*writes)
}

// requireDenseRowIndex checks that __row_index is 0..n-1, each once.
func requireDenseRowIndex(t *testing.T, f *facade.Facade, id string, n int) {
	t.Helper()
	seen := make([]bool, n)
	count := 0
	for rec, err := range f.Scan(context.Background(), id, facade.ScanOptions{Columns: []string{facade.ColRowIndex}}) {
		require.NoError(t, err)
		col := rec.Column(0)
		for i := range int(rec.NumRows()) {
			v := col.(interface{ Value(int) int64 }).Value(i)
			require.True(t, v >= 0 && v < int64(n) && !seen[v], "row index %d", v)
			seen[v] = true
			count++
		}
	}
	require.Equal(t, n, count)
}

// Explicit maintenance (a service that schedules it itself) waits for a
// writer holding the dataset, then runs and records its report on the
// dataset, leaving the watermark, row count and schema as they were.
func TestDispatchMaintain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorldWith(t, nil, &facade.Config{Lifecycle: facade.Lifecycle{KeepLast: 1, EveryCommits: 100, FileGrace: -1}}, nil, nil)
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 40)
	ensureOutputs(t, w.pool, "out")
	w.iceberg("out")
	for range 5 {
		res := w.mustWrite(writestrategy.Deploy{Mode: writestrategy.KindAppendAlways, Source: "orders", Target: "out"})
		require.Nil(t, res[0].Maintenance, "not due under this policy")
	}
	before, err := w.ledger.Dataset(ctx, "out")
	require.NoError(t, err)

	// A writer holds the dataset: Maintain waits for it.
	in, err := w.ledger.Open(ctx, ledger.OpenParams{DatasetID: "out", WriterID: writer, Sink: sink.Iceberg, WriteMode: facade.Append})
	require.NoError(t, err)
	done := make(chan error, 1)
	var rep facade.MaintenanceReport
	go func() {
		var err error
		rep, err = w.d.Maintain(ctx, writer, "out")
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Maintain ran while a writer held the dataset: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, w.ledger.Abort(ctx, in, nil))
	require.NoError(t, <-done)
	require.Equal(t, "out", rep.DatasetID)

	after, err := w.ledger.Dataset(ctx, "out")
	require.NoError(t, err)
	require.False(t, after.MaintainedAt.IsZero())
	require.NotEmpty(t, after.Maintenance)
	require.True(t, before.SourceWatermark.Equal(after.SourceWatermark))
	require.Equal(t, before.RowCount, after.RowCount)
	require.JSONEq(t, string(before.Schema), string(after.Schema))
	require.EqualValues(t, 200, w.checksum("out").Rows)
	_, err = w.d.Maintain(ctx, "", "out")
	require.ErrorIs(t, err, writestrategy.ErrInvalid)
}

// One dataset written 1,000 times as replaces and 1,000 times as appends
// through a default Dispatcher on the embedded default (SQL catalog,
// local warehouse), default lifecycle except FileGrace: none here, so the
// storage bounds below are reached within the test's run time (with the
// default one-minute grace the files dereferenced in the last minute are
// still on storage; facade.TestGraceProtectsReader covers the grace).
// After every write: at most KeepLast+EveryCommits snapshots, a small
// metadata.json, MetadataVersions+1 metadata files, few live manifests and
// data files, and files and bytes on storage under bounds that do not grow
// with the write count; after every compaction the rows and the checksum
// are exactly those of the writes.
func TestDispatchThousandWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("long history: skipped with -short")
	}
	t.Parallel()
	ctx := context.Background()
	w := newWorldWith(t, nil, &facade.Config{Lifecycle: facade.Lifecycle{FileGrace: -1}}, nil, nil)
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 40)
	ensureOutputs(t, w.pool, "replaced", "appended")
	w.iceberg("replaced", "appended")
	f := w.lake.(*facade.Facade)
	base := w.checksum("orders")

	const writes = 1000
	for _, out := range []string{"replaced", "appended"} {
		var s writestrategy.WriteStrategy = writestrategy.Transform{Output: out, Source: "orders"}
		if out == "appended" {
			s = writestrategy.Deploy{Mode: writestrategy.KindAppendAlways, Source: "orders", Target: out}
		}
		compactions := 0
		for i := range writes {
			res := w.mustWrite(s)
			tbl, err := f.LoadTable(ctx, out)
			require.NoError(t, err)
			st := tableStorage(t, tbl.Location())
			require.LessOrEqual(t, len(tbl.Metadata().Snapshots()), keepLast+everyCommits, "%s write %d", out, i)
			require.Less(t, st.metadataBytes, int64(48<<10), "%s write %d: metadata.json", out, i)
			require.LessOrEqual(t, st.metadataFiles, metadataVersions+1, "%s write %d", out, i)
			require.LessOrEqual(t, st.files, 160, "%s write %d: files on storage", out, i)
			if out == "replaced" {
				require.Less(t, st.bytes, int64(1<<20), "%s write %d: bytes on storage", out, i)
			} else {
				// Live data grows with the appends; what is not live does not.
				require.Less(t, st.bytes, int64(1<<20)+int64(i+1)*4<<10, "%s write %d: bytes on storage", out, i)
			}
			if m := res[0].Maintenance; m != nil && m.CompactedFiles > 0 {
				compactions++
				sum := w.checksum(out)
				want := base
				if out == "appended" {
					want = facade.Checksum{Rows: base.Rows * int64(i+1), Sum: base.Sum * uint64(i+1), Sum2: base.Sum2 * uint64(i+1)}
				}
				require.Equal(t, want, sum, "%s write %d: after compaction", out, i)
			}
		}
		if out == "appended" {
			require.Positive(t, compactions)
			requireDenseRowIndex(t, f, out, 40*writes)
		}
		tbl, err := f.LoadTable(ctx, out)
		require.NoError(t, err)
		st := tableStorage(t, tbl.Location())
		t.Logf("%s: %d writes, %d compactions; %d snapshots, metadata.json %d B, %d files, %d B on storage",
			out, writes, compactions, len(tbl.Metadata().Snapshots()), st.metadataBytes, st.files, st.bytes)
	}
}

type storage struct {
	files, metadataFiles int
	bytes, metadataBytes int64
}

// tableStorage walks a local table location.
func tableStorage(t *testing.T, loc string) storage {
	t.Helper()
	var st storage
	var newest time.Time
	root := strings.TrimPrefix(loc, "file://")
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st.files++
		st.bytes += info.Size()
		if strings.HasSuffix(p, ".metadata.json") {
			st.metadataFiles++
			if info.ModTime().After(newest) {
				newest, st.metadataBytes = info.ModTime(), info.Size()
			}
		}
		return nil
	}))
	return st
}
