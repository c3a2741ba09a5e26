package facade

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/scanfiles"
)

// splitProps makes iceberg-go plan every data file with more than one row
// group as several scan tasks, as it does for files over 128 MiB.
var splitProps = iceberg.Properties{table.ReadSplitTargetSizeKey: "1"}

// requireSplit asserts that the current snapshot of ds plans more scan
// tasks than it has files, and returns its files.
func requireSplit(t *testing.T, f *Facade, ds string) []iceberg.DataFile {
	t.Helper()
	tbl, err := f.LoadTable(context.Background(), ds)
	require.NoError(t, err)
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	require.NoError(t, err)
	files := scanfiles.DataFiles(tasks)
	require.Greater(t, len(tasks), len(files), "the table's files are split into several scan tasks")
	return files
}

func inputChecksum(t *testing.T, rows func(func(arrow.RecordBatch, error) bool)) Checksum {
	t.Helper()
	sum, err := ChecksumBatches(rows)
	require.NoError(t, err)
	return sum
}

// TestSplitFilesReplaceCompactExpire: on a table whose files are planned
// as several scan tasks each, replace works every time (not only the
// first), reads and checksums count every row exactly once, compaction
// rewrites each split file once, and expiry keeps the current rows.
func TestSplitFilesReplaceCompactExpire(t *testing.T) {
	t.Parallel()
	e := newCompactEnv(t, func(c *Config) {
		c.RowGroupRows = 100
		c.TableProperties = splitProps
		c.Lifecycle = Lifecycle{KeepLast: 1, FileGrace: -1, OrphanAge: -1, EveryCommits: 1, CompactMinFiles: 2}
	})
	defer e.mem.AssertSize(t, 0)
	ctx := context.Background()
	const ds = "split_files"

	for i := range 4 { // a create and three replaces
		n := 1000 + 100*i
		res, err := e.f.Write(ctx, Target{DatasetID: ds}, WriteRequest{Mode: Replace, Schema: compactSchema,
			Rows: batches(e.mem, n, 250, 8), TxnID: fmt.Sprintf("r%d", i)})
		require.NoError(t, err, "write %d", i)
		require.EqualValues(t, n, res.Rows)
		files := requireSplit(t, e.f, ds)
		var rows int64
		for _, df := range files {
			rows += df.Count()
		}
		require.EqualValues(t, n, rows, "the live files hold exactly this write's rows")
		require.Len(t, scanIndexes(t, e.f, ds), n, "a scan reads each split once")
		sum, err := e.f.Checksum(ctx, ds, 0)
		require.NoError(t, err)
		require.Equal(t, inputChecksum(t, batches(e.mem, n, 250, 8)), sum)
	}

	// appends of split files, then compaction
	const appended = 4
	before := 1300
	for i := range appended {
		_, err := e.f.Write(ctx, Target{DatasetID: ds}, WriteRequest{Mode: Append, Schema: compactSchema,
			Rows: batches(e.mem, 300, 300, 8), TxnID: fmt.Sprintf("a%d", i)})
		require.NoError(t, err)
		before += 300
	}
	files := requireSplit(t, e.f, ds)
	require.Len(t, files, 1+appended)
	beforeRows := fullRows(t, e.f, ds)
	require.Len(t, beforeRows, before)
	beforeSum, err := e.f.Checksum(ctx, ds, 0)
	require.NoError(t, err)

	tbl, err := e.f.LoadTable(ctx, ds)
	require.NoError(t, err)
	tbl, rep, err := e.f.compact(ctx, tbl, compactOptions{MinFiles: 2})
	require.NoError(t, err)
	require.Equal(t, 1+appended, rep.CompactedFiles, "each split file is compacted once")
	require.EqualValues(t, before, rep.CompactedRows)
	require.Len(t, liveFiles(t, tbl), rep.WrittenFiles)
	require.Equal(t, beforeRows, fullRows(t, e.f, ds), "compaction keeps every row once")
	sum, err := e.f.Checksum(ctx, ds, 0)
	require.NoError(t, err)
	require.Equal(t, beforeSum, sum)

	// expiry: everything but the current snapshot goes, its rows stay
	time.Sleep(2 * time.Millisecond) // snapshot timestamps are in ms
	mrep, err := e.f.Maintain(ctx, ds)
	require.NoError(t, err)
	require.Positive(t, mrep.SnapshotsExpired)
	_, err = e.f.Maintain(ctx, ds) // deletes what the expiry dereferenced
	require.NoError(t, err)
	tbl, err = e.f.LoadTable(ctx, ds)
	require.NoError(t, err)
	require.Len(t, tbl.Metadata().Snapshots(), 1)
	require.Equal(t, beforeRows, fullRows(t, e.f, ds))
	for _, p := range parquetFiles(t, e.warehouse) {
		require.Contains(t, localPaths(liveFiles(t, tbl)), p, "only live files stay on storage")
	}

	// and the table still replaces
	_, err = e.f.Write(ctx, Target{DatasetID: ds}, WriteRequest{Mode: Replace, Schema: compactSchema,
		Rows: batches(e.mem, 500, 250, 8), TxnID: "r-last"})
	require.NoError(t, err)
	require.Len(t, scanIndexes(t, e.f, ds), 500)
}
