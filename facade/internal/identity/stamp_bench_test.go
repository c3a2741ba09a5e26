package identity

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// BenchmarkStamp measures the stamper alone (row hashes, checksum, the
// three identity columns) on 16,384-row batches of the examples/bench shape:
// id bigint, name text, amount numeric(12,2), ts timestamptz, flag bool,
// attrs jsonb (~60 B), category text.
func BenchmarkStamp(b *testing.B) {
	const n = 16384
	mem := memory.DefaultAllocator
	in, out := benchSchemas()
	rec := benchRows(mem, in, 0, n)
	defer rec.Release()
	st := NewStamper(mem, "bench", in, out, nil, -1, -1, 0, 1_700_000_000_000_000, 0)
	b.SetBytes(n) // MB/s reads as million rows per second
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		o, err := st.Stamp(rec)
		if err != nil {
			b.Fatal(err)
		}
		o.Release()
	}
}

// BenchmarkStampStream stamps a stream of 1Mi distinct rows (64 batches of
// 16,384, cycled) of the examples/bench shape, so the ordinal table is
// touched at random as in a large write (BenchmarkStamp repeats one batch,
// whose slots stay in cache).
func BenchmarkStampStream(b *testing.B) {
	const n, batches = 16384, 64
	mem := memory.DefaultAllocator
	in, out := benchSchemas()
	recs := make([]arrow.RecordBatch, batches)
	for k := range recs {
		recs[k] = benchRows(mem, in, k*n, n)
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	st := NewStamper(mem, "bench", in, out, nil, -1, -1, 0, 1_700_000_000_000_000, 0)
	b.SetBytes(n) // MB/s reads as million rows per second
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		o, err := st.Stamp(recs[i%batches])
		if err != nil {
			b.Fatal(err)
		}
		o.Release()
	}
}

// benchSchemas: the request and table schemas of the examples/bench shape.
func benchSchemas() (in, out *arrow.Schema) {
	in = arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "amount", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "attrs", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "category", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	out = arrow.NewSchema(append(in.Fields(),
		arrow.Field{Name: ColRowIndex, Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: ColRowID, Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: ColCreatedAt, Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	), nil)
	return in, out
}

// benchRows: n rows of the examples/bench shape, the first numbered from.
func benchRows(mem memory.Allocator, in *arrow.Schema, from, n int) arrow.RecordBatch {
	rb := array.NewRecordBuilder(mem, in)
	defer rb.Release()
	cats := []string{"red", "green", "blue", "black"}
	for i := from; i < from+n; i++ {
		rb.Field(0).(*array.Int64Builder).Append(int64(i))
		rb.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("name-%d", i))
		rb.Field(2).(*array.Decimal128Builder).Append(decimal128.FromI64(int64(i % 100000)))
		rb.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + int64(i)*1_000_000))
		rb.Field(4).(*array.BooleanBuilder).Append(i%3 == 0)
		rb.Field(5).(*array.StringBuilder).Append(fmt.Sprintf(`{"k": %d, "v": %d, "tag": "abcdefghij", "note": "xyzxyzxyz"}`, i, i%7))
		rb.Field(6).(*array.StringBuilder).Append(cats[i%4])
	}
	return rb.NewRecordBatch()
}
