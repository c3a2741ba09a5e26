package writestrategy_test

import (
	"context"
	"errors"
	"iter"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

func (w *world) load(req writestrategy.LoadRequest) (writestrategy.WriteResult, error) {
	req.WriterID = writer
	return w.d.Load(context.Background(), req)
}

func (w *world) openIntents(id string) int {
	w.t.Helper()
	var n int
	require.NoError(w.t, w.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE dataset_id = $1 AND status = 'open'`, id).Scan(&n))
	return n
}

// loadSchema covers every Arrow type family a load maps.
var loadSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "small", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
	{Name: "u32", Type: arrow.PrimitiveTypes.Uint32, Nullable: true},
	{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "amount", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}, Nullable: true},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "blob", Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: "day", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "tags", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
}, nil)

// loadBatch builds rows [from, to) of loadSchema; row i has NULLs where
// i%5 == 4.
func loadBatch(mem memory.Allocator, from, to int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, loadSchema)
	defer b.Release()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := from; i < to; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i%5 == 4 {
			for f := 1; f < len(b.Fields()); f++ {
				b.Field(f).AppendNull()
			}
			continue
		}
		b.Field(1).(*array.Int16Builder).Append(int16(i % 300))
		b.Field(2).(*array.Uint32Builder).Append(uint32(4_000_000_000 + i))
		b.Field(3).(*array.BooleanBuilder).Append(i%2 == 0)
		b.Field(4).(*array.Float64Builder).Append(float64(i) / 3)
		b.Field(5).(*array.Decimal128Builder).Append(decimal128.FromI64(int64(i*125 - 1000)))
		b.Field(6).(*array.StringBuilder).Append("name " + string(rune('a'+i%26)))
		b.Field(7).(*array.BinaryBuilder).Append([]byte{byte(i), 0, byte(i >> 8)})
		b.Field(8).(*array.Date32Builder).Append(arrow.Date32FromTime(base.AddDate(0, 0, i%400)))
		b.Field(9).(*array.TimestampBuilder).Append(arrow.Timestamp(base.Add(time.Duration(i) * time.Second).UnixMicro()))
		lb := b.Field(10).(*array.ListBuilder)
		lb.Append(true)
		for j := 0; j < i%3; j++ {
			lb.ValueBuilder().(*array.Int32Builder).Append(int32(i + j))
		}
	}
	return b.NewRecordBatch()
}

// batchesOf yields n rows in batches of size, borrowed (released after
// each yield); fail, when not nil, is yielded after the first batch.
func batchesOf(mem memory.Allocator, n, size int, fail error) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for from := 0; from < n; from += size {
			rec := loadBatch(mem, from, min(from+size, n))
			more := yield(rec, nil)
			rec.Release()
			if !more {
				return
			}
			if fail != nil {
				yield(nil, fail)
				return
			}
		}
	}
}

// A load from a query lands the same rows on either sink, as replace then
// append.
func TestLoadQueryBothSinks(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	ensureOutputs(t, w.pool, "q_pg", "q_ice")
	w.iceberg("q_ice")
	for _, id := range []string{"q_pg", "q_ice"} {
		res, err := w.load(writestrategy.LoadRequest{DatasetID: id, SQL: ordersSQL, Args: []any{300}})
		require.NoError(t, err)
		require.Equal(t, int64(300), res.Rows)
		require.Equal(t, facade.Replace, res.Mode)
	}
	pg, ice := w.checksum("q_pg"), w.checksum("q_ice")
	require.Equal(t, int64(300), pg.Rows)
	require.Equal(t, pg, ice)
	ds, err := w.ledger.Dataset(context.Background(), "q_ice")
	require.NoError(t, err)
	require.Equal(t, sink.Iceberg, ds.Sink)
	require.Equal(t, int64(300), ds.RowCount)
	require.False(t, ds.SourceWatermark.IsZero())

	// Append 100 more; replace again with 50.
	for _, id := range []string{"q_pg", "q_ice"} {
		res, err := w.load(writestrategy.LoadRequest{DatasetID: id, Mode: facade.Append,
			SQL: `SELECT * FROM (` + ordersSQL + `) o WHERE id > 200`, Args: []any{300}})
		require.NoError(t, err)
		require.Equal(t, int64(100), res.Rows)
		require.Equal(t, facade.Append, res.Mode)
	}
	pg, ice = w.checksum("q_pg"), w.checksum("q_ice")
	require.Equal(t, int64(400), pg.Rows)
	require.Equal(t, pg, ice)
	for _, id := range []string{"q_pg", "q_ice"} {
		_, err := w.load(writestrategy.LoadRequest{DatasetID: id, SQL: ordersSQL, Args: []any{50}})
		require.NoError(t, err)
	}
	pg, ice = w.checksum("q_pg"), w.checksum("q_ice")
	require.Equal(t, int64(50), pg.Rows)
	require.Equal(t, pg, ice)

	// An append that moves the output to the other sink rewrites it whole.
	w.iceberg("q_pg")
	res, err := w.load(writestrategy.LoadRequest{DatasetID: "q_pg", Mode: facade.Append, SQL: `SELECT * FROM (` + ordersSQL + `) o WHERE id > 40`, Args: []any{60}})
	require.NoError(t, err)
	require.Equal(t, facade.Replace, res.Mode)
	require.Equal(t, int64(70), res.Rows)
	require.Equal(t, int64(70), w.checksum("q_pg").Rows)
}

// A load of Arrow batches lands the same rows on either sink, and the same
// rows as the equivalent query; appends add after the current rows.
func TestLoadArrowBothSinks(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	ensureOutputs(t, w.pool, "a_pg", "a_ice")
	w.iceberg("a_ice")
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, id := range []string{"a_pg", "a_ice"} {
		res, err := w.load(writestrategy.LoadRequest{DatasetID: id, Batches: batchesOf(mem, 1000, 128, nil)})
		require.NoError(t, err)
		require.Equal(t, int64(1000), res.Rows)
		require.Equal(t, writestrategy.Schema{Columns: []writestrategy.Column{
			{Name: "id", Type: "bigint"}, {Name: "small", Type: "smallint"}, {Name: "u32", Type: "bigint"},
			{Name: "flag", Type: "boolean"}, {Name: "score", Type: "double precision"}, {Name: "amount", Type: "numeric(12,2)"},
			{Name: "name", Type: "text"}, {Name: "blob", Type: "bytea"}, {Name: "day", Type: "date"},
			{Name: "ts", Type: "timestamp with time zone"}, {Name: "tags", Type: "integer[]"},
		}}, writestrategy.ResultColumns(res))
	}
	pg, ice := w.checksum("a_pg"), w.checksum("a_ice")
	require.Equal(t, int64(1000), pg.Rows)
	require.Equal(t, pg, ice)

	// Row 7 reads back as built.
	var small int16
	var u32 int64
	var amount, name, ts, tags string
	require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT r.small, r.u32, r.amount::text, r.name, r.ts AT TIME ZONE 'UTC' || '', r.tags::text
		FROM lakewrite.dataset_rows d, jsonb_to_record(d.data) r(small smallint, u32 bigint, amount numeric, name text, ts timestamptz, tags int[])
		WHERE d.dataset_id = 'a_pg' AND d.row_index = 7`).Scan(&small, &u32, &amount, &name, &ts, &tags))
	require.Equal(t, []any{int16(7), int64(4_000_000_007), "-1.25", "name h", "2026-01-01 00:00:07", "{7}"}, []any{small, u32, amount, name, ts, tags})

	// A RecordReader appends after the current rows, on either sink.
	for _, id := range []string{"a_pg", "a_ice"} {
		rec := loadBatch(mem, 1000, 1100)
		rr, err := array.NewRecordReader(loadSchema, []arrow.RecordBatch{rec})
		require.NoError(t, err)
		rec.Release()
		res, err := w.load(writestrategy.LoadRequest{DatasetID: id, Reader: rr, Mode: facade.Append})
		rr.Release()
		require.NoError(t, err)
		require.Equal(t, int64(100), res.Rows)
	}
	pg, ice = w.checksum("a_pg"), w.checksum("a_ice")
	require.Equal(t, int64(1100), pg.Rows)
	require.Equal(t, pg, ice)
	require.Equal(t, "1099", lastRowIndex(t, w, "a_pg"))

	// An empty load with a declared schema replaces with no rows.
	for _, id := range []string{"a_pg", "a_ice"} {
		res, err := w.load(writestrategy.LoadRequest{DatasetID: id, Schema: loadSchema, Batches: batchesOf(mem, 0, 1, nil)})
		require.NoError(t, err)
		require.Equal(t, int64(0), res.Rows)
	}
	require.Equal(t, int64(0), w.checksum("a_pg").Rows)
	require.Equal(t, w.checksum("a_pg"), w.checksum("a_ice"))
}

