package sliceriver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/writestrategy"
	"github.com/lakewrite/lakewrite/writestrategy/sliced"
	"github.com/lakewrite/lakewrite/writestrategy/sliced/sliceriver"
)

// TestRiverSlicesWriteWhatOneStreamWrites: slices written by River
// workers in two other processes write, for N = 2, 4 and 8 through the
// Dispatcher (which writes N = 1 as one stream), the table one stream
// writes (rows, checksum, order by __row_index), with the identity columns
// of the same write in slices in this process, from a row-store source
// and from a registered table. The Dispatcher's Observer sees one
// progress event per River slice, with the rows that slice has in this
// process's write.
func TestRiverSlicesWriteWhatOneStreamWrites(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	obs := &progressRecorder{}
	w.obs = obs
	w.seedRowStore("src", 6000)
	w.seedTable("rel", "src_table", 6000)
	w.startWorker()
	w.startWorker()
	for _, src := range []string{"src", "rel"} {
		out := src + "_out"
		_, err := w.write(ctx, transform(out, src), 0, false)
		require.NoError(t, err)
		one, sum := w.table(out), w.checksum(out)
		for _, n := range []int{1, 2, 4, 8} {
			obs.take()
			res, err := w.write(ctx, transform(out, src), n, false)
			require.NoError(t, err)
			require.Equal(t, n, res.Slices, res.SliceNote)
			local := w.table(out)
			// In this process: an event per batch of each slice, the last
			// with the slice's rows.
			want := map[int]int64{}
			for _, ev := range obs.take() {
				want[ev.Slice] = max(want[ev.Slice], ev.Rows)
			}

			res, err = w.write(ctx, transform(out, src), n, true)
			require.NoError(t, err)
			require.Equal(t, n, res.Slices, res.SliceNote)
			require.Equal(t, sum, w.checksum(out), "N = %d", n)
			got := w.table(out)
			w.requireSameRows(one, got, n == 1)
			w.requireSameRows(local, got, true)
			if n > 1 {
				evs := obs.take()
				require.Len(t, evs, n, "one event per River slice")
				seen := map[int]int64{}
				for _, ev := range evs {
					require.Equal(t, out, ev.DatasetID)
					require.Positive(t, ev.Elapsed)
					require.NotContains(t, seen, ev.Slice)
					seen[ev.Slice] = ev.Rows
				}
				require.Equal(t, want, seen, "N = %d: the rows of each slice", n)
				var total int64
				for _, r := range seen {
					total += r
				}
				require.EqualValues(t, len(got), total)
			}
		}
	}
	var left, marks int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE slice >= 0), count(*) FILTER (WHERE slice = -1)
		FROM lakewrite.slice_results`).Scan(&left, &marks))
	require.Zero(t, left, "the results are deleted once staged")
	require.Equal(t, 2*3, marks, "one mark per write closed")
	pruned, err := w.coord.Prune(ctx, 0)
	require.NoError(t, err)
	require.EqualValues(t, marks, pruned)
	done, err := w.client.JobList(ctx, river.NewJobListParams().Kinds(sliceriver.Kind).States(rivertype.JobStateCompleted))
	require.NoError(t, err)
	// The Dispatcher writes N = 1 as one stream, without jobs.
	require.Len(t, done.Jobs, 2*(2+4+8), "every slice written by a worker process")
}

// TestRiverWorkerKilledMidSlice: a worker process killed (SIGKILL) while
// writing a slice leaves its job running; River's rescuer (in a worker
// process started after the kill, with a short RescueStuckJobsAfter
// and Worker timeout) retries it and the write completes with the table one stream writes,
// the slice counted once. The killed attempt's files are orphans, which
// the lifecycle's orphan pass removes without touching the table.
func TestRiverWorkerKilledMidSlice(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.seedRowStore("src", 20000)
	_, err := w.write(ctx, transform("one", "src"), 0, false)
	require.NoError(t, err)

	hung := w.startWorker(envHang+"=1", envLeader+"=0")
	type result struct {
		res any
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := w.write(ctx, transform("out", "src"), 2, true)
		done <- result{res, err}
	}()
	hung.await("hang")
	hung.kill()

	// The slices' jobs are still running, attempted by the dead process
	// (the hung one, maybe the other too); the rescuer retries them once
	// they have run RescueStuckJobsAfter.
	const rescueAfter = 3 * time.Second
	jobs, err := w.client.JobList(ctx, river.NewJobListParams().States(rivertype.JobStateRunning))
	require.NoError(t, err)
	require.NotEmpty(t, jobs.Jobs)
	for _, j := range jobs.Jobs {
		require.Equal(t, 1, j.Attempt)
		time.Sleep(time.Until(j.AttemptedAt.Add(rescueAfter + 100*time.Millisecond)))
	}
	w.startWorker(envRescue + "=" + rescueAfter.String())

	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, w.checksum("one"), w.checksum("out"))
	w.requireSameRows(w.table("one"), w.table("out"), false)
	for _, j := range jobs.Jobs {
		job, err := w.client.JobGet(ctx, j.ID)
		require.NoError(t, err)
		require.Equal(t, rivertype.JobStateCompleted, job.State)
		require.Equal(t, 2, job.Attempt, "the killed slice ran again")
	}

	before := w.checksum("out")
	rep, err := w.f.MaintainWith(ctx, "out", facade.Lifecycle{OrphanAge: time.Nanosecond, OrphanEvery: -1})
	require.NoError(t, err)
	t.Logf("orphan files removed after the kill: %d", rep.OrphansDeleted)
	require.Equal(t, before, w.checksum("out"))
}

// TestRiverSliceFailureFailsTheWrite: a slice that fails on every attempt
// (MaxAttempts 2) fails the write: nothing visible, no file left, no
// result left, and the next write succeeds.
func TestRiverSliceFailureFailsTheWrite(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.seedRowStore("src", 20000)
	w.startWorker()
	w.startWorker()
	good := transform("out", "src")
	_, err := w.write(ctx, good, 4, true)
	require.NoError(t, err)
	head, files := w.head("out"), w.dataFiles()

	bad := transform("out", "src")
	bad.Steps[0].SQL = `SELECT id, name, amount / (CASE WHEN id = 15000 THEN 0 ELSE 1 END) AS amount, x, ts FROM source WHERE id % 13 <> 0`
	_, err = w.write(ctx, bad, 4, true)
	require.ErrorIs(t, err, sliceriver.ErrSliceFailed)
	require.ErrorContains(t, err, "division by zero")
	require.ErrorContains(t, err, "after 2 attempts")
	require.Equal(t, head, w.head("out"))
	require.Equal(t, files, w.dataFiles(), "the written slices' files are deleted")
	var left int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.slice_results WHERE slice >= 0`).Scan(&left))
	require.Zero(t, left, "no result left")

	res, err := w.write(ctx, good, 4, true)
	require.NoError(t, err)
	require.Equal(t, 4, res.Slices)
	require.NotEqual(t, head, w.head("out"))
	require.Len(t, w.table("out"), 20000-20000/13)
}

