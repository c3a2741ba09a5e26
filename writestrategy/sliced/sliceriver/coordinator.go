package sliceriver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/writestrategy/sliced"
)

// Errors of a write whose slices run on River; match them with errors.Is.
var (
	// ErrConfig: a Coordinator or Worker was configured without what it
	// needs.
	ErrConfig = errors.New("sliceriver: invalid configuration")
	// ErrSliceFailed: a slice's job was discarded (its attempts spent) or
	// cancelled (it cannot succeed, e.g. the snapshot is gone). The write
	// failed and nothing was committed; the error names the slice and
	// wraps its last attempt's error text.
	ErrSliceFailed = errors.New("sliceriver: a slice failed")
	// ErrWriteClosed: a slice's job ran after its write ended (it failed,
	// or committed with an earlier attempt's result): the job is
	// cancelled and writes nothing.
	ErrWriteClosed = errors.New("sliceriver: the slice's write has ended")
)

// Defaults of CoordinatorConfig.
const (
	DefaultMaxAttempts = 3
	DefaultPoll        = 200 * time.Millisecond
)

// CoordinatorConfig configures a Coordinator.
type CoordinatorConfig struct {
	// Client inserts, reads and cancels the slice jobs: any River client
	// on the database, an insert-only one (no Queues, not started) too.
	Client *river.Client[pgx.Tx]
	// DB enqueues the jobs (in a transaction of its own) and reads the
	// results.
	DB *pgxpool.Pool
	// Schema holds the results table (Migrate); empty: DefaultSchema.
	Schema string
	// Queue of the slice jobs; empty: river.QueueDefault.
	Queue string
	// MaxAttempts of a slice's job; zero: DefaultMaxAttempts.
	MaxAttempts int
	// Poll is how often the coordinator looks for results; zero:
	// DefaultPoll.
	Poll time.Duration
}

// Coordinator stages sliced writes whose slices River workers write
// (Worker), in other processes. Its Stage is a sliced.StageFunc: give it
// to writestrategy.DispatchConfig.StageSlices.
type Coordinator struct {
	cfg     CoordinatorConfig
	results string
}

