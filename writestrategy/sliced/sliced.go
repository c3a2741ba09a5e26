package sliced

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"regexp"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
)

// Errors of a sliced write; match them with errors.Is.
var (
	// ErrNotRowWise: a slice wrote more rows than its range of the
	// driving source holds, so the output is not row-wise over the source
	// as declared (a step multiplies rows); or a key bucket wrote more rows
	// than the whole source has. Nothing was committed.
	ErrNotRowWise = errors.New("sliced: a slice wrote more rows than its source range holds: the output is not row-wise")
	// ErrSnapshot: the exported snapshot could not be imported (the
	// coordinator's transaction ended, or the id is malformed).
	ErrSnapshot = errors.New("sliced: cannot import the write's snapshot")
)

// DefaultDeadline bounds a sliced write when Config.Deadline is zero.
const DefaultDeadline = time.Hour

// Beginner opens the readers' transactions: each call must return a
// transaction on a connection of its own (a *pgxpool.Pool does).
type Beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Config configures the readers of a sliced write.
type Config struct {
	// DB opens one connection per slice (a pool sized for them).
	DB Beginner
	// Cursor configures each slice's stream (Mode Direct: each slice runs
	// in the transaction that imported the snapshot). Nil: defaults.
	Cursor *cursor.Options
	// Deadline bounds the whole write from the export of the snapshot to
	// the last slice: the coordinator's transaction then ends (on the
	// server too: its idle_in_transaction_session_timeout is set to it),
	// and so do the slices. Zero: DefaultDeadline.
	Deadline time.Duration
	// Wrap, when set, wraps each slice's batches (progress reporting). It
	// is called from the slice's goroutine.
	Wrap func(index int, rows iter.Seq2[arrow.RecordBatch, error]) iter.Seq2[arrow.RecordBatch, error]
	// SliceDone, when set, is told of each slice whose files are written,
	// with its index and rows, by a StageFunc whose slices' batches do not
	// pass through this process (Wrap cannot see them): package
	// sliceriver calls it as each slice's result reaches the coordinator,
	// from the goroutine that called its Stage. Stage does not call it:
	// Wrap sees every batch.
	SliceDone func(index int, rows int64)
}

func (c *Config) deadline() time.Duration {
	if c == nil || c.Deadline <= 0 {
		return DefaultDeadline
	}
	return c.Deadline
}

// Slice is one slice of a plan: its range of the driving source and the
// output's SELECT restricted to it.
type Slice struct {
	Range
	SQL  string
	Args []any
}

// Plan is what the coordinator planned: the exported snapshot every slice
// reads and the slices, in source order.
type Plan struct {
	Snapshot string
	Slices   []Slice
}

var snapshotID = regexp.MustCompile(`^[0-9A-Fa-f]+-[0-9A-Fa-f]+(-[0-9]+)?$`)

// Export exports the snapshot of coord, the coordinator's transaction, which
// must stay open until every slice has begun (it holds the snapshot), and
// bounds its idle time on the server by deadline.
func Export(ctx context.Context, coord pgx.Tx, deadline time.Duration) (string, error) {
	var id string
	ms := max(deadline.Milliseconds(), 1)
	err := coord.QueryRow(ctx, `SELECT pg_catalog.pg_export_snapshot(),
		pg_catalog.set_config('idle_in_transaction_session_timeout', $1, true)`, fmt.Sprint(ms)).Scan(&id, new(string))
	if err != nil {
		return "", fmt.Errorf("sliced: export snapshot: %w", err)
	}
	return id, nil
}

// Import begins a read-only REPEATABLE READ transaction on db that reads
// as of the exported snapshot.
func Import(ctx context.Context, db Beginner, snapshot string) (pgx.Tx, error) {
	if !snapshotID.MatchString(snapshot) {
		return nil, fmt.Errorf("%w: malformed snapshot id %q", ErrSnapshot, snapshot)
	}
	tx, err := db.BeginTx(ctx, pgx.TxOptions{BeginQuery: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT '" +
		snapshot + "'; SELECT pg_catalog.set_config('jit', 'off', true)"})
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrSnapshot, snapshot, err)
	}
	return tx, nil
}