// TestRiverCoordinatorEnds: a coordinator whose context is cancelled
// while it waits leaves nothing visible and the next write succeeds; a
// slice whose coordinator's transaction ended (a coordinator that died)
// cannot import the snapshot and its job is cancelled with
// sliced.ErrSnapshot, without retries; a slice of a write whose results
// are closed writes nothing (ErrWriteClosed).
func TestRiverCoordinatorEnds(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.seedTable("rel", "src_table", 20000)
	good := transform("out", "rel")
	hung := w.startWorker(envHang+"=0", envLeader+"=0")
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := w.write(cctx, good, 2, true)
		done <- err
	}()
	hung.await("hang")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	tbl, err := w.f.LoadTable(ctx, "out")
	if err == nil {
		require.Nil(t, tbl.CurrentSnapshot(), "nothing visible")
	} else {
		require.ErrorIs(t, err, facade.ErrTableNotFound)
	}
	hung.kill()

	w.startWorker()
	res, err := w.write(ctx, good, 2, true)
	require.NoError(t, err)
	require.Equal(t, 2, res.Slices)
	require.Len(t, w.table("out"), 20000-20000/13)

	// A coordinator that died: its transaction, and the snapshot, ended
	// before the slice's job ran.
	coord, err := w.pool.Begin(ctx)
	require.NoError(t, err)
	cfg := &sliced.Config{DB: w.pool}
	plan, err := sliced.PlanSlices(ctx, cfg, coord, sliced.Source{Table: "src_table"}, 1, func(sliced.Range) (string, []any, error) {
		return `SELECT id, name, amount, x, ts FROM src_table`, nil, nil
	})
	require.NoError(t, err)
	sw, err := w.f.BeginSliced(ctx, facade.Target{DatasetID: "dead", WriterID: writer},
		facade.WriteRequest{Mode: facade.Replace, Schema: w.table2schema()})
	require.NoError(t, err)
	ref, err := sw.Ref()
	require.NoError(t, err)
	require.NoError(t, coord.Rollback(ctx))
	args, err := sliceriver.NewSliceArgs(ref, plan.Snapshot, plan.Slices[0], time.Now().Add(time.Minute))
	require.NoError(t, err)
	ins, err := w.client.Insert(ctx, args, &river.InsertOpts{MaxAttempts: 3})
	require.NoError(t, err)
	var job *rivertype.JobRow
	require.Eventually(t, func() bool {
		job, err = w.client.JobGet(ctx, ins.Job.ID)
		require.NoError(t, err)
		return job.State == rivertype.JobStateCancelled
	}, time.Minute, 50*time.Millisecond)
	require.Equal(t, 1, job.Attempt, "not retried")
	require.Contains(t, job.Errors[len(job.Errors)-1].Error, sliced.ErrSnapshot.Error())

	// A slice of a write whose results are closed (its coordinator ended
	// the write without it) writes nothing, and its job is cancelled.
	coord, err = w.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = coord.Rollback(ctx) }()
	plan, err = sliced.PlanSlices(ctx, cfg, coord, sliced.Source{Table: "src_table"}, 1, func(sliced.Range) (string, []any, error) {
		return `SELECT id, name, amount, x, ts FROM src_table`, nil, nil
	})
	require.NoError(t, err)
	sw, err = w.f.BeginSliced(ctx, facade.Target{DatasetID: "closed", WriterID: writer},
		facade.WriteRequest{Mode: facade.Replace, Schema: w.table2schema()})
	require.NoError(t, err)
	ref, err = sw.Ref()
	require.NoError(t, err)
	_, err = w.pool.Exec(ctx, `INSERT INTO lakewrite.slice_results (write_id, slice, files, rounded) VALUES ($1, -1, 'null', 0)`, ref.WriteID)
	require.NoError(t, err)
	args, err = sliceriver.NewSliceArgs(ref, plan.Snapshot, plan.Slices[0], time.Now().Add(time.Minute))
	require.NoError(t, err)
	ins, err = w.client.Insert(ctx, args, &river.InsertOpts{MaxAttempts: 3})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		job, err = w.client.JobGet(ctx, ins.Job.ID)
		require.NoError(t, err)
		return job.State == rivertype.JobStateCancelled
	}, time.Minute, 50*time.Millisecond)
	require.Contains(t, job.Errors[len(job.Errors)-1].Error, sliceriver.ErrWriteClosed.Error())
	for _, f := range w.dataFiles() {
		require.NotContains(t, f, "/closed/")
	}
}

