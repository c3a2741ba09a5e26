package facade_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
)

// TestScanInPrunes: a key-set scan (ScanOptions.In) reads only the files
// that can hold its keys: by partition on a table partitioned by the key,
// by min/max statistics on a table whose files are ordered by it, also
// with more keys than iceberg-go prunes a set by; the rows are exactly
// those of the keys.
func TestScanInPrunes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := partitionedEnv(t, facade.Partitioning{Fields: []facade.PartitionField{{Column: "id", Transform: "truncate[100]"}}})
	const ds = "part-in"
	_, err := e.f.Write(ctx, facade.Target{DatasetID: ds}, facade.WriteRequest{
		Mode: facade.Replace, Schema: partSchema(), Rows: partRows(e.mem, seqIDs(2000), func(int64) int64 { return 0 }, 500)})
	require.NoError(t, err)
	all, _, err := facade.PlannedFiles(ctx, e.f, ds, facade.ScanOptions{})
	require.NoError(t, err)
	require.Equal(t, 20, all)
	opts := facade.ScanOptions{In: []facade.In{{Column: "id", Values: []any{5, int64(150), int64(199), int64(1234), int64(5000)}}}}
	files, _, err := facade.PlannedFiles(ctx, e.f, ds, opts)
	require.NoError(t, err)
	require.Equal(t, 3, files, "partitions 0, 100 and 1200")
	require.Equal(t, []int64{5, 150, 199, 1234}, scannedIDs(t, e, ds, opts))

	// an unpartitioned table of ordered appends: min/max pruning, with 300
	// keys (above iceberg-go's 200-value limit on set pruning) in 2 files
	// of 8, spread so that their overall range covers 5 files
	const mm = "in-minmax"
	for i := range 8 {
		_, err := e.f.Write(ctx, facade.Target{DatasetID: mm}, facade.WriteRequest{
			Mode: facade.Append, Schema: partSchema(), Rows: partRows(e.mem, idsFrom(int64(i*1000), 1000), func(int64) int64 { return 0 }, 500)})
		require.NoError(t, err)
	}
	var keys []any
	var want []int64
	for k := int64(1000); k < 1150; k++ {
		keys, want = append(keys, k), append(want, k)
	}
	for k := int64(5500); k < 5650; k++ {
		keys, want = append(keys, k), append(want, k)
	}
	keys = append(keys, nil) // no NULL ids: no file for it
	opts = facade.ScanOptions{In: []facade.In{{Column: "id", Values: keys}}}
	files, _, err = facade.PlannedFiles(ctx, e.f, mm, opts)
	require.NoError(t, err)
	require.Equal(t, 2, files)
	require.Equal(t, want, scannedIDs(t, e, mm, opts))
}

func idsFrom(lo int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = lo + int64(i)
	}
	return out
}
