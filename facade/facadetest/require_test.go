package facadetest_test

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/facadetest"
)

// recorder is a testing.TB that records failures instead of stopping the
// test, to check the assertions' failure paths.
type recorder struct {
	testing.TB
	failed []string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
}

func (r *recorder) requireFailed(t *testing.T, want string) {
	t.Helper()
	if len(r.failed) != 1 || !strings.Contains(r.failed[0], want) {
		t.Fatalf("want one failure containing %q, got %q", want, r.failed)
	}
	r.failed = nil
}

func (r *recorder) requirePassed(t *testing.T) {
	t.Helper()
	if len(r.failed) != 0 {
		t.Fatalf("want no failure, got %q", r.failed)
	}
}

var kv = arrow.NewSchema([]arrow.Field{
	{Name: "k", Type: arrow.PrimitiveTypes.Int64},
	{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// batch builds a (k, v) batch; an empty v is a null.
func batch(mem memory.Allocator, rows ...string) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, kv)
	defer b.Release()
	for i, v := range rows {
		b.Field(0).(*array.Int64Builder).Append(int64(i + 1))
		if v == "" {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(v)
		}
	}
	return b.NewRecordBatch()
}

func one(b arrow.RecordBatch) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) { yield(b, nil) }
}

func TestRequireHelpers(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	lake := facadetest.New(&facadetest.Config{Allocator: mem})
	defer lake.Close()
	r := &recorder{TB: t}

	// Nothing written yet.
	facadetest.RequireSnapshotCount(r, lake, "d", 0)
	r.requirePassed(t)
	facadetest.RequireRows(r, lake, "d", nil)
	r.requireFailed(t, "table not found")
	facadetest.RequireRowCount(r, lake, "d", 0)
	r.requireFailed(t, "table not found")

	b := batch(mem, "a", "b", "", "b")
	defer b.Release()
	res, err := lake.Write(ctx, facade.Target{DatasetID: "d", WriterID: "w"}, facade.WriteRequest{
		Mode: facade.Replace, Schema: kv, Rows: one(b), TxnID: "txn-1"})
	if err != nil {
		t.Fatal(err)
	}

	want := []facadetest.Row{{"k": "4", "v": "b"}, {"k": "1", "v": "a"}, {"k": "3", "v": facadetest.NullValue}, {"k": "2", "v": "b"}}
	facadetest.RequireRows(r, lake, "d", want)
	r.requirePassed(t)
	facadetest.RequireRows(r, lake, "d", want[:3])
	r.requireFailed(t, `unexpected: {k: "2", v: "b"}`)
	facadetest.RequireRows(r, lake, "d", append(want, facadetest.Row{"k": "5", "v": "e"}))
	r.requireFailed(t, `missing:    {k: "5", v: "e"}`)
	if got := facadetest.Rows(r, lake, "d"); len(got) != 4 || got[0]["v"] != "a" {
		t.Fatalf("Rows: %v", got)
	}

	facadetest.RequireRowCount(r, lake, "d", 4)
	r.requirePassed(t)
	facadetest.RequireRowCount(r, lake, "d", 3)
	r.requireFailed(t, "want 3 rows, got 4")

	facadetest.RequireSnapshotCount(r, lake, "d", 1)
	r.requirePassed(t)
	facadetest.RequireSnapshotCount(r, lake, "d", 2)
	r.requireFailed(t, "want 2 snapshots, got 1")

	if got := facadetest.RequireTxnLanded(r, lake, "d", "txn-1"); got.SnapshotID != res.SnapshotID {
		t.Fatalf("RequireTxnLanded returned snapshot %d, want %d", got.SnapshotID, res.SnapshotID)
	}
	r.requirePassed(t)
	facadetest.RequireTxnLanded(r, lake, "d", "txn-2")
	r.requireFailed(t, "no snapshot carries txn txn-2")
	facadetest.RequireTxnAbsent(r, lake, "d", "txn-2")
	r.requirePassed(t)
	facadetest.RequireTxnAbsent(r, lake, "d", "txn-1")
	r.requireFailed(t, "txn txn-1 landed")

	sum, err := facade.ChecksumBatches(one(b))
	if err != nil {
		t.Fatal(err)
	}
	facadetest.RequireChecksumEqual(r, sum, res.Checksum)
	r.requirePassed(t)
	other := batch(mem, "a")
	defer other.Release()
	sum2, err := facade.ChecksumBatches(one(other))
	if err != nil {
		t.Fatal(err)
	}
	facadetest.RequireChecksumEqual(r, sum, sum2)
	r.requireFailed(t, "checksums differ")
}

func ExampleRow_String() {
	fmt.Println(facadetest.Row{"v": "b", "k": "2"})
	// Output: {k: "2", v: "b"}
}
