package scanfiles

import (
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
)

func dataFile(t *testing.T, content iceberg.ManifestEntryContent, path string, size int64) iceberg.DataFile {
	t.Helper()
	b, err := iceberg.NewDataFileBuilder(*iceberg.UnpartitionedSpec, content, path, iceberg.ParquetFile, nil, nil, nil, 10, size)
	require.NoError(t, err)
	return b.Build()
}

func paths(files []iceberg.DataFile) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.FilePath()
	}
	return out
}

// TestWholeFiles: the splits of a file become one whole-file task at the
// place of its first split, with the union of their delete files; other
// tasks are kept as they are.
func TestWholeFiles(t *testing.T) {
	a := dataFile(t, iceberg.EntryContentData, "a.parquet", 300)
	b := dataFile(t, iceberg.EntryContentData, "b.parquet", 50)
	d1 := dataFile(t, iceberg.EntryContentPosDeletes, "d1.parquet", 5)
	d2 := dataFile(t, iceberg.EntryContentPosDeletes, "d2.parquet", 5)
	tasks := []table.FileScanTask{
		{File: a, Start: 0, Length: 100, DeleteFiles: []iceberg.DataFile{d1}},
		{File: b, Start: 0, Length: 50},
		{File: a, Start: 100, Length: 100, DeleteFiles: []iceberg.DataFile{d1, d2}},
		{File: a, Start: 200, Length: 100},
	}
	got := WholeFiles(tasks)
	require.Len(t, got, 2)
	require.Equal(t, "a.parquet", got[0].File.FilePath())
	require.EqualValues(t, 0, got[0].Start)
	require.EqualValues(t, 300, got[0].Length)
	require.Equal(t, []string{"d1.parquet", "d2.parquet"}, paths(got[0].DeleteFiles))
	require.Equal(t, tasks[1], got[1])
	require.Len(t, tasks[0].DeleteFiles, 1, "the input tasks are not changed")
	require.Equal(t, []string{"a.parquet", "b.parquet"}, paths(DataFiles(tasks)))
	require.Empty(t, WholeFiles(nil))
}
