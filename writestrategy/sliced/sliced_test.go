package sliced_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/internal/slicetest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
	"github.com/lakewrite/lakewrite/writestrategy/sliced"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const writer = "pipeline.output"

// world is a Dispatcher on a fresh database, its Iceberg catalog in the
// same Postgres (the snapshot and the ledger commit in one transaction).
type world struct {
	t         *testing.T
	pool      *pgxpool.Pool
	f         *facade.Facade
	l         *ledger.Ledger
	flags     *sink.Flags
	res       *sink.Resolver
	warehouse string
	mem       memory.Allocator
}

func newWorld(t *testing.T) *world { return newWorldWith(t, nil) }

// newWorldWith: mem, when set, is the facade's and the cursor's allocator.
func newWorldWith(t *testing.T, mem memory.Allocator) *world {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	w := &world{t: t, pool: pool, warehouse: t.TempDir(), mem: mem}
	cat, err := facade.NewPostgresCatalog(ctx, pool, facade.CatalogConfig{Warehouse: w.warehouse})
	require.NoError(t, err)
	w.f, err = facade.New(cat, &facade.Config{Lifecycle: facade.Lifecycle{Disabled: true}, Allocator: mem, PartitionFor: layouts})
	require.NoError(t, err)
	w.l, err = ledger.New(pool, nil)
	require.NoError(t, err)
	w.flags, err = sink.NewFlags(pool, nil)
	require.NoError(t, err)
	require.NoError(t, w.flags.SetWriter(ctx, sink.WriterFlags{WriterID: writer, Default: sink.Iceberg, Max: sink.Iceberg}))
	w.res, err = sink.NewResolver(w.flags, nil)
	require.NoError(t, err)
	return w
}

// layouts gives the datasets whose id starts with part_ or sorted_ a
// partition spec or a sort order.
func layouts(id string) (facade.Partitioning, bool) {
	switch {
	case strings.HasPrefix(id, "part_trunc"):
		return facade.Partitioning{Fields: []facade.PartitionField{{Column: "name", Transform: "truncate[2]"}}}, true
	case strings.HasPrefix(id, "part_bucket"):
		return facade.Partitioning{Fields: []facade.PartitionField{{Column: "id", Transform: "bucket[8]"}}}, true
	case strings.HasPrefix(id, "part_hour"):
		return facade.Partitioning{Fields: []facade.PartitionField{{Column: "ts", Transform: "hour"}},
			SortOrder: []facade.SortField{{Column: "id", Descending: true}}}, true
	case strings.HasPrefix(id, "sorted_"):
		return facade.Partitioning{SortOrder: []facade.SortField{{Column: "amount"}, {Column: "id", Descending: true}}}, true
	}
	return facade.Partitioning{}, false
}

func (w *world) dispatcher(obs writestrategy.Observer) *writestrategy.Dispatcher {
	d, err := writestrategy.NewDispatcher(w.pool, &writestrategy.DispatchConfig{Ledger: w.l, Resolver: w.res, Lakehouse: w.f,
		Workspace: "test", Observer: obs, Cursor: &cursor.Options{BatchSize: 512, Allocator: w.mem}})
	require.NoError(w.t, err)
	return d
}

func (w *world) write(ctx context.Context, obs writestrategy.Observer, s writestrategy.WriteStrategy, n int) (writestrategy.WriteResult, error) {
	for _, out := range s.Outputs() {
		_, err := w.l.EnsureDataset(context.Background(), out, out, nil)
		require.NoError(w.t, err)
	}
	res, err := w.dispatcher(obs).Write(ctx, writestrategy.Request{WriterID: writer, Strategy: s, Slices: n})
	if err != nil {
		return writestrategy.WriteResult{}, err
	}
	require.Len(w.t, res, 1)
	return res[0], nil
}

func (w *world) checksum(id string) facade.Checksum {
	w.t.Helper()
	c, err := w.f.Checksum(context.Background(), id, 0)
	require.NoError(w.t, err)
	return c
}

