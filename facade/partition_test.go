package facade_test

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"

	"github.com/lakewrite/lakewrite/cursor"
)

func partSchema() *arrow.Schema {
	md := func(t string) arrow.Metadata { return arrow.NewMetadata([]string{cursor.MetaPGType}, []string{t}) }
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true, Metadata: md("int8")},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true, Metadata: md("timestamptz")},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: md("text")},
	}, nil)
}

var partEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// partRows yields the rows ids in order, batch rows at a time (one batch
// alive at a time); row id has ts = partEpoch + day(id) days + id seconds.
func partRows(mem memory.Allocator, ids []int64, day func(int64) int64, batch int) iter.Seq2[arrow.RecordBatch, error] {
	sc := partSchema()
	return func(yield func(arrow.RecordBatch, error) bool) {
		for lo := 0; lo < len(ids); lo += batch {
			b := array.NewRecordBuilder(mem, sc)
			for _, id := range ids[lo:min(lo+batch, len(ids))] {
				b.Field(0).(*array.Int64Builder).Append(id)
				ts := partEpoch.Add(time.Duration(day(id))*24*time.Hour + time.Duration(id%3600)*time.Second)
				b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(ts.UnixMicro()))
				b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("row-%d", id))
			}
			rec := b.NewRecordBatch()
			b.Release()
			ok := yield(rec, nil)
			rec.Release()
			if !ok {
				return
			}
		}
	}
}

func seqIDs(n int) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i)
	}
	return ids
}

func partitionedEnv(t *testing.T, p facade.Partitioning, tune ...func(*facade.Config)) *icebergEnv {
	return newIcebergEnv(t, append([]func(*facade.Config){func(c *facade.Config) {
		facade.SetNow(c, func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) })
		c.PartitionFor = func(id string) (facade.Partitioning, bool) { return p, strings.HasPrefix(id, "part") }
	}}, tune...)...)
}

// fileRows reads one data file's rows as "id|ts|name|__row_id" strings.
func fileRows(t *testing.T, path string) (rows []string, ids, micros []int64) {
	t.Helper()
	rd, err := file.OpenParquetFile(strings.TrimPrefix(path, "file://"), false)
	require.NoError(t, err)
	defer rd.Close()
	fr, err := pqarrow.NewFileReader(rd, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
	require.NoError(t, err)
	tblData, err := fr.ReadTable(context.Background())
	require.NoError(t, err)
	defer tblData.Release()
	tr := array.NewTableReader(tblData, 1<<16)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		sc := rec.Schema()
		col := func(n string) arrow.Array { return rec.Column(sc.FieldIndices(n)[0]) }
		for i := range int(rec.NumRows()) {
			ids = append(ids, col("id").(*array.Int64).Value(i))
			micros = append(micros, int64(col("ts").(*array.Timestamp).Value(i)))
			rows = append(rows, fmt.Sprintf("%v|%v|%v|%v", col("id").GetOneForMarshal(i), col("ts").GetOneForMarshal(i),
				col("name").GetOneForMarshal(i), col(facade.ColRowID).GetOneForMarshal(i)))
		}
	}
	return rows, ids, micros
}

func partInt(t *testing.T, v any) int64 {
	t.Helper()
	switch v := v.(type) {
	case iceberg.Date:
		return int64(v)
	case int32:
		return int64(v)
	case int64:
		return v
	}
	t.Fatalf("unexpected partition value %T %v", v, v)
	return 0
}

// layoutOf plans the current snapshot's files: partition value of the
// table's first partition field and the rows of each file.
type layoutFile struct {
	part   int64
	rows   []string
	ids    []int64
	micros []int64
}

func tableLayout(t *testing.T, e *icebergEnv, dataset string) []layoutFile {
	t.Helper()
	tbl, err := e.f.LoadTable(context.Background(), dataset)
	require.NoError(t, err)
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	require.NoError(t, err)
	spec := tbl.Spec()
	fid := spec.Field(0).FieldID
	var out []layoutFile
	for _, task := range tasks {
		require.Equal(t, spec.ID(), int(task.File.SpecID()))
		rows, ids, micros := fileRows(t, task.File.FilePath())
		require.EqualValues(t, task.File.Count(), len(rows))
		out = append(out, layoutFile{part: partInt(t, task.File.Partition()[fid]), rows: rows, ids: ids, micros: micros})
	}
	return out
}