// table2schema is the Arrow schema of the source's columns.
func (w *world) table2schema() *arrow.Schema {
	w.t.Helper()
	stream, err := cursor.Batches(context.Background(), w.pool, `SELECT id, name, amount, x, ts FROM src_table LIMIT 0`, nil, nil)
	require.NoError(w.t, err)
	for rec, err := range stream.All() {
		require.NoError(w.t, err)
		rec.Release()
	}
	return stream.Schema()
}

// TestRiverStageAsSlicedStage: Coordinator.Stage, called as sliced.Stage
// is, for N = 1, 2, 4 and 8 slices of a table written by a worker process,
// commits the rows (checksum) one stream reads, with the identity columns
// sliced.Stage gives in this process, and leaves no goroutine behind.
func TestRiverStageAsSlicedStage(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.seedTable("rel", "src_table", 6000)
	w.startWorker()
	const cols = `SELECT id, name, amount, x, ts FROM src_table r`
	stream, err := cursor.Batches(ctx, w.pool, cols, nil, nil)
	require.NoError(t, err)
	want, err := facade.ChecksumBatches(released(stream.All()))
	require.NoError(t, err)
	sqlFor := func(r sliced.Range) (string, []any, error) {
		sql, args := cols+` WHERE r.ctid >= $1::tid`, []any{fmt.Sprintf("(%d,0)", r.Lo)}
		if r.Hi >= 0 {
			sql, args = sql+` AND r.ctid < $2::tid`, append(args, fmt.Sprintf("(%d,0)", r.Hi))
		}
		return sql, args, nil
	}
	write := func(stage sliced.StageFunc, n int) []tableRow {
		coord, err := w.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = coord.Rollback(ctx) }()
		st, got, _, err := stage(ctx, &sliced.Config{DB: w.pool}, w.f, coord, facade.Target{DatasetID: "direct", WriterID: writer},
			facade.WriteRequest{Mode: facade.Replace, Schema: stream.Schema()}, sliced.Source{Table: "src_table"}, n, sqlFor)
		require.NoError(t, err)
		require.Equal(t, n, got)
		res, err := st.Commit(ctx)
		require.NoError(t, err)
		require.Equal(t, want, res.Checksum)
		require.NoError(t, coord.Commit(ctx))
		require.Equal(t, want, w.checksum("direct"))
		return w.table("direct")
	}
	for _, n := range []int{1, 2, 4, 8} {
		local := write(sliced.Stage, n)
		w.requireSameRows(local, write(w.coord.Stage, n), true)
	}
	requireNoGoroutines(t)
}