// requireSameTable checks that got holds the rows of want (checksum, and
// rows in __row_index order).
func (w *world) requireSameTable(want, got string) {
	w.t.Helper()
	require.Equal(w.t, w.checksum(want), w.checksum(got), "checksum of %s against %s", got, want)
	w.requireSameRows(w.table(want), w.table(got), false)
}

// TestSlicesWriteWhatOneStreamWrites: N = 1, 2, 4, 8 readers under one
// snapshot write the table one stream writes (rows, checksum, order by
// __row_index, unique identity; N = 1 the same identity), from a row-store
// source and from a registered table, for a replace (twice) and appends.
func TestSlicesWriteWhatOneStreamWrites(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.seedRowStore("src", 6000)
	w.seedTable("rel", "src_table", 6000)
	for _, src := range []string{"src", "rel"} {
		out := src + "_out"
		for _, n := range []int{1, 2, 4, 8} {
			res, err := w.write(ctx, nil, transform(out, src), 0)
			require.NoError(t, err)
			require.Equal(t, 1, res.Slices)
			one, sum := w.table(out), w.checksum(out)
			res, err = w.write(ctx, nil, transform(out, src), n)
			require.NoError(t, err)
			require.Equal(t, n, res.Slices, res.SliceNote)
			require.Empty(t, res.SliceNote)
			require.Equal(t, sum, w.checksum(out))
			w.requireSameRows(one, w.table(out), n == 1)
		}
		// append_always: two appends in slices hold the rows two appends
		// of one stream hold, the second's indexes after the first's.
		app := writestrategy.Deploy{Mode: writestrategy.KindAppendAlways, Target: src + "_app1", Source: src}
		for _, n := range []int{0, 0} {
			_, err := w.write(ctx, nil, app, n)
			require.NoError(t, err)
		}
		app.Target = src + "_app4"
		for range 2 {
			res, err := w.write(ctx, nil, app, 4)
			require.NoError(t, err)
			require.Equal(t, 4, res.Slices)
		}
		cw, err := w.f.Checksum(ctx, src+"_app1", 0)
		require.NoError(t, err)
		cg, err := w.f.Checksum(ctx, src+"_app4", 0)
		require.NoError(t, err)
		require.Equal(t, cw, cg)
		rows := w.table(src + "_app4")
		require.Len(t, rows, 12000)
		for i := 1; i < len(rows); i++ {
			require.Less(t, rows[i-1].Idx, rows[i].Idx)
		}
		require.Equal(t, rows[5999].Vals, rows[11999].Vals, "the second append after the first")
	}
}

// TestSlicesOneStreamWhenNotRowWise: outputs the rule does not slice run as
// one stream and say why.
func TestSlicesOneStreamWhenNotRowWise(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.seedRowStore("src", 1000)
	res, err := w.write(ctx, nil, writestrategy.Deploy{Mode: writestrategy.KindAppendNew, Target: "dedup", Source: "src", Key: []string{"id"}}, 4)
	require.NoError(t, err)
	require.Equal(t, 1, res.Slices)
	require.Contains(t, res.SliceNote, "not row-wise")

	// A step that multiplies rows, declared row-wise: refused, nothing written.
	tr := writestrategy.Transform{Output: "many", Source: "src", Steps: []writestrategy.Step{{Name: "t",
		SQL: `SELECT s.id, k FROM source s CROSS JOIN generate_series(1, 3) k`}}}
	_, err = w.write(ctx, nil, tr, 2)
	require.ErrorIs(t, err, sliced.ErrNotRowWise)
	_, err = w.f.LoadTable(ctx, "many")
	if err == nil {
		w.requireNoSnapshot("many")
	}
	for _, f := range w.dataFiles() {
		require.NotContains(t, f, "/many/", "the refused write's files are deleted")
	}
}

func (w *world) requireNoSnapshot(id string) {
	w.t.Helper()
	tbl, err := w.f.LoadTable(context.Background(), id)
	require.NoError(w.t, err)
	require.Nil(w.t, tbl.CurrentSnapshot())
}

