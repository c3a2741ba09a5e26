package writestrategy_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// The Dispatcher keeps tables healthy with no configuration: over many
// writes the table lifecycle runs by itself (under a maintenance intent,
// never on most writes), snapshots and data files stay bounded, and the
// dataset's rows, checksum, row count and watermark are those of the
// writes alone (maintenance stamps only maintained_at).
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
			require.LessOrEqual(t, len(tbl.Metadata().Snapshots()), facade.DefaultKeepLast+facade.DefaultEveryCommits+1, "%s write %d", out, i)
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
	in, err := w.ledger.Open(ctx, ledger.OpenParams{DatasetID: "out", WriterID: writer, Sink: writestrategy.StorageIceberg, WriteMode: ledger.ModeAppend})
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
