package facade_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/stretchr/testify/require"

	"github.com/apache/iceberg-go/table"

	"github.com/lakewrite/lakewrite/facade"
)

// reusing is an allocator that hands freed memory out again at once (as
// a pooling allocator does), so that a value still referenced after its
// batch was released reads the bytes of a later batch.
type reusing struct {
	mu   sync.Mutex
	free map[int][][]byte
}

func (r *reusing) Allocate(n int) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.free[n]; len(l) > 0 {
		b := l[len(l)-1]
		r.free[n] = l[:len(l)-1]
		return b
	}
	return make([]byte, n)
}

func (r *reusing) Reallocate(n int, b []byte) []byte {
	if n <= cap(b) {
		return b[:n]
	}
	nb := r.Allocate(n)
	copy(nb, b)
	r.Free(b)
	return nb
}

func (r *reusing) Free(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.free == nil {
		r.free = map[int][][]byte{}
	}
	r.free[cap(b)] = append(r.free[cap(b)], b[:cap(b)])
}

// TestPartitionValuesOutliveTheirBatch: a table partitioned by a text
// column (identity and truncate) written from batches whose memory is
// reused as soon as they are released gets every row, each data file's
// partition value is the value of its rows, and compaction keeps both.
func TestPartitionValuesOutliveTheirBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, transform := range []string{"identity", "truncate[2]"} {
		t.Run(transform, func(t *testing.T) {
			e := newIcebergEnv(t, func(c *facade.Config) {
				c.PartitionFor = func(string) (facade.Partitioning, bool) {
					return facade.Partitioning{Fields: []facade.PartitionField{{Column: "k", Transform: transform}}}, true
				}
			})
			sc := arrow.NewSchema([]arrow.Field{
				{Name: "k", Type: arrow.BinaryTypes.String, Nullable: true},
				{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			}, nil)
			mem := &reusing{}
			// 40 partitions in order, 2 batches each, 3 rows a batch
			write := func(mode facade.WriteMode) {
				_, err := e.f.Write(ctx, facade.Target{DatasetID: "parts"}, facade.WriteRequest{Mode: mode, Schema: sc,
					Rows: func(yield func(arrow.RecordBatch, error) bool) {
						for p := range 40 {
							for b := range 2 {
								rb := array.NewRecordBuilder(mem, sc)
								for i := range 3 {
									k := string(rune('a'+p/26)) + string(rune('a'+p%26)) // 40 prefixes, ascending
									if transform != "identity" {
										k += fmt.Sprintf("-%d", i)
									}
									rb.Field(0).(*array.StringBuilder).Append(k)
									rb.Field(1).(*array.Int64Builder).Append(int64(p*100 + b*10 + i))
								}
								rec := rb.NewRecordBatch()
								rb.Release()
								more := yield(rec, nil)
								rec.Release()
								if !more {
									return
								}
							}
						}
					}})
				require.NoError(t, err)
			}
			// check: 240 rows, and every data file's partition value is
			// that of each of its rows.
			check := func() {
				tbl, err := e.f.LoadTable(ctx, "parts")
				require.NoError(t, err)
				tasks, err := tbl.Scan().PlanFiles(ctx)
				require.NoError(t, err)
				rows := 0
				for _, task := range tasks {
					var part any
					for _, v := range task.File.Partition() {
						part = v
					}
					_, recs, err := tbl.Scan(table.WithSelectedFields("k")).ReadTasks(ctx, []table.FileScanTask{task})
					require.NoError(t, err)
					for rec, err := range recs {
						require.NoError(t, err)
						for i := range int(rec.NumRows()) {
							k := rec.Column(0).(*array.String).Value(i)
							want := k
							if transform != "identity" {
								want = k[:2]
							}
							require.Equal(t, want, part, "partition of the file holding %q", k)
							rows++
						}
						rec.Release()
					}
				}
				require.Equal(t, 240, rows)
			}
			write(facade.Replace)
			check()
			write(facade.Append)
			_, err := e.f.MaintainWith(ctx, "parts", facade.Lifecycle{CompactMinFiles: 2, FileGrace: -1, OrphanEvery: -1})
			require.NoError(t, err)
			rows := 0
			for rec, err := range e.f.Scan(ctx, "parts", facade.ScanOptions{}) {
				require.NoError(t, err)
				rows += int(rec.NumRows())
			}
			require.Equal(t, 480, rows)
		})
	}
}