// observer runs hook once, at the first batch a slice reads.
type observer struct {
	once sync.Once
	hook func()
}

func (o *observer) PhaseStart(ctx context.Context, _ writestrategy.PhaseEvent) context.Context {
	return ctx
}
func (o *observer) PhaseEnd(context.Context, writestrategy.PhaseEvent)    {}
func (o *observer) Progress(context.Context, writestrategy.ProgressEvent) { o.once.Do(o.hook) }

// TestSlicesReadOneSnapshot: a source changed while the slices read it is
// read as of the write's one snapshot, by every slice.
func TestSlicesReadOneSnapshot(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.seedTable("rel", "src_table", 20000)
	_, err := w.write(ctx, nil, transform("before", "rel"), 0)
	require.NoError(t, err)
	obs := &observer{hook: func() {
		_, err := w.pool.Exec(ctx, `DELETE FROM src_table WHERE id % 2 = 0;
			UPDATE src_table SET name = 'changed' WHERE id % 3 = 0;
			INSERT INTO src_table SELECT id + 100000, name, amount, x, ts FROM src_table`)
		require.NoError(t, err)
	}}
	res, err := w.write(ctx, obs, transform("during", "rel"), 4)
	require.NoError(t, err)
	require.Equal(t, 4, res.Slices)
	w.requireSameTable("before", "during")
	_, err = w.write(ctx, nil, transform("after", "rel"), 4)
	require.NoError(t, err)
	ca, err := w.f.Checksum(ctx, "after", 0)
	require.NoError(t, err)
	cb, err := w.f.Checksum(ctx, "before", 0)
	require.NoError(t, err)
	require.NotEqual(t, cb, ca, "the change was made during the write")
}

// TestSlicesFailureLeavesNothing: a failed slice, a cancelled write and a
// killed coordinator each leave the table, the ledger and the warehouse as
// they were, and the next write succeeds.
func TestSlicesFailureLeavesNothing(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.seedRowStore("src", 20000)
	good := transform("out", "src")
	_, err := w.write(ctx, nil, good, 4)
	require.NoError(t, err)
	head := w.head("out")
	files := w.dataFiles()

	requireUnchanged := func(what string) {
		t.Helper()
		require.Equal(t, head, w.head("out"), what)
		require.Equal(t, files, w.dataFiles(), what+": files")
		var open int
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions
			WHERE dataset_id = 'out' AND status = 'committed'`).Scan(&open))
		require.Equal(t, 1, open, what)
	}
	// One slice fails (division by zero in one range only).
	bad := transform("out", "src")
	bad.Steps[0].SQL = `SELECT id, name, amount / (CASE WHEN id = 15000 THEN 0 ELSE 1 END) AS amount, x, ts FROM source WHERE id % 13 <> 0`
	_, err = w.write(ctx, nil, bad, 4)
	require.ErrorContains(t, err, "division by zero")
	requireUnchanged("failed slice")

	// The write is cancelled while the slices read.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, err = w.write(cctx, &observer{hook: cancel}, good, 4)
	require.ErrorIs(t, err, context.Canceled)
	requireUnchanged("cancelled")

	// The coordinator's backend dies (its transaction holds the snapshot,
	// and commits the snapshot with the ledger).
	kill := &observer{hook: func() {
		var n int
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(pg_catalog.pg_terminate_backend(pid)) FROM pg_catalog.pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%pg_export_snapshot%'`).Scan(&n))
		require.Equal(t, 1, n)
	}}
	_, err = w.write(ctx, kill, good, 4)
	require.Error(t, err)
	require.Equal(t, head, w.head("out"), "killed coordinator")
	require.Equal(t, files, w.dataFiles(), "killed coordinator: files")

	res, err := w.write(ctx, nil, good, 4)
	require.NoError(t, err)
	require.Equal(t, 4, res.Slices)
	require.NotEqual(t, head, w.head("out"))
	w.requireSameTableAs("out", 20000-20000/13)
}