func scanAll(t *testing.T, e *icebergEnv, dataset string) []string {
	t.Helper()
	var rows []string
	for rec, err := range e.f.Scan(context.Background(), dataset, facade.ScanOptions{}) {
		require.NoError(t, err)
		for i := range int(rec.NumRows()) {
			var b strings.Builder
			for c := range int(rec.NumCols()) {
				fmt.Fprintf(&b, "%v|", rec.Column(c).GetOneForMarshal(i))
			}
			rows = append(rows, b.String())
		}
		rec.Release()
	}
	slices.Sort(rows)
	return rows
}

// TestPartitionedDay: a day-partitioned table (declared with a sort order)
// holds one data file per day, each recording its day and holding only
// that day's rows; the rows, identity columns and checksum are those of
// the same write to an unpartitioned table.
func TestPartitionedDay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n, days = 3000, 6
	day := func(id int64) int64 { return id * days / n }
	p := facade.Partitioning{
		Fields:    []facade.PartitionField{{Column: "ts", Transform: "day"}},
		SortOrder: []facade.SortField{{Column: "id", Descending: true}},
	}
	e := partitionedEnv(t, p, func(c *facade.Config) { c.RowGroupRows = 256 })
	res, err := e.f.Write(ctx, facade.Target{DatasetID: "part"}, facade.WriteRequest{
		Mode: facade.Replace, Schema: partSchema(), Rows: partRows(e.mem, seqIDs(n), day, 700)})
	require.NoError(t, err)
	require.EqualValues(t, n, res.Rows)
	require.Len(t, res.DataFiles, days)

	tbl, err := e.f.LoadTable(ctx, "part")
	require.NoError(t, err)
	spec := tbl.Spec()
	require.Equal(t, 1, spec.NumFields())
	require.Equal(t, "ts_day", spec.Field(0).Name)
	require.Equal(t, iceberg.DayTransform{}, spec.Field(0).Transform)
	order := tbl.SortOrder()
	require.Equal(t, 1, order.Len())
	require.Equal(t, "desc", string(order.Field(0).Direction))

	epochDay := partEpoch.Unix() / 86400
	seen := map[int64]bool{}
	for _, lf := range tableLayout(t, e, "part") {
		require.False(t, seen[lf.part], "one file per day")
		seen[lf.part] = true
		for i, id := range lf.ids {
			require.Equal(t, epochDay+day(id), lf.part, "row %d in the file of its day", id)
			require.Equal(t, lf.part, lf.micros[i]/86_400_000_000)
		}
		require.Len(t, lf.ids, n/days)
	}
	require.Len(t, seen, days)

	// a reader's filter on ts plans only that day's file
	lo := partEpoch.Add(2 * 24 * time.Hour)
	pruned, err := tbl.Scan(table.WithRowFilter(iceberg.NewAnd(
		iceberg.GreaterThanEqual(iceberg.Reference("ts"), iceberg.Timestamp(lo.UnixMicro())),
		iceberg.LessThan(iceberg.Reference("ts"), iceberg.Timestamp(lo.Add(24*time.Hour).UnixMicro()))))).PlanFiles(ctx)
	require.NoError(t, err)
	require.Len(t, pruned, 1)
	require.Equal(t, epochDay+2, partInt(t, pruned[0].File.Partition()[spec.Field(0).FieldID]))

	// the same write, unpartitioned: same rows, identity columns, checksum
	// the same dataset id in another catalog, undeclared: the row ids
	// (which hash the dataset id) compare
	u2 := newIcebergEnv(t, func(c *facade.Config) {
		facade.SetNow(c, func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) })
	})
	ures, err := u2.f.Write(ctx, facade.Target{DatasetID: "part"}, facade.WriteRequest{
		Mode: facade.Replace, Schema: partSchema(), Rows: partRows(u2.mem, seqIDs(n), day, 700)})
	require.NoError(t, err)
	require.Equal(t, ures.Checksum, res.Checksum)
	utbl, err := u2.f.LoadTable(ctx, "part")
	require.NoError(t, err)
	require.True(t, utbl.Spec().IsUnpartitioned())
	require.Equal(t, scanAll(t, u2, "part"), scanAll(t, e, "part"))
	sum, err := e.f.Checksum(ctx, "part", 0)
	require.NoError(t, err)
	require.Equal(t, res.Checksum, sum)
}

