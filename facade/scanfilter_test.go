package facade_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
)

// TestScanFilterPrunesDays: a Range on the day-partitioned column plans only
// the files of the matching days (fewer files, fewer bytes) and returns
// exactly the rows of those days; the unfiltered scan plans every file.
func TestScanFilterPrunesDays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n, days = 6000, 30
	day := func(id int64) int64 { return id * days / n }
	e := partitionedEnv(t, facade.Partitioning{Fields: []facade.PartitionField{{Column: "ts", Transform: "day"}}})
	_, err := e.f.Write(ctx, facade.Target{DatasetID: "part-days"}, facade.WriteRequest{
		Mode: facade.Replace, Schema: partSchema(), Rows: partRows(e.mem, seqIDs(n), day, 500)})
	require.NoError(t, err)

	allFiles, allBytes, err := facade.PlannedFiles(ctx, e.f, "part-days", facade.ScanOptions{})
	require.NoError(t, err)
	require.Equal(t, days, allFiles)

	// days 10, 11 and 12: [day 10, day 13)
	lo, hi := partEpoch.Add(10*24*time.Hour), partEpoch.Add(13*24*time.Hour)
	opts := facade.ScanOptions{Filter: []facade.Range{{Column: "ts", Min: lo, Max: hi, MaxExclusive: true}}}
	files, bytes, err := facade.PlannedFiles(ctx, e.f, "part-days", opts)
	require.NoError(t, err)
	require.Equal(t, 3, files)
	require.Less(t, bytes*5, allBytes, "3 of 30 files")

	var want []int64
	for id := range int64(n) {
		if d := day(id); d >= 10 && d < 13 {
			want = append(want, id)
		}
	}
	require.Equal(t, want, scannedIDs(t, e, "part-days", opts))
	require.Equal(t, seqIDs(n), scannedIDs(t, e, "part-days", facade.ScanOptions{}))

	// a window (Low, High] that cuts inside a day: the day's file is read,
	// only the rows in the window come back
	wlo, whi := partEpoch.Add(5*24*time.Hour+1050*time.Second), partEpoch.Add(5*24*time.Hour+1060*time.Second)
	wopts := facade.ScanOptions{Filter: []facade.Range{{Column: "ts", Min: wlo, MinExclusive: true, Max: whi}}}
	files, _, err = facade.PlannedFiles(ctx, e.f, "part-days", wopts)
	require.NoError(t, err)
	require.Equal(t, 1, files)
	// ids of day 5 are 1000..1199 with ts = day start + id%3600 seconds
	var wantIDs []int64
	for id := int64(1000); id < 1200; id++ {
		if s := id % 3600; s > 1050 && s <= 1060 {
			wantIDs = append(wantIDs, id)
		}
	}
	require.Equal(t, wantIDs, scannedIDs(t, e, "part-days", wopts))
}

// scannedIDs scans the id column under opts' filter, sorted.
func scannedIDs(t *testing.T, e *icebergEnv, dataset string, opts facade.ScanOptions) []int64 {
	t.Helper()
	opts.Columns = []string{"id"}
	ids := []int64{}
	for rec, err := range e.f.Scan(context.Background(), dataset, opts) {
		require.NoError(t, err)
		ids = append(ids, rec.Column(0).(*array.Int64).Int64Values()...)
	}
	slices.Sort(ids)
	return ids
}

// TestScanFilterMinMax: on an unpartitioned table, a Range prunes the
// files whose column statistics cannot match.
func TestScanFilterMinMax(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newIcebergEnv(t)
	for i := range 5 {
		ids := make([]int64, 200)
		for j := range ids {
			ids[j] = int64(i*200 + j)
		}
		_, err := e.f.Write(ctx, facade.Target{DatasetID: "mm"}, facade.WriteRequest{
			Mode: facade.Append, Schema: partSchema(), Rows: partRows(e.mem, ids, func(int64) int64 { return 0 }, 100)})
		require.NoError(t, err)
	}
	files, _, err := facade.PlannedFiles(ctx, e.f, "mm", facade.ScanOptions{})
	require.NoError(t, err)
	require.Equal(t, 5, files)
	opts := facade.ScanOptions{Columns: []string{"name"}, Filter: []facade.Range{{Column: "id", Min: 350, Max: 520}}}
	files, _, err = facade.PlannedFiles(ctx, e.f, "mm", opts)
	require.NoError(t, err)
	require.Equal(t, 2, files)
	var names []string
	for rec, err := range e.f.Scan(ctx, "mm", opts) {
		require.NoError(t, err)
		require.Equal(t, 1, int(rec.NumCols()))
		for i := range int(rec.NumRows()) {
			names = append(names, rec.Column(0).ValueStr(i))
		}
	}
	var want []string
	for id := 350; id <= 520; id++ {
		want = append(want, fmt.Sprintf("row-%d", id))
	}
	require.ElementsMatch(t, want, names)
}
