package facade_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // registers the s3:// scheme, as facade's doc says
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/internal/contract"
	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// TestS3Warehouse runs the S3Properties recipe for real: iceberg-go's S3
// file IO against an S3-compatible server over HTTP (gofakes3, path-style
// addressing, static credentials, as for MinIO or R2), with the SQL catalog
// in Postgres. A replace, an idempotent append, read-back and checksum, and
// a failing write that leaves no object behind.
func TestS3Warehouse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	backend := s3mem.New()
	require.NoError(t, backend.CreateBucket("lake"))
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)

	cat, err := facade.OpenSQLCatalog(ctx, facade.CatalogConfig{
		DatabaseURL: pgtest.URL(t), Warehouse: "s3://lake/warehouse",
		Props: facade.S3Properties(facade.S3Config{Endpoint: srv.URL, Region: "us-east-1",
			AccessKeyID: "test-key", SecretAccessKey: "test-secret", PathStyle: true}),
	})
	require.NoError(t, err)
	t.Cleanup(func() { cat.Close() })
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	f, err := facade.New(cat, &facade.Config{Allocator: mem, RowGroupRows: 300, WriteWorkers: 2})
	require.NoError(t, err)

	sc := contract.Schema()
	bs := contract.Batches(mem, sc, 0, 1000, 250, 1000)
	defer func() {
		for _, b := range bs {
			b.Release()
		}
	}()
	tgt := facade.Target{DatasetID: "s3orders"}
	res, err := f.Write(ctx, tgt, facade.WriteRequest{Mode: facade.Replace, Schema: sc, Rows: contract.Seq(bs)})
	require.NoError(t, err)
	require.EqualValues(t, 1000, res.Rows)
	require.Len(t, res.DataFiles, 2, "two writers, turns of 300 rows")
	for _, df := range res.DataFiles {
		require.True(t, strings.HasPrefix(df.Path, "s3://lake/warehouse/"), df.Path)
	}
	app, err := f.Write(ctx, tgt, facade.WriteRequest{Mode: facade.Append, Schema: sc, Rows: contract.Seq(bs[:1]), TxnID: "t1"})
	require.NoError(t, err)
	again, err := f.Write(ctx, tgt, facade.WriteRequest{Mode: facade.Append, Schema: sc, Rows: contract.Seq(bs[:1]), TxnID: "t1"})
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, app.SnapshotID, again.SnapshotID)

	sum, err := f.Checksum(ctx, "s3orders", 0)
	require.NoError(t, err)
	require.EqualValues(t, 1250, sum.Rows)
	want, err := facade.ChecksumBatches(contract.Seq(append(append(bs[:0:0], bs...), bs[0])))
	require.NoError(t, err)
	require.Equal(t, want, sum)

	// A stream failing after complete files were written: nothing visible,
	// and every object written for it is deleted.
	boom := errors.New("boom")
	_, err = f.Write(ctx, tgt, facade.WriteRequest{Mode: facade.Replace, Schema: sc,
		Rows: func(yield func(arrowBatch, error) bool) {
			for _, b := range bs[:3] {
				if !yield(b, nil) {
					return
				}
			}
			yield(nil, boom)
		}})
	require.ErrorIs(t, err, boom)
	after, err := f.Checksum(ctx, "s3orders", 0)
	require.NoError(t, err)
	require.Equal(t, sum, after)

	ref := referenced(t, f, "s3orders")
	objs, err := backend.ListBucket("lake", &gofakes3.Prefix{HasPrefix: true, Prefix: "warehouse/"}, gofakes3.ListBucketPage{})
	require.NoError(t, err)
	var parquet []string
	for _, o := range objs.Contents {
		if strings.HasSuffix(o.Key, ".parquet") {
			parquet = append(parquet, o.Key)
			require.True(t, ref["s3://lake/"+o.Key], "orphan object %s", o.Key)
		}
	}
	require.Len(t, parquet, len(ref))
}