// NewCoordinator returns a Coordinator; Client and DB are required.
func NewCoordinator(cfg CoordinatorConfig) (*Coordinator, error) {
	if cfg.Client == nil || cfg.DB == nil {
		return nil, fmt.Errorf("%w: a coordinator needs Client and DB", ErrConfig)
	}
	if cfg.MaxAttempts < 0 || cfg.Poll < 0 {
		return nil, fmt.Errorf("%w: MaxAttempts %d, Poll %s", ErrConfig, cfg.MaxAttempts, cfg.Poll)
	}
	if cfg.Queue == "" {
		cfg.Queue = river.QueueDefault
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Poll == 0 {
		cfg.Poll = DefaultPoll
	}
	return &Coordinator{cfg: cfg, results: resultsTable(cfg.Schema)}, nil
}

var _ sliced.StageFunc = (*Coordinator)(nil).Stage

// Stage is sliced.Stage with the slices written by River workers: it
// begins the write on lake, plans the slices on coord (which exports its
// snapshot and must stay open until Stage returns), enqueues one job per
// slice, waits for every slice's result until cfg.Deadline, and stages the
// slices' files as one write; the Staged commits like sliced.Stage's (in
// coord, with the ledger, on the catalog of facade.NewPostgresCatalog).
//
// The jobs are enqueued in a short transaction of their own, committed
// before the wait: enqueued in coord they would stay invisible to the
// workers until coord commits, which it does only after the slices are
// written.
//
// A slice that fails for good (ErrSliceFailed), the deadline or ctx
// ending the wait fail the write: the unfinished jobs are cancelled, the
// files of the slices already written are deleted, and nothing is
// visible. cfg.Cursor and cfg.Wrap are the workers' (WorkerConfig): the
// batches are read there. Progress is reported here instead: Stage calls
// cfg.SliceDone, when set, once per slice as its result arrives (in the
// order they arrive, each with all its rows), before the write commits or
// fails.
func (c *Coordinator) Stage(ctx context.Context, cfg *sliced.Config, lake *facade.Facade, coord pgx.Tx, target facade.Target,
	req facade.WriteRequest, src sliced.Source, n int, sqlFor func(sliced.Range) (string, []any, error)) (facade.Staged, int, int64, error) {
	deadline := sliced.DefaultDeadline
	if cfg != nil && cfg.Deadline > 0 {
		deadline = cfg.Deadline
	}
	dctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	w, err := lake.BeginSliced(dctx, target, req)
	if err != nil {
		return nil, 0, 0, err
	}
	if w.Replay() != nil {
		st, err := w.Stage(ctx, nil)
		return st, 0, 0, err
	}
	plan, err := sliced.PlanSlices(dctx, cfg, coord, src, n, sqlFor)
	if err != nil {
		return nil, 0, 0, err
	}
	ref, err := w.Ref()
	if err != nil {
		return nil, 0, 0, err
	}
	dl, _ := dctx.Deadline()
	params := make([]river.InsertManyParams, len(plan.Slices))
	for i, s := range plan.Slices {
		a, err := NewSliceArgs(ref, plan.Snapshot, s, dl)
		if err != nil {
			return nil, 0, 0, err
		}
		params[i] = river.InsertManyParams{Args: a, InsertOpts: &river.InsertOpts{Queue: c.cfg.Queue, MaxAttempts: c.cfg.MaxAttempts}}
	}
	ids, err := c.enqueue(dctx, params)
	if err != nil {
		return nil, 0, 0, err
	}
	var done func(int, int64)
	if cfg != nil {
		done = cfg.SliceDone
	}
	if err := c.wait(dctx, ref.WriteID, ids, done); err != nil {
		c.giveUp(ctx, w, ref.WriteID, ids)
		return nil, 0, 0, err
	}
	parts, rounded, err := c.close(dctx, w, ref.WriteID)
	if err != nil {
		return nil, 0, 0, err
	}
	if len(parts) != len(ids) {
		w.Abort(parts...)
		return nil, 0, 0, fmt.Errorf("sliceriver: %d results for %d slices", len(parts), len(ids))
	}
	st, err := w.Stage(ctx, parts)
	return st, len(parts), rounded, err
}

// enqueue inserts the slice jobs in a transaction of its own.
func (c *Coordinator) enqueue(ctx context.Context, params []river.InsertManyParams) ([]int64, error) {
	tx, err := c.cfg.DB.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("sliceriver: enqueue: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	res, err := c.cfg.Client.InsertManyTx(ctx, tx, params)
	if err != nil {
		return nil, fmt.Errorf("sliceriver: enqueue: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("sliceriver: enqueue: %w", err)
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.Job.ID
	}
	return ids, nil
}

// wait polls until every slice has its result, a slice's job failed
// for good, or ctx ends; done, when set, is told of each result as it
// arrives.
func (c *Coordinator) wait(ctx context.Context, writeID string, ids []int64, done func(index int, rows int64)) error {
	tick := time.NewTicker(c.cfg.Poll)
	defer tick.Stop()
	have := map[int]bool{}
	for {
		rows, err := c.cfg.DB.Query(ctx, `SELECT slice, row_count FROM `+c.results+`
			WHERE write_id = $1 AND slice >= 0 ORDER BY slice`, writeID)
		if err != nil {
			return fmt.Errorf("sliceriver: read results: %w", err)
		}
		type result struct {
			Slice int32
			Rows  int64
		}
		got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[result])
		if err != nil {
			return fmt.Errorf("sliceriver: read results: %w", err)
		}
		for _, r := range got {
			if !have[int(r.Slice)] {
				have[int(r.Slice)] = true
				if done != nil {
					done(int(r.Slice), r.Rows)
				}
			}
		}
		if len(have) == len(ids) {
			return nil
		}
		for i, id := range ids {
			if have[i] {
				continue
			}
			job, err := c.cfg.Client.JobGet(ctx, id)
			if err != nil {
				return fmt.Errorf("sliceriver: slice %d (job %d): %w", i, id, err)
			}
			if job.State == rivertype.JobStateDiscarded || job.State == rivertype.JobStateCancelled {
				return fmt.Errorf("%w: slice %d (job %d) %s after %d attempts: %s", ErrSliceFailed, i, id, job.State, job.Attempt, lastError(job))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sliceriver: waiting for %d of %d slices: %w", len(ids)-len(have), len(ids), context.Cause(ctx))
		case <-tick.C:
		}
	}
}

func lastError(job *rivertype.JobRow) string {
	if len(job.Errors) == 0 {
		return "no error recorded"
	}
	return job.Errors[len(job.Errors)-1].Error
}

// lockClass is the first key of the advisory locks on a write's results
// (the second is a hash of its id): the coordinator takes it exclusively
// to close the results, a worker shared to store one.
const lockClass = 0x736c6963

// close closes the write's results: in one transaction it marks the
// write closed (a row of slice -1: results stored afterwards are
// refused), reads the results stored so far, decoded for w, in slice
// order with the sum of their rounded values, and deletes their rows.
func (c *Coordinator) close(ctx context.Context, w *facade.SlicedWrite, writeID string) ([]facade.SliceFiles, int64, error) {
	tx, err := c.cfg.DB.Begin(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("sliceriver: close results: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	_, err = tx.Exec(ctx, `SELECT pg_catalog.pg_advisory_xact_lock($1, pg_catalog.hashtext($2))`, lockClass, writeID)
	if err != nil {
		return nil, 0, fmt.Errorf("sliceriver: close results: %w", err)
	}
	_, err = tx.Exec(ctx, `INSERT INTO `+c.results+` (write_id, slice, files, rounded) VALUES ($1, -1, 'null', 0)
		ON CONFLICT (write_id, slice) DO NOTHING`, writeID)
	if err != nil {
		return nil, 0, fmt.Errorf("sliceriver: close results: %w", err)
	}
	rows, err := tx.Query(ctx, `DELETE FROM `+c.results+` WHERE write_id = $1 AND slice >= 0 RETURNING slice, files::text, rounded`, writeID)
	if err != nil {
		return nil, 0, fmt.Errorf("sliceriver: read results: %w", err)
	}
	type result struct {
		Slice   int32
		Files   string
		Rounded int64
	}
	res, err := pgx.CollectRows(rows, pgx.RowToStructByPos[result])
	if err != nil {
		return nil, 0, fmt.Errorf("sliceriver: read results: %w", err)
	}
	slices.SortFunc(res, func(a, b result) int { return int(a.Slice - b.Slice) })
	var (
		parts   []facade.SliceFiles
		rounded int64
	)
	for _, r := range res {
		p, err := w.DecodeSlice([]byte(r.Files))
		if err != nil {
			w.Abort(parts...)
			return nil, 0, err
		}
		parts, rounded = append(parts, p), rounded+r.Rounded
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, 0, fmt.Errorf("sliceriver: close results: %w", err)
	}
	return parts, rounded, nil
}

// giveUp ends a failed write (best effort, on a context of its own): it
// cancels the jobs, closes the results and deletes the files of the
// slices written. A slice finishing later finds the results closed and
// deletes its own files.
func (c *Coordinator) giveUp(ctx context.Context, w *facade.SlicedWrite, writeID string, ids []int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, id := range ids {
		_, _ = c.cfg.Client.JobCancel(ctx, id)
	}
	if parts, _, err := c.close(ctx, w, writeID); err == nil {
		w.Abort(parts...)
	}
}

// Prune deletes the marks of the writes closed more than age ago, and
// the results of writes whose coordinator died (never closed) stored
// more than age ago: make age longer than the longest write.
func (c *Coordinator) Prune(ctx context.Context, age time.Duration) (int64, error) {
	tag, err := c.cfg.DB.Exec(ctx, `DELETE FROM `+c.results+` WHERE written_at < now() - $1::float8 * interval '1 second'`, age.Seconds())
	if err != nil {
		return 0, fmt.Errorf("sliceriver: prune results: %w", err)
	}
	return tag.RowsAffected(), nil
}