// ours is the stacks of the goroutines running code of lakewrite or
// River, but for the test's own.
func ours() []string {
	buf := make([]byte, 1<<22)
	var out []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if (strings.Contains(g, "github.com/lakewrite/lakewrite/") || strings.Contains(g, "github.com/riverqueue/")) &&
			!strings.Contains(g, "sliceriver_test.") {
			out = append(out, g)
		}
	}
	return out
}

// released releases the owned batches of a cursor stream after each yield.
func released(rows iter.Seq2[arrow.RecordBatch, error]) iter.Seq2[arrow.RecordBatch, error] {
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

// TestRiverSlicesReadOneSnapshot: the source table changed (rows
// deleted, updated and inserted, committed) while River slices read it
// is read as of the coordinator's snapshot. Eight slices on a worker
// process that runs four at a time: the first four wait after importing
// the snapshot, the change commits, then all eight read; the other four
// begin only after the change. The output is the table one stream wrote
// before the change, and a write after it differs.
func TestRiverSlicesReadOneSnapshot(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.seedTable("rel", "src_table", 20000)
	_, err := w.write(ctx, transform("before", "rel"), 0, false)
	require.NoError(t, err)

	release := filepath.Join(t.TempDir(), "release")
	wk := w.startWorker(envHold + "=" + release)
	type result struct {
		res writestrategy.WriteResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := w.write(ctx, transform("during", "rel"), 8, true)
		done <- result{res, err}
	}()
	for range 4 {
		wk.await("hold")
	}
	jobs, err := w.client.JobList(ctx, river.NewJobListParams().Kinds(sliceriver.Kind).
		States(rivertype.JobStateRunning, rivertype.JobStateAvailable))
	require.NoError(t, err)
	state := map[rivertype.JobState]int{}
	for _, j := range jobs.Jobs {
		state[j.State]++
	}
	require.Equal(t, map[rivertype.JobState]int{rivertype.JobStateRunning: 4, rivertype.JobStateAvailable: 4}, state,
		"four slices began, four did not")
	_, err = w.pool.Exec(ctx, `DELETE FROM src_table WHERE id % 2 = 0;
		UPDATE src_table SET name = 'changed' WHERE id % 3 = 0;
		INSERT INTO src_table SELECT id + 100000, name, amount, x, ts FROM src_table`)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(release, nil, 0o600))

	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, 8, r.res.Slices, r.res.SliceNote)
	require.Equal(t, w.checksum("before"), w.checksum("during"))
	w.requireSameRows(w.table("before"), w.table("during"), false)

	_, err = w.write(ctx, transform("after", "rel"), 8, true)
	require.NoError(t, err)
	require.NotEqual(t, w.checksum("before"), w.checksum("after"), "the change was made during the write")
}

