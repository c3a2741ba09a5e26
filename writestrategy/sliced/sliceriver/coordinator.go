package sliceriver

import (
	"context"
	"errors"
	"fmt"
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
// visible. cfg.Cursor and cfg.Wrap are the workers' (WorkerConfig).
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
	parts, rounded, err := c.wait(dctx, w, ref.WriteID, ids)
	if err != nil {
		c.giveUp(ctx, w, ref.WriteID, ids)
		return nil, 0, 0, err
	}
	// The results are in memory: the rows are no longer needed.
	if err := c.forget(dctx, ref.WriteID); err != nil {
		w.Abort(parts...)
		return nil, 0, 0, err
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

// wait polls until every slice has its result (decoded for w, in slice
// order, with the sum of their rounded values), a slice's job failed for
// good, or ctx ends.
func (c *Coordinator) wait(ctx context.Context, w *facade.SlicedWrite, writeID string, ids []int64) ([]facade.SliceFiles, int64, error) {
	tick := time.NewTicker(c.cfg.Poll)
	defer tick.Stop()
	for {
		parts, rounded, err := c.read(ctx, w, writeID)
		if err != nil {
			return nil, 0, err
		}
		if len(parts) == len(ids) {
			return parts, rounded, nil
		}
		have := map[int]bool{}
		for _, p := range parts {
			have[p.Index] = true
		}
		for i, id := range ids {
			if have[i] {
				continue
			}
			job, err := c.cfg.Client.JobGet(ctx, id)
			if err != nil {
				return nil, 0, fmt.Errorf("sliceriver: slice %d (job %d): %w", i, id, err)
			}
			if job.State == rivertype.JobStateDiscarded || job.State == rivertype.JobStateCancelled {
				return nil, 0, fmt.Errorf("%w: slice %d (job %d) %s after %d attempts: %s", ErrSliceFailed, i, id, job.State, job.Attempt, lastError(job))
			}
		}
		select {
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("sliceriver: waiting for %d of %d slices: %w", len(ids)-len(parts), len(ids), context.Cause(ctx))
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

// read decodes the results stored for the write.
func (c *Coordinator) read(ctx context.Context, w *facade.SlicedWrite, writeID string) ([]facade.SliceFiles, int64, error) {
	rows, err := c.cfg.DB.Query(ctx, `SELECT files::text, rounded FROM `+c.results+` WHERE write_id = $1 ORDER BY slice`, writeID)
	if err != nil {
		return nil, 0, fmt.Errorf("sliceriver: read results: %w", err)
	}
	defer rows.Close()
	var (
		parts   []facade.SliceFiles
		rounded int64
		enc     string
		r       int64
	)
	for rows.Next() {
		if err := rows.Scan(&enc, &r); err != nil {
			return nil, 0, fmt.Errorf("sliceriver: read results: %w", err)
		}
		p, err := w.DecodeSlice([]byte(enc))
		if err != nil {
			return nil, 0, err
		}
		parts, rounded = append(parts, p), rounded+r
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("sliceriver: read results: %w", err)
	}
	return parts, rounded, nil
}

// forget deletes the write's result rows.
func (c *Coordinator) forget(ctx context.Context, writeID string) error {
	if _, err := c.cfg.DB.Exec(ctx, `DELETE FROM `+c.results+` WHERE write_id = $1`, writeID); err != nil {
		return fmt.Errorf("sliceriver: delete results: %w", err)
	}
	return nil
}

// giveUp ends a failed write (best effort, on a context of its own):
// cancels the jobs not finished, deletes the files of the slices written
// and their rows. A slice that finishes after this stores a result no one
// reads; its files are then orphans of the table.
func (c *Coordinator) giveUp(ctx context.Context, w *facade.SlicedWrite, writeID string, ids []int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, id := range ids {
		_, _ = c.cfg.Client.JobCancel(ctx, id)
	}
	parts, _, err := c.read(ctx, w, writeID)
	if err == nil {
		w.Abort(parts...)
		_ = c.forget(ctx, writeID)
	}
}