func (w *world) requireSameTableAs(id string, rows int) {
	w.t.Helper()
	require.Len(w.t, w.table(id), rows)
}

func (w *world) head(id string) int64 {
	w.t.Helper()
	tbl, err := w.f.LoadTable(context.Background(), id)
	if errors.Is(err, facade.ErrTableNotFound) {
		return 0
	}
	require.NoError(w.t, err)
	if s := tbl.CurrentSnapshot(); s != nil {
		return s.SnapshotID
	}
	return 0
}

// TestSliceFilesRemovedByOrphanPass: the files of slices whose write never
// commits (the coordinator died before staging them) are unreferenced
// files of the table, which the lifecycle's orphan pass removes.
func TestSliceFilesRemovedByOrphanPass(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.seedRowStore("src", 2000)
	_, err := w.write(ctx, nil, transform("out", "src"), 2)
	require.NoError(t, err)
	live := w.dataFiles()

	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	sw, err := w.f.BeginSliced(ctx, facade.Target{DatasetID: "out", WriterID: writer}, facade.WriteRequest{Mode: facade.Replace, Schema: sc})
	require.NoError(t, err)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues([]int64{1, 2, 3}, nil)
	col := b.NewArray()
	rec := array.NewRecordBatch(sc, []arrow.Array{col}, 3)
	defer rec.Release()
	col.Release()
	part, err := sw.WriteSlice(ctx, 1, 100, func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) })
	require.NoError(t, err)
	require.Len(t, part.DataFiles, 1)
	require.Len(t, w.dataFiles(), len(live)+1)

	rep, err := w.f.MaintainWith(ctx, "out", facade.Lifecycle{OrphanAge: time.Nanosecond, OrphanEvery: -1})
	require.NoError(t, err)
	require.Equal(t, 1, rep.OrphansDeleted)
	require.Equal(t, live, w.dataFiles())
}

// TestSlicesStepsReadOneSnapshot runs the three steps as a job system
// would, one slice after the other: the source changes after the plan and
// after the first slice, and every slice still reads it as of the plan's
// snapshot, which the coordinator's transaction holds.
func TestSlicesStepsReadOneSnapshot(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	_, err := w.pool.Exec(ctx, `CREATE TABLE src_table AS `+strings.Replace(slicetest.SrcSQL, "$1::int", "6000", 1))
	require.NoError(t, err)
	const cols = `SELECT id, name, amount, x, ts FROM src_table r`
	stream, err := cursor.Batches(ctx, w.pool, cols, nil, nil)
	require.NoError(t, err)
	before, err := facade.ChecksumBatches(released(stream.All()))
	require.NoError(t, err)

	coord, err := w.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = coord.Rollback(ctx) }()
	cfg := &sliced.Config{DB: w.pool}
	plan, err := sliced.PlanSlices(ctx, cfg, coord, sliced.Source{Table: "src_table"}, 4, func(r sliced.Range) (string, []any, error) {
		sql, args := cols+` WHERE r.ctid >= $1::tid`, []any{fmt.Sprintf("(%d,0)", r.Lo)}
		if r.Hi >= 0 {
			sql, args = sql+` AND r.ctid < $2::tid`, append(args, fmt.Sprintf("(%d,0)", r.Hi))
		}
		return sql, args, nil
	})
	require.NoError(t, err)
	require.Len(t, plan.Slices, 4)
	mutate := func() {
		_, err := w.pool.Exec(ctx, `DELETE FROM src_table WHERE id % 2 = 0;
			UPDATE src_table SET name = 'changed' WHERE id % 3 = 0;
			INSERT INTO src_table SELECT id + 100000, name, amount, x, ts FROM src_table`)
		require.NoError(t, err)
	}
	mutate()
	sw, err := w.f.BeginSliced(ctx, facade.Target{DatasetID: "steps", WriterID: writer}, facade.WriteRequest{Mode: facade.Replace, Schema: stream.Schema()})
	require.NoError(t, err)
	var parts []facade.SliceFiles
	for i, s := range plan.Slices {
		got, err := sliced.WriteSlice(ctx, cfg, sw, plan.Snapshot, s)
		require.NoError(t, err)
		require.Equal(t, s.First, got.Files.First)
		parts = append(parts, got.Files)
		if i == 0 {
			mutate()
		}
	}
	st, err := sw.Stage(ctx, parts)
	require.NoError(t, err)
	res, err := st.Commit(ctx)
	require.NoError(t, err)
	require.Equal(t, before, res.Checksum)
	require.Equal(t, before, w.checksum("steps"))
	require.NoError(t, coord.Rollback(ctx))

	// The coordinator's transaction gone, the snapshot cannot be imported.
	_, err = sliced.WriteSlice(ctx, cfg, sw, plan.Snapshot, plan.Slices[0])
	require.ErrorIs(t, err, sliced.ErrSnapshot)
}