// TestRiverCoordinatorProcessKilled: a coordinator process (a Dispatcher
// write whose slices run on River) killed with SIGKILL while a slice
// reads leaves nothing visible in the table. Its backend ends with it,
// and the snapshot with its transaction: the slice that had imported the
// snapshot still reads it, completes and stores its result, which no
// one stages (it stays in the results table until Coordinator.Prune, its
// files are orphans of the table); the slices not begun cannot import
// the snapshot and their jobs are cancelled (sliced.ErrSnapshot, one
// attempt). The write's ledger intent stays open, its holder dead, until
// the next writer reconciles it (aborted), and that write succeeds. The
// orphan pass removes the dead write's files and Prune its result.
func TestRiverCoordinatorProcessKilled(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.seedTable("rel", "src_table", 20000)
	_, err := w.write(ctx, transform("one", "rel"), 0, false)
	require.NoError(t, err)
	kept := w.dataFiles()

	// One slice at a time: the first waits after importing the snapshot,
	// the others are not begun.
	release := filepath.Join(t.TempDir(), "release")
	wk := w.startWorker(envHold+"="+release, envWorkers+"=1", envLeader+"=0")
	co := w.startCoordinator("out", "rel", 4)
	co.await("writing")
	wk.await("hold")
	co.kill()
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE application_name = $1`,
			coordinatorApp).Scan(&n))
		return n == 0
	}, time.Minute, 20*time.Millisecond, "the coordinator's backends end with it")
	requireNothingVisible(t, w, "out")
	var intent string
	require.Eventually(t, func() bool {
		open, err := w.l.OpenIntents(ctx)
		require.NoError(t, err)
		require.Len(t, open, 1)
		require.Equal(t, "out", open[0].DatasetID)
		intent = open[0].ID
		return !open[0].HolderAlive
	}, time.Minute, 20*time.Millisecond, "the dead coordinator's intent is open, its holder gone")

	require.NoError(t, os.WriteFile(release, nil, 0o600))
	var jobs []*rivertype.JobRow
	require.Eventually(t, func() bool {
		list, err := w.client.JobList(ctx, river.NewJobListParams().Kinds(sliceriver.Kind))
		require.NoError(t, err)
		jobs = list.Jobs
		for _, j := range jobs {
			if j.FinalizedAt == nil {
				return false
			}
		}
		return len(jobs) == 4
	}, time.Minute, 50*time.Millisecond, "every slice's job ends")
	var completed []int
	for _, j := range jobs {
		var a sliceriver.SliceArgs
		require.NoError(t, json.Unmarshal(j.EncodedArgs, &a))
		require.Equal(t, 1, j.Attempt, "slice %d not retried", a.Index)
		if j.State == rivertype.JobStateCompleted {
			completed = append(completed, a.Index)
			continue
		}
		require.Equal(t, rivertype.JobStateCancelled, j.State, "slice %d", a.Index)
		require.Contains(t, j.Errors[len(j.Errors)-1].Error, sliced.ErrSnapshot.Error(), "slice %d", a.Index)
	}
	require.Len(t, completed, 1, "the slice that had imported the snapshot")
	var results, marks int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE slice >= 0), count(*) FILTER (WHERE slice = -1)
		FROM lakewrite.slice_results`).Scan(&results, &marks))
	require.Equal(t, 1, results, "the completed slice's result, never staged")
	require.Zero(t, marks, "the results were never closed")
	requireNothingVisible(t, w, "out")
	orphans := slices.DeleteFunc(w.dataFiles(), func(f string) bool { return slices.Contains(kept, f) })
	require.NotEmpty(t, orphans, "the completed slice's files")

	// The next write, its coordinator in this process.
	w.startWorker()
	res, err := w.write(ctx, transform("out", "rel"), 4, true)
	require.NoError(t, err)
	require.Equal(t, 4, res.Slices)
	require.Equal(t, w.checksum("one"), w.checksum("out"))
	w.requireSameRows(w.table("one"), w.table("out"), false)
	var status string
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT status FROM lakewrite.pipeline_build_transactions WHERE id = $1`, intent).Scan(&status))
	require.Equal(t, "aborted", status, "the dead coordinator's intent, reconciled by the next writer")

	pruned, err := w.coord.Prune(ctx, 0)
	require.NoError(t, err)
	require.EqualValues(t, 2, pruned, "the dead write's result and the next write's mark")
	before := w.checksum("out")
	rep, err := w.f.MaintainWith(ctx, "out", facade.Lifecycle{OrphanAge: time.Nanosecond, OrphanEvery: -1})
	require.NoError(t, err)
	require.Positive(t, rep.OrphansDeleted)
	require.Equal(t, before, w.checksum("out"))
	for _, f := range orphans {
		require.NoFileExists(t, f, "the dead write's files are orphans")
	}
	for _, f := range kept {
		require.FileExists(t, f)
	}
	requireNoGoroutines(t)
}

// requireNothingVisible: the table id does not exist or has no snapshot.
func requireNothingVisible(t *testing.T, w *world, id string) {
	t.Helper()
	tbl, err := w.f.LoadTable(context.Background(), id)
	if err != nil {
		require.ErrorIs(t, err, facade.ErrTableNotFound)
		return
	}
	require.Nil(t, tbl.CurrentSnapshot(), "nothing visible in %s", id)
}

// progressRecorder is an Observer that records the progress events.
type progressRecorder struct {
	mu  sync.Mutex
	evs []writestrategy.ProgressEvent
}

func (*progressRecorder) PhaseStart(ctx context.Context, _ writestrategy.PhaseEvent) context.Context {
	return ctx
}
func (*progressRecorder) PhaseEnd(context.Context, writestrategy.PhaseEvent) {}
func (r *progressRecorder) Progress(_ context.Context, ev writestrategy.ProgressEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
}

// take returns the events recorded since the last take.
func (r *progressRecorder) take() []writestrategy.ProgressEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	evs := r.evs
	r.evs = nil
	return evs
}
