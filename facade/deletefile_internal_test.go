package facade

import (
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