// TestPartitionedBucket: bucket[4] on id; the stream clustered by bucket
// makes one file per bucket with the Iceberg (Murmur3) bucket recorded.
// WriteOrder of the table (declared or not) orders by that bucket.
func TestPartitionedBucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 2000
	bucket := iceberg.BucketTransform{NumBuckets: 4}.Transformer(iceberg.PrimitiveTypes.Int64)
	b := func(id int64) int64 { return int64(bucket(id).Val) }
	ids := seqIDs(n)
	slices.SortStableFunc(ids, func(x, y int64) int { return int(b(x) - b(y)) })
	e := partitionedEnv(t, facade.Partitioning{Fields: []facade.PartitionField{{Column: "id", Transform: "bucket[4]"}}})
	res, err := e.f.Write(ctx, facade.Target{DatasetID: "part-b"}, facade.WriteRequest{
		Mode: facade.Append, Schema: partSchema(), Rows: partRows(e.mem, ids, func(int64) int64 { return 0 }, 300)})
	require.NoError(t, err)
	require.EqualValues(t, n, res.Rows)
	files := tableLayout(t, e, "part-b")
	require.Len(t, files, 4)
	total := 0
	for _, lf := range files {
		for _, id := range lf.ids {
			require.Equal(t, b(id), lf.part)
		}
		total += len(lf.ids)
	}
	require.Equal(t, n, total)
	require.Len(t, scanAll(t, e, "part-b"), n)

	// undeclared, the table's spec gives the same order
	f2, err := facade.New(e.cat, &facade.Config{Allocator: e.mem})
	require.NoError(t, err)
	keys, err := f2.WriteOrder(ctx, "part-b")
	require.NoError(t, err)
	require.Equal(t, []facade.OrderKey{{Column: "id", Bucket: 4, Partition: true}}, keys)
}

// TestWriteOrderBucket: WriteOrder gives a bucket[N] partition field as a
// key ordered by the bucket (Bucket = N), in partition-field order, then
// the sort keys; a bucket sort key is left out.
func TestWriteOrderBucket(t *testing.T) {
	t.Parallel()
	e := partitionedEnv(t, facade.Partitioning{
		Fields:    []facade.PartitionField{{Column: "name"}, {Column: "id", Transform: "bucket[8]"}, {Column: "ts", Transform: "day"}},
		SortOrder: []facade.SortField{{Column: "name", Transform: "bucket[4]"}, {Column: "id", Descending: true, NullsFirst: true}},
	})
	keys, err := e.f.WriteOrder(context.Background(), "part-wo")
	require.NoError(t, err)
	require.Equal(t, []facade.OrderKey{
		{Column: "name", Partition: true},
		{Column: "id", Bucket: 8, Partition: true},
		{Column: "ts", Unit: "day", Partition: true},
		{Column: "id", Descending: true, NullsFirst: true},
	}, keys)
}

// TestPartitionedOutOfOrder: a stream that comes back to a partition whose
// rows ended fails with ErrPartitionOrder; nothing is committed and no
// data file is left behind.
func TestPartitionedOutOfOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := partitionedEnv(t, facade.Partitioning{Fields: []facade.PartitionField{{Column: "ts", Transform: "day"}}})
	// days 0,0,...,1,1,...,0: the last batch goes back to day 0
	ids := seqIDs(1000)
	day := func(id int64) int64 {
		if id >= 900 {
			return 0
		}
		return id / 450
	}
	_, err := e.f.Write(ctx, facade.Target{DatasetID: "part-o"}, facade.WriteRequest{
		Mode: facade.Append, Schema: partSchema(), Rows: partRows(e.mem, ids, day, 100)})
	require.ErrorIs(t, err, facade.ErrPartitionOrder)
	tbl, err := e.f.LoadTable(ctx, "part-o")
	require.NoError(t, err)
	require.Nil(t, tbl.CurrentSnapshot())
	require.Empty(t, dataFiles(t, e.warehouse))

	// going back within one batch is refused too
	_, err = e.f.Write(ctx, facade.Target{DatasetID: "part-o"}, facade.WriteRequest{
		Mode: facade.Append, Schema: partSchema(), Rows: partRows(e.mem, ids, day, 1000)})
	require.ErrorIs(t, err, facade.ErrPartitionOrder)
	require.Empty(t, dataFiles(t, e.warehouse))

	// in order, the same rows commit
	slices.SortStableFunc(ids, func(x, y int64) int { return int(day(x) - day(y)) })
	_, err = e.f.Write(ctx, facade.Target{DatasetID: "part-o"}, facade.WriteRequest{
		Mode: facade.Append, Schema: partSchema(), Rows: partRows(e.mem, ids, day, 100)})
	require.NoError(t, err)
	require.Len(t, tableLayout(t, e, "part-o"), 2)
}

