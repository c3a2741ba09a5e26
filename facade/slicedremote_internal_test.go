package facade

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// remoteBatch is n rows of (id int64, name string, day date32, amount
// decimal(12,2), ts timestamp) from id first, clustered by 250 ids.
func remoteBatch(t *testing.T, first, n int64) arrow.RecordBatch {
	t.Helper()
	dec := &arrow.Decimal128Type{Precision: 12, Scale: 2}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "day", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "amount", Type: dec, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := first; i < first+n; i++ {
		k := i / 250 // rows clustered by partition
		b.Field(0).(*array.Int64Builder).Append(i)
		if k%3 == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("n%d", k))
		}
		b.Field(2).(*array.Date32Builder).Append(arrow.Date32(20000 + k))
		b.Field(3).(*array.Decimal128Builder).Append(decimal128.FromI64(k * 137))
		b.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + k*3_600_000_000 + i))
	}
	return b.NewRecordBatch()
}

// TestSliceEncodingRoundTrip: a slice written by a write resumed from its
// Ref (JSON) and decoded by the write that began it has the same data
// files, every statistic included (partition values of several types,
// counts, sizes, bounds, split offsets), and stages into the same commit
// as the slice written in the beginning process.
func TestSliceEncodingRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, partitioned := range []bool{false, true} {
		t.Run(fmt.Sprint("partitioned=", partitioned), func(t *testing.T) {
			cat, err := NewPostgresCatalog(ctx, pgtest.Pool(t), CatalogConfig{Warehouse: t.TempDir()})
			require.NoError(t, err)
			cfg := &Config{Lifecycle: Lifecycle{Disabled: true}}
			if partitioned {
				cfg.PartitionFor = func(string) (Partitioning, bool) {
					return Partitioning{Fields: []PartitionField{{Column: "day"}, {Column: "name"}, {Column: "amount"}, {Column: "ts", Transform: "hour"}}}, true
				}
			}
			coordF, err := New(cat, cfg)
			require.NoError(t, err)
			workerF, err := New(cat, cfg) // another process's facade
			require.NoError(t, err)

			rec1, rec2 := remoteBatch(t, 0, 500), remoteBatch(t, 500, 700)
			defer rec1.Release()
			defer rec2.Release()
			one := func(r arrow.RecordBatch) func(func(arrow.RecordBatch, error) bool) {
				return func(yield func(arrow.RecordBatch, error) bool) { yield(r, nil) }
			}
			target := Target{DatasetID: "remote", WriterID: "w"}
			for round := range 2 { // create the table, then append to it
				coord, err := coordF.BeginSliced(ctx, target, WriteRequest{Mode: Append, Schema: rec1.Schema(), TxnID: fmt.Sprint("txn-", round)})
				require.NoError(t, err)
				ref, err := coord.Ref()
				require.NoError(t, err)
				refJSON, err := json.Marshal(ref)
				require.NoError(t, err)
				var ref2 SlicedWriteRef
				require.NoError(t, json.Unmarshal(refJSON, &ref2))
				worker, err := workerF.ResumeSliced(ctx, ref2)
				require.NoError(t, err)

				local, err := coord.WriteSlice(ctx, 0, 0, one(rec1))
				require.NoError(t, err)
				remote, err := worker.WriteSlice(ctx, 1, 500, one(rec2))
				require.NoError(t, err)
				enc, err := worker.EncodeSlice(remote)
				require.NoError(t, err)
				_, err = coord.EncodeSlice(remote)
				require.ErrorIs(t, err, ErrInvalidRequest, "a slice of another SlicedWrite")
				dec, err := coord.DecodeSlice(enc)
				require.NoError(t, err)
				require.Equal(t, remote.Index, dec.Index)
				require.Equal(t, remote.First, dec.First)
				require.Equal(t, remote.Checksum, dec.Checksum)
				require.Equal(t, remote.DataFiles, dec.DataFiles)
				require.Len(t, dec.files, len(remote.files))
				if partitioned {
					require.Greater(t, len(dec.files), 1, "one file per partition")
				}
				for i := range remote.files {
					requireSameDataFile(t, remote.files[i], dec.files[i])
				}
				_, err = worker.DecodeSlice(enc)
				require.NoError(t, err, "the worker's write has the same id")
				other, err := coordF.BeginSliced(ctx, target, WriteRequest{Mode: Append, Schema: rec1.Schema()})
				require.NoError(t, err)
				_, err = other.DecodeSlice(enc)
				require.ErrorIs(t, err, ErrInvalidRequest, "a slice of another write")

				st, err := coord.Stage(ctx, []SliceFiles{local, dec})
				require.NoError(t, err)
				res, err := st.Commit(ctx)
				require.NoError(t, err)
				want, err := ChecksumBatches(func(yield func(arrow.RecordBatch, error) bool) { _ = yield(rec1, nil) && yield(rec2, nil) })
				require.NoError(t, err)
				require.Equal(t, want, res.Checksum)
				require.Equal(t, int64(1200), res.Rows)
			}
			sum, err := coordF.Checksum(ctx, "remote", 0)
			require.NoError(t, err)
			require.Equal(t, int64(2400), sum.Rows)
		})
	}
}

func requireSameDataFile(t *testing.T, a, b iceberg.DataFile) {
	t.Helper()
	require.Equal(t, a.FilePath(), b.FilePath())
	require.Equal(t, a.ContentType(), b.ContentType())
	require.Equal(t, a.FileFormat(), b.FileFormat())
	require.Equal(t, a.SpecID(), b.SpecID())
	require.Equal(t, a.Count(), b.Count())
	require.Equal(t, a.FileSizeBytes(), b.FileSizeBytes())
	require.Equal(t, a.ColumnSizes(), b.ColumnSizes())
	require.Equal(t, a.ValueCounts(), b.ValueCounts())
	require.Equal(t, a.NullValueCounts(), b.NullValueCounts())
	require.Equal(t, a.NaNValueCounts(), b.NaNValueCounts())
	require.Equal(t, a.LowerBoundValues(), b.LowerBoundValues())
	require.Equal(t, a.UpperBoundValues(), b.UpperBoundValues())
	require.Equal(t, a.SplitOffsets(), b.SplitOffsets())
	require.Equal(t, a.SortOrderID(), b.SortOrderID())
	require.Equal(t, a.EqualityFieldIDs(), b.EqualityFieldIDs())
	require.Equal(t, a.KeyMetadata(), b.KeyMetadata())
	pa, pb := a.Partition(), b.Partition()
	require.Len(t, pb, len(pa))
	for id, v := range pa {
		require.Equal(t, fmt.Sprint(v), fmt.Sprint(pb[id]), "partition field %d: %T against %T", id, v, pb[id])
	}
}