// released releases the owned batches of a cursor stream after each yield.
func released(rows func(func(arrow.RecordBatch, error) bool)) func(func(arrow.RecordBatch, error) bool) {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for rec, err := range rows {
			more := yield(rec, err)
			if rec != nil {
				rec.Release()
			}
			if !more {
				return
			}
		}
	}
}

// peakAlloc tracks the Arrow memory in use and its peak.
type peakAlloc struct {
	*memory.CheckedAllocator
	mu        sync.Mutex
	cur, peak int64
}

func (a *peakAlloc) add(n int64) {
	a.mu.Lock()
	a.cur += n
	a.peak = max(a.peak, a.cur)
	a.mu.Unlock()
}

func (a *peakAlloc) Allocate(n int) []byte { a.add(int64(n)); return a.CheckedAllocator.Allocate(n) }
func (a *peakAlloc) Reallocate(n int, b []byte) []byte {
	a.add(int64(n - len(b)))
	return a.CheckedAllocator.Reallocate(n, b)
}
func (a *peakAlloc) Free(b []byte) { a.add(-int64(len(b))); a.CheckedAllocator.Free(b) }

func (a *peakAlloc) takePeak() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.peak
	a.peak = a.cur
	return p
}

// TestSlicesMemoryPerSlice: each slice holds the Arrow memory of one
// stream (N slices at most N times one stream's peak, whatever the rows),
// and every batch is released.
func TestSlicesMemoryPerSlice(t *testing.T) {
	mem := &peakAlloc{CheckedAllocator: memory.NewCheckedAllocator(memory.NewGoAllocator())}
	w := newWorldWith(t, mem)
	ctx := context.Background()
	w.seedRowStore("src", 8000)
	peaks := map[int]int64{}
	for _, n := range []int{1, 4} {
		mem.takePeak()
		_, err := w.write(ctx, nil, transform(fmt.Sprintf("out%d", n), "src"), n)
		require.NoError(t, err)
		peaks[n] = mem.takePeak()
		require.Zero(t, mem.CurrentAlloc(), "every batch released")
	}
	t.Logf("peak Arrow memory: one stream %d bytes, 4 slices %d bytes", peaks[1], peaks[4])
	require.Positive(t, peaks[1])
	require.LessOrEqual(t, peaks[4], 4*peaks[1])
}

type tableRow = slicetest.Row

func (w *world) seedRowStore(id string, n int) { slicetest.SeedRowStore(w.t, w.pool, w.l, id, n) }

func (w *world) seedTable(id, table string, n int) { slicetest.SeedTable(w.t, w.pool, id, table, n) }

func transform(out, src string) writestrategy.Transform { return slicetest.Transform(out, src) }

// table reads a dataset's rows in __row_index order.
func (w *world) table(id string) []tableRow { return slicetest.Table(w.t, w.f, id) }

func (w *world) requireSameRows(a, b []tableRow, sameIdentity bool) {
	w.t.Helper()
	slicetest.RequireSameRows(w.t, a, b, sameIdentity)
}

func (w *world) dataFiles() []string { return slicetest.DataFiles(w.t, w.warehouse) }