func lastRowIndex(t *testing.T, w *world, id string) string {
	t.Helper()
	var s string
	require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT max(row_index)::text FROM lakewrite.dataset_rows WHERE dataset_id = $1`, id).Scan(&s))
	return s
}

// Bad input fails with a typed error and leaves the dataset as it was, on
// either sink, with no intent left open.
func TestLoadBadInput(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	ensureOutputs(t, w.pool, "b_pg", "b_ice")
	w.iceberg("b_ice")
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, id := range []string{"b_pg", "b_ice"} {
		_, err := w.load(writestrategy.LoadRequest{DatasetID: id, SQL: ordersSQL, Args: []any{20}})
		require.NoError(t, err)
	}
	before := w.checksum("b_pg")
	other := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int32}}, nil)
	mismatched := func(yield func(arrow.RecordBatch, error) bool) {
		rec := loadBatch(mem, 0, 10)
		more := yield(rec, nil)
		rec.Release()
		if !more {
			return
		}
		b := array.NewRecordBuilder(mem, other)
		b.Field(0).(*array.Int32Builder).Append(1)
		rec = b.NewRecordBatch()
		b.Release()
		yield(rec, nil)
		rec.Release()
	}
	structSchema := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64})}}, nil)
	boom := errors.New("source broke")
	cases := map[string]struct {
		req  writestrategy.LoadRequest
		want error
	}{
		"neither":     {writestrategy.LoadRequest{}, writestrategy.ErrInvalid},
		"both":        {writestrategy.LoadRequest{SQL: "SELECT 1 AS a", Batches: batchesOf(mem, 1, 1, nil)}, writestrategy.ErrInvalid},
		"mismatch":    {writestrategy.LoadRequest{Batches: mismatched}, writestrategy.ErrBatchSchema},
		"struct":      {writestrategy.LoadRequest{Schema: structSchema, Batches: batchesOf(mem, 0, 1, nil)}, writestrategy.ErrUnsupportedType},
		"stream fail": {writestrategy.LoadRequest{Batches: batchesOf(mem, 500, 100, boom)}, boom},
		"no schema":   {writestrategy.LoadRequest{Batches: batchesOf(mem, 0, 1, nil)}, writestrategy.ErrInvalid},
		"bad sql":     {writestrategy.LoadRequest{SQL: "SELECT 1/0 AS a"}, nil},
		"reserved":    {writestrategy.LoadRequest{SQL: `SELECT 1 AS "__x"`}, writestrategy.ErrUnsafeIdentifier},
	}
	for name, c := range cases {
		for _, id := range []string{"b_pg", "b_ice"} {
			req := c.req
			req.DatasetID = id
			_, err := w.load(req)
			require.Error(t, err, "%s %s", name, id)
			if c.want != nil {
				require.ErrorIs(t, err, c.want, "%s %s", name, id)
			} else {
				var pe *pgconn.PgError
				require.ErrorAs(t, err, &pe, "%s %s", name, id)
			}
			require.Equal(t, before, w.checksum(id), "%s %s", name, id)
			require.Zero(t, w.openIntents(id), "%s %s", name, id)
		}
	}
	_, err := w.load(writestrategy.LoadRequest{DatasetID: "b_pg", Schema: structSchema, Batches: batchesOf(mem, 0, 1, nil)})
	require.ErrorIs(t, err, writestrategy.ErrUnsupportedType)
	require.Contains(t, err.Error(), `by a load: column "s": Arrow type struct<`)
}

// A load whose context is cancelled while its batches stream leaves
// nothing visible.
func TestLoadCancelledMidStream(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	ensureOutputs(t, w.pool, "c_pg", "c_ice")
	w.iceberg("c_ice")
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, id := range []string{"c_pg", "c_ice"} {
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		batches := func(yield func(arrow.RecordBatch, error) bool) {
			for rec, err := range batchesOf(mem, 2000, 100, nil) {
				if n++; n == 5 {
					cancel()
				}
				if !yield(rec, err) {
					return
				}
			}
		}
		_, err := w.d.Load(ctx, writestrategy.LoadRequest{WriterID: writer, DatasetID: id, Batches: batches})
		cancel()
		require.Error(t, err)
		require.Equal(t, facade.Checksum{}, w.checksum(id))
		require.Zero(t, w.openIntents(id))
		ds, err := w.ledger.Dataset(context.Background(), id)
		require.NoError(t, err)
		require.Empty(t, ds.Sink)
	}
}

// TestLoadIteratorPanics: a panic inside the caller's record batches
// (pulled while rows are copied into Postgres) reaches the caller's
// goroutine, where it can be recovered; nothing is visible and the next
// load lands, on either sink.
func TestLoadIteratorPanics(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	ensureOutputs(t, w.pool, "p_pg", "p_ice")
	w.iceberg("p_ice")
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, id := range []string{"p_pg", "p_ice"} {
		_, err := w.load(writestrategy.LoadRequest{DatasetID: id, SQL: ordersSQL, Args: []any{20}})
		require.NoError(t, err)
		before := w.checksum(id)
		panicking := func(yield func(arrow.RecordBatch, error) bool) {
			rec := loadBatch(mem, 0, 10)
			more := yield(rec, nil)
			rec.Release()
			if more {
				rec = loadBatch(mem, 10, 20)
				defer rec.Release()
				panic("source exploded")
			}
		}
		recovered := func() (r any) {
			defer func() { r = recover() }()
			_, _ = w.load(writestrategy.LoadRequest{DatasetID: id, Batches: panicking})
			return nil
		}()
		require.Equal(t, "source exploded", recovered, id)
		require.Equal(t, before, w.checksum(id), id)
		res, err := w.load(writestrategy.LoadRequest{DatasetID: id, Batches: batchesOf(mem, 30, 10, nil)})
		require.NoError(t, err, id)
		require.EqualValues(t, 30, res.Rows, id)
		require.Zero(t, w.openIntents(id), id)
	}
}
