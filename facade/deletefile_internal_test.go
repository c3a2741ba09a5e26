package facade

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
)

// A small position delete file is written uncompressed; a larger one takes
// the codec of the table's data files; a codec the writer does not know
// fails the write.
func TestDeleteFileProps(t *testing.T) {
	for _, tc := range []struct {
		props iceberg.Properties
		n     int
		want  compress.Compression
	}{
		{iceberg.Properties{}, 1, compress.Codecs.Uncompressed},
		{iceberg.Properties{}, smallDeleteFile, compress.Codecs.Uncompressed},
		{iceberg.Properties{}, smallDeleteFile + 1, compress.Codecs.Zstd},
		{iceberg.Properties{table.ParquetCompressionKey: "snappy"}, 1 << 20, compress.Codecs.Snappy},
		{iceberg.Properties{table.ParquetCompressionKey: "snappy"}, 3, compress.Codecs.Uncompressed},
	} {
		p, err := deleteFileProps(tc.props, tc.n)
		require.NoError(t, err)
		require.Equal(t, tc.want, p.Compression(), "%v %d", tc.props, tc.n)
	}
	_, err := deleteFileProps(iceberg.Properties{table.ParquetCompressionKey: "nope"}, smallDeleteFile+1)
	require.ErrorContains(t, err, "nope")
}

// A v2 merge's position delete files are scoped to their data file by
// whole, equal file_path bounds (what engines read as the referenced data
// file); referenced_data_file is left unset, so the commit does not read
// every data manifest to check the files are live. Scan planning applies
// each to its data file only, and the rows read are the merge's.
func TestPositionDeletesScopedByBounds(t *testing.T) {
	t.Parallel()
	env := newCompactEnv(t, mergeOnRead)
	f := env.f
	const ds = "scoped"
	mergeWrite(t, f, ds, idRange(0, 500), plainName)
	mergeWrite(t, f, ds, idRange(500, 1000), plainName)
	ids := idRange(10, 990) // rows deleted from both files
	mergeWrite(t, f, ds, ids, plainName)
	var dels int
	for _, d := range liveDeleteFiles(t, f, ds) {
		require.Nil(t, d.ReferencedDataFile())
		ref := referencedPath(d)
		require.NotEmpty(t, ref, "file_path bounds equal and whole")
		require.Greater(t, len(ref), 16, "longer than a truncated bound")
		dels++
	}
	tbl, err := f.LoadTable(context.Background(), ds)
	require.NoError(t, err)
	require.Equal(t, 2, dels)
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	require.NoError(t, err)
	withDeletes := 0
	for _, tk := range tasks {
		require.LessOrEqual(t, len(tk.DeleteFiles), 1, tk.File.FilePath())
		for _, d := range tk.DeleteFiles {
			require.Equal(t, tk.File.FilePath(), referencedPath(d))
			withDeletes++
		}
	}
	require.Equal(t, 2, withDeletes, "each delete file applies to its data file only")
	want, err := ChecksumBatches(mergeRowsOf(ids, plainName, nil))
	require.NoError(t, err)
	got, err := f.Checksum(context.Background(), ds, 0)
	require.NoError(t, err)
	require.Equal(t, want, got)
}