// maxAlloc tracks the peak of the Arrow memory allocated through it.
type maxAlloc struct {
	*memory.CheckedAllocator
	peak atomic.Int64
}

func (m *maxAlloc) note() {
	cur := int64(m.CurrentAlloc())
	for {
		p := m.peak.Load()
		if cur <= p || m.peak.CompareAndSwap(p, cur) {
			return
		}
	}
}

func (m *maxAlloc) Allocate(n int) []byte {
	b := m.CheckedAllocator.Allocate(n)
	m.note()
	return b
}

func (m *maxAlloc) Reallocate(n int, b []byte) []byte {
	out := m.CheckedAllocator.Reallocate(n, b)
	m.note()
	return out
}

// TestPartitionedManyPartitionsBoundedMemory: 5,000 day partitions of a
// small table are written one file at a time: the peak Arrow allocation is
// about that of the same rows in 50 partitions, not growing with the
// partition count, and every allocation is released.
func TestPartitionedManyPartitionsBoundedMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 10000
	write := func(parts int64) (int64, int) {
		mem := &maxAlloc{CheckedAllocator: memory.NewCheckedAllocator(memory.NewGoAllocator())}
		e := partitionedEnv(t, facade.Partitioning{Fields: []facade.PartitionField{{Column: "ts", Transform: "day"}}},
			func(c *facade.Config) { c.Allocator = mem })
		day := func(id int64) int64 { return id * parts / n }
		res, err := e.f.Write(ctx, facade.Target{DatasetID: "part-m"}, facade.WriteRequest{
			Mode: facade.Replace, Schema: partSchema(), Rows: partRows(mem, seqIDs(n), day, 1000)})
		require.NoError(t, err)
		require.EqualValues(t, n, res.Rows)
		mem.AssertSize(t, 0)
		return mem.peak.Load(), len(res.DataFiles)
	}
	few, fewFiles := write(50)
	many, manyFiles := write(5000)
	require.Equal(t, 50, fewFiles)
	require.Equal(t, 5000, manyFiles)
	t.Logf("peak Arrow allocation: 50 partitions %d B, 5000 partitions %d B", few, many)
	require.LessOrEqual(t, many, few+few/2+(1<<20))
}

// TestPartitionSpecEvolution: a changed declaration evolves the table's
// spec (and sort order) in the write's own snapshot: an unpartitioned
// table gets day(ts) on its next append (the old file keeps spec 0), then
// month(ts) replaces day(ts) on a replace; every snapshot reads back whole.
func TestPartitionSpecEvolution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var decl *facade.Partitioning
	e := newIcebergEnv(t, func(c *facade.Config) {
		c.PartitionFor = func(string) (facade.Partitioning, bool) {
			if decl == nil {
				return facade.Partitioning{}, false
			}
			return *decl, true
		}
	})
	target := facade.Target{DatasetID: "evo"}
	write := func(mode facade.WriteMode, ids []int64, day func(int64) int64) facade.CommitResult {
		t.Helper()
		res, err := e.f.Write(ctx, target, facade.WriteRequest{Mode: mode, Schema: partSchema(), Rows: partRows(e.mem, ids, day, 400)})
		require.NoError(t, err)
		return res
	}
	specs := func() map[int]int { // spec id -> files
		t.Helper()
		tbl, err := e.f.LoadTable(ctx, "evo")
		require.NoError(t, err)
		tasks, err := tbl.Scan().PlanFiles(ctx)
		require.NoError(t, err)
		out := map[int]int{}
		for _, task := range tasks {
			out[int(task.File.SpecID())]++
		}
		return out
	}
	write(facade.Append, seqIDs(1000), func(int64) int64 { return 0 })
	require.Equal(t, map[int]int{0: 1}, specs())

	decl = &facade.Partitioning{Fields: []facade.PartitionField{{Column: "ts", Transform: "day"}}}
	ids := make([]int64, 1000)
	for i := range ids {
		ids[i] = int64(1000 + i)
	}
	write(facade.Append, ids, func(id int64) int64 { return (id - 1000) / 500 })
	tbl, err := e.f.LoadTable(ctx, "evo")
	require.NoError(t, err)
	daySpec := tbl.Spec()
	require.Equal(t, "ts_day", daySpec.Field(0).Name)
	require.Equal(t, map[int]int{0: 1, daySpec.ID(): 2}, specs())
	require.Len(t, scanAll(t, e, "evo"), 2000)
	sum, err := e.f.Checksum(ctx, "evo", 0)
	require.NoError(t, err)
	require.EqualValues(t, 2000, sum.Rows)

	decl = &facade.Partitioning{
		Fields:    []facade.PartitionField{{Column: "ts", Transform: "month"}},
		SortOrder: []facade.SortField{{Column: "id"}},
	}
	write(facade.Replace, seqIDs(900), func(id int64) int64 { return id / 15 }) // 60 days: January and February
	tbl, err = e.f.LoadTable(ctx, "evo")
	require.NoError(t, err)
	spec := tbl.Spec()
	require.Equal(t, 1, spec.NumFields())
	require.Equal(t, "ts_month", spec.Field(0).Name)
	require.Equal(t, 1, tbl.SortOrder().Len())
	require.Equal(t, map[int]int{spec.ID(): 2}, specs())
	for _, lf := range tableLayout(t, e, "evo") {
		for _, id := range lf.ids {
			want := int64(54*12 + 0) // months since 1970 of January 2024
			if id/15 >= 31 {
				want++
			}
			require.Equal(t, want, lf.part, "id %d", id)
		}
	}
	require.Len(t, scanAll(t, e, "evo"), 900)
}