// PlanSlices is step one: it exports coord's snapshot, reads the driving
// source's bounds as of it, cuts them into n ranges and asks sqlFor for
// each range's SELECT.
func PlanSlices(ctx context.Context, cfg *Config, coord pgx.Tx, src Source, n int,
	sqlFor func(Range) (string, []any, error)) (Plan, error) {
	snap, err := Export(ctx, coord, cfg.deadline())
	if err != nil {
		return Plan{}, err
	}
	tx, err := Import(ctx, cfg.DB, snap)
	if err != nil {
		return Plan{}, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rs, err := Ranges(ctx, tx, src, n)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{Snapshot: snap}
	for _, r := range rs {
		sql, args, err := sqlFor(r)
		if err != nil {
			return Plan{}, err
		}
		p.Slices = append(p.Slices, Slice{Range: r, SQL: sql, Args: args})
	}
	return p, nil
}

// Written is what WriteSlice returns: the slice's files, and the numeric
// values its stream rounded.
type Written struct {
	Files   facade.SliceFiles
	Rounded int64
}

// WriteSlice is step two: it reads slice s as of the plan's snapshot in a
// transaction of its own and writes its rows through w. A slice that
// writes more rows than its range can hold fails with ErrNotRowWise; on
// any error its files are deleted.
func WriteSlice(ctx context.Context, cfg *Config, w *facade.SlicedWrite, snapshot string, s Slice) (Written, error) {
	tx, err := Import(ctx, cfg.DB, snapshot)
	if err != nil {
		return Written{}, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var opts cursor.Options
	if cfg.Cursor != nil {
		opts = *cfg.Cursor
	}
	opts.Mode = cursor.Direct
	stream, err := cursor.Batches(ctx, tx, s.SQL, s.Args, &opts)
	if err != nil {
		return Written{}, fmt.Errorf("sliced: slice %d: %w", s.Index, err)
	}
	rows := borrowed(stream.All())
	if cfg.Wrap != nil {
		rows = cfg.Wrap(s.Index, rows)
	}
	files, err := w.WriteSlice(ctx, s.Index, s.First, rows)
	if err != nil {
		return Written{}, fmt.Errorf("sliced: slice %d: %w", s.Index, err)
	}
	if s.Capacity >= 0 && files.Rows > s.Capacity {
		w.Abort(files)
		if s.Buckets > 0 {
			return Written{}, fmt.Errorf("%w: key bucket %d wrote %d rows, more than the %d rows of the source", ErrNotRowWise, s.Index, files.Rows, s.Capacity)
		}
		return Written{}, fmt.Errorf("%w: slice %d wrote %d rows, its range holds at most %d", ErrNotRowWise, s.Index, files.Rows, s.Capacity)
	}
	return Written{Files: files, Rounded: stream.Rounded()}, nil
}

// borrowed turns the stream's owned batches into the borrowed sequence a
// facade write takes.
func borrowed(rows iter.Seq2[arrow.RecordBatch, error]) iter.Seq2[arrow.RecordBatch, error] {
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

// Run writes every slice of p concurrently, one goroutine and one
// connection per slice, and returns their files in slice order with the
// values rounded. The first failure cancels the other slices; every file
// written is then deleted and the error returned. Every goroutine has
// ended when Run returns.
func Run(ctx context.Context, cfg *Config, w *facade.SlicedWrite, p Plan) ([]facade.SliceFiles, int64, error) {
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	out := make([]Written, len(p.Slices))
	errs := make([]error, len(p.Slices))
	var wg sync.WaitGroup
	for i, s := range p.Slices {
		wg.Go(func() {
			out[i], errs[i] = WriteSlice(rctx, cfg, w, p.Snapshot, s)
			if errs[i] != nil {
				cancel(errs[i])
			}
		})
	}
	wg.Wait()
	var (
		files   []facade.SliceFiles
		rounded int64
	)
	for i := range out {
		if errs[i] == nil {
			files = append(files, out[i].Files)
			rounded += out[i].Rounded
		}
	}
	if err := firstError(errs, context.Cause(rctx)); err != nil {
		w.Abort(files...)
		return nil, 0, err
	}
	return files, rounded, nil
}

// firstError is the error that failed the run: the first slice's own
// (not a cancellation it caused in the others), else cause.
func firstError(errs []error, cause error) error {
	if cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return cause
}

// StageFunc is the signature of Stage: a function that stages a sliced
// write from plan to staged snapshot, wherever its slices are written.
// It reports progress through cfg.Wrap where the slices' batches pass
// through this process, else through cfg.SliceDone, once per slice.
type StageFunc func(ctx context.Context, cfg *Config, lake *facade.Facade, coord pgx.Tx, target facade.Target, req facade.WriteRequest,
	src Source, n int, sqlFor func(Range) (string, []any, error)) (st facade.Staged, slices int, rounded int64, err error)

var _ StageFunc = Stage

// Stage runs a sliced write in this process from plan to staged snapshot:
// BeginSliced on lake, PlanSlices on coord, Run, then SlicedWrite.Stage.
// The returned Staged commits like a single stream's (with the ledger, in
// coord on the catalog of facade.NewPostgresCatalog). Rounded is the sum
// of the slices' rounded values.
func Stage(ctx context.Context, cfg *Config, lake *facade.Facade, coord pgx.Tx, target facade.Target, req facade.WriteRequest,
	src Source, n int, sqlFor func(Range) (string, []any, error)) (st facade.Staged, slices int, rounded int64, err error) {
	dctx, cancel := context.WithTimeout(ctx, cfg.deadline())
	defer cancel()
	w, err := lake.BeginSliced(dctx, target, req)
	if err != nil {
		return nil, 0, 0, err
	}
	if w.Replay() != nil {
		st, err := w.Stage(ctx, nil)
		return st, 0, 0, err
	}
	p, err := PlanSlices(dctx, cfg, coord, src, n, sqlFor)
	if err != nil {
		return nil, 0, 0, err
	}
	files, rounded, err := Run(dctx, cfg, w, p)
	if err != nil {
		return nil, 0, 0, err
	}
	st, err = w.Stage(ctx, files)
	return st, len(p.Slices), rounded, err
}
