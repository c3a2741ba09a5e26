package sliceriver

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/writestrategy/sliced"
)

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	// Lake writes the slices: a Facade configured as the coordinator's
	// (same catalog, warehouse, naming and layout).
	Lake *facade.Facade
	// DB opens each slice's reading transaction and stores its result.
	DB *pgxpool.Pool
	// Schema holds the results table (Migrate); empty: DefaultSchema.
	Schema string
	// Cursor configures each slice's stream; nil: defaults.
	Cursor *cursor.Options
	// Wrap, when set, wraps each slice's batches (progress reporting).
	Wrap func(index int, rows iter.Seq2[arrow.RecordBatch, error]) iter.Seq2[arrow.RecordBatch, error]
	// Timeout is River's timeout of a slice's job: an attempt running
	// longer is cancelled (and retried). River's rescuer retries the
	// slice of a killed worker only once it has run both this long and
	// the client's RescueStuckJobsAfter, so make it longer than a slice
	// takes, and short enough. Zero: the client's JobTimeout (River's
	// default, one minute); negative: none, and River then never rescues
	// the slice of a killed worker (the write waits for its deadline).
	// An attempt also ends at its write's deadline (SliceArgs.Deadline).
	Timeout time.Duration
}

// Worker is the River worker of slice jobs (SliceArgs): register it with
// river.AddWorker on the clients of the processes that write slices.
type Worker struct {
	river.WorkerDefaults[SliceArgs]
	cfg     WorkerConfig
	results string
}

// NewWorker returns the worker of slice jobs.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	if cfg.Lake == nil || cfg.DB == nil {
		return nil, fmt.Errorf("%w: a worker needs Lake and DB", ErrConfig)
	}
	return &Worker{cfg: cfg, results: resultsTable(cfg.Schema)}, nil
}

// Timeout is WorkerConfig.Timeout (River asks it to bound an attempt and
// to decide whether a running job is stuck).
func (w *Worker) Timeout(*river.Job[SliceArgs]) time.Duration { return w.cfg.Timeout }

// Work writes the job's slice and stores its files in the results table,
// in the transaction that completes the job: a slice has a result if and
// only if its job completed. A slice whose result is already stored (an
// earlier attempt completed it) is not written again. A slice that can
// never succeed (the snapshot is gone because the coordinator's
// transaction ended, the output is not row-wise, the write's deadline
// passed, the plan is malformed) cancels its job rather than retrying;
// other errors are retried by River up to the job's MaxAttempts. On any
// error the slice's files are deleted; a process killed mid-slice leaves
// its files to the lifecycle's orphan pass.
func (w *Worker) Work(ctx context.Context, job *river.Job[SliceArgs]) error {
	a := job.Args
	if !a.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, a.Deadline)
		defer cancel()
	}
	var done, closed bool
	err := w.cfg.DB.QueryRow(ctx, `SELECT coalesce(bool_or(slice = $2), false), coalesce(bool_or(slice = -1), false)
		FROM `+w.results+` WHERE write_id = $1 AND slice IN ($2, -1)`, a.Write.WriteID, a.Index).Scan(&done, &closed)
	if err != nil {
		return w.fail(ctx, fmt.Errorf("sliceriver: slice %d: read results: %w", a.Index, err))
	}
	switch {
	case closed:
		return river.JobCancel(fmt.Errorf("%w: slice %d", ErrWriteClosed, a.Index))
	case done:
		return nil
	}
	s, err := a.Slice()
	if err != nil {
		return river.JobCancel(err)
	}
	sw, err := w.cfg.Lake.ResumeSliced(ctx, a.Write)
	if err != nil {
		return w.fail(ctx, fmt.Errorf("sliceriver: slice %d: %w", a.Index, err))
	}
	cfg := &sliced.Config{DB: w.cfg.DB, Cursor: w.cfg.Cursor, Wrap: w.cfg.Wrap}
	written, err := sliced.WriteSlice(ctx, cfg, sw, a.Snapshot, s)
	if err != nil {
		return w.fail(ctx, err)
	}
	enc, err := sw.EncodeSlice(written.Files)
	if err != nil {
		sw.Abort(written.Files)
		return river.JobCancel(err)
	}
	stored, err := w.store(ctx, job, enc, written.Files.Rows, written.Rounded)
	if !stored {
		// The files are referenced by no result: delete them. (When the
		// commit's outcome is unknown they are left to the orphan pass.)
		sw.Abort(written.Files)
	}
	return err
}

// store inserts the slice's result and completes the job in one
// transaction; stored is false when the result is certainly not stored.
func (w *Worker) store(ctx context.Context, job *river.Job[SliceArgs], enc []byte, rows, rounded int64) (stored bool, err error) {
	a := job.Args
	tx, err := w.cfg.DB.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("sliceriver: slice %d: %w", a.Index, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// Shared with the other slices, exclusive with the coordinator closing
	// the results: a result is stored before the close (and read by it)
	// or refused after it.
	_, err = tx.Exec(ctx, `SELECT pg_catalog.pg_advisory_xact_lock_shared($1, pg_catalog.hashtext($2))`, lockClass, a.Write.WriteID)
	if err != nil {
		return false, fmt.Errorf("sliceriver: slice %d: store the result: %w", a.Index, err)
	}
	tag, err := tx.Exec(ctx, `INSERT INTO `+w.results+` (write_id, slice, files, rounded, row_count)
		SELECT $1, $2, $3, $4, $5 WHERE NOT EXISTS (SELECT 1 FROM `+w.results+` WHERE write_id = $1 AND slice = -1)
		ON CONFLICT (write_id, slice) DO NOTHING`, a.Write.WriteID, a.Index, string(enc), rounded, rows)
	if err != nil {
		return false, fmt.Errorf("sliceriver: slice %d: store the result: %w", a.Index, err)
	}
	// Nothing stored: the results are closed (the write ended without
	// this slice), or a second attempt ran while the first stored its
	// result (River rescued a job that was slow, not dead) and the first
	// result stands.
	mine := tag.RowsAffected() == 1
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
		return false, fmt.Errorf("sliceriver: slice %d: complete the job: %w", a.Index, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return mine, fmt.Errorf("sliceriver: slice %d: commit the result: %w", a.Index, err)
	}
	return mine, nil
}

// fail is err for River: cancelled (not retried) when no attempt can
// succeed.
func (w *Worker) fail(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, sliced.ErrSnapshot), errors.Is(err, sliced.ErrNotRowWise),
		errors.Is(err, facade.ErrInvalidRequest), errors.Is(err, facade.ErrSlicedWriteMoved),
		errors.Is(ctx.Err(), context.DeadlineExceeded):
		return river.JobCancel(err)
	}
	return err
}

var _ river.Worker[SliceArgs] = (*Worker)(nil)