// TestPartitionedCompaction: twelve appends over the same three days make
// 36 small files; MaintainWith compacts them within each day: three files
// remain, one per day holding only that day's rows, and every row reads
// back with the same checksum.
func TestPartitionedCompaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := partitionedEnv(t, facade.Partitioning{Fields: []facade.PartitionField{{Column: "ts", Transform: "day"}}})
	const appends, per = 12, 90
	for a := range appends {
		ids := make([]int64, per)
		for i := range ids {
			ids[i] = int64(a*per + i)
		}
		_, err := e.f.Write(ctx, facade.Target{DatasetID: "part-c"}, facade.WriteRequest{Mode: facade.Append, Schema: partSchema(),
			Rows: partRows(e.mem, ids, func(id int64) int64 { return id % per / 30 }, 45)})
		require.NoError(t, err)
	}
	require.Len(t, tableLayout(t, e, "part-c"), appends*3)
	before, err := e.f.Checksum(ctx, "part-c", 0)
	require.NoError(t, err)
	rows := scanAll(t, e, "part-c")

	rep, err := e.f.MaintainWith(ctx, "part-c", facade.Lifecycle{FileGrace: -1})
	require.NoError(t, err)
	require.Equal(t, appends*3, rep.CompactedFiles)
	require.Equal(t, 3, rep.WrittenFiles)
	epochDay := partEpoch.Unix() / 86400
	files := tableLayout(t, e, "part-c")
	require.Len(t, files, 3)
	for _, lf := range files {
		require.Len(t, lf.ids, appends*per/3)
		for _, id := range lf.ids {
			require.Equal(t, epochDay+id%per/30, lf.part)
		}
	}
	after, err := e.f.Checksum(ctx, "part-c", 0)
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.Equal(t, rows, scanAll(t, e, "part-c"))
	e.mem.AssertSize(t, 0)
}

// TestPartitionedReplaceIdempotent: the same replace into a partitioned
// table, written twice, gives files with the same rows in the same order
// with the same __row_id, partition by partition, and the same
// checksum.
func TestPartitionedReplaceIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n, days = 2000, 5
	day := func(id int64) int64 { return id * days / n }
	p := facade.Partitioning{Fields: []facade.PartitionField{{Column: "ts", Transform: "day"}}}
	e := partitionedEnv(t, p, func(c *facade.Config) { c.RowGroupRows = 300 })
	write := func() (facade.CommitResult, []layoutFile) {
		res, err := e.f.Write(ctx, facade.Target{DatasetID: "part"}, facade.WriteRequest{
			Mode: facade.Replace, Schema: partSchema(), Rows: partRows(e.mem, seqIDs(n), day, 400)})
		require.NoError(t, err)
		lay := tableLayout(t, e, "part")
		slices.SortFunc(lay, func(a, b layoutFile) int { return cmp.Compare(a.part, b.part) })
		return res, lay
	}
	first, lay1 := write()
	second, lay2 := write()
	require.NotEqual(t, first.SnapshotID, second.SnapshotID)
	require.Equal(t, first.Checksum, second.Checksum)
	require.Len(t, lay2, days)
	require.Equal(t, lay1, lay2, "same files' rows, in the same order, with the same __row_id")
}
