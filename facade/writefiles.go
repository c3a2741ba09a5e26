package facade

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/lakewrite/lakewrite/facade/internal/identity"
	"github.com/lakewrite/lakewrite/internal/scanfiles"
)

// nextRowIndex is the __row_index an append to the current snapshot
// starts at: summaryNextRowIndex of the head snapshot (O(1)), or, for a
// head without it, max(__row_index)+1 from the live data files' upper
// bounds (falling back to the snapshot's total-records when a file has no
// bound).
func nextRowIndex(ctx context.Context, tbl *table.Table) (int64, error) {
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return 0, nil
	}
	if snap.Summary != nil {
		if v, ok := snap.Summary.Properties[summaryNextRowIndex]; ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
				return n, nil
			}
		}
	}
	fld, ok := tbl.Schema().FindFieldByName(ColRowIndex)
	if !ok {
		return 0, fmt.Errorf("facade: table has no %s column", ColRowIndex)
	}
	tasks, err := scanfiles.Plan(ctx, tbl.Scan(table.WithSnapshotID(snap.SnapshotID)))
	if err != nil {
		return 0, fmt.Errorf("facade: plan files: %w", err)
	}
	next := int64(0)
	for _, t := range tasks {
		if t.File.Count() == 0 {
			continue
		}
		b, ok := t.File.UpperBoundValues()[fld.ID]
		if !ok || len(b) != 8 {
			total, _ := strconv.ParseInt(snap.Summary.Properties["total-records"], 10, 64)
			return total, nil
		}
		v := int64(uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56)
		next = max(next, v+1)
	}
	return next, nil
}

// writeFiles stamps the rows and writes them as data files, encoded by up to
// WriteWorkers parallel writers that take the stamped batches in turns of
// RowGroupRows rows (the next writer starts only when the stream reaches
// it). Stamping runs on the caller's goroutine, in stream order, so row ids
// and the checksum do not depend on the number of writers.
//
// The streams handed to iceberg-go never carry an error and never see the
// caller's cancellation: on any failure they simply end, so every file the
// writers produced is returned (and deleted by the caller) instead of
// leaking as an orphan (iceberg-go can leave a complete data file behind
// when its input fails mid-stream).
func (f *Facade) writeFiles(ctx context.Context, tbl *table.Table, sc *arrow.Schema,
	rows iter.Seq2[arrow.RecordBatch, error], st *identity.Stamper, writeID uuid.UUID) ([]iceberg.DataFile, error) {
	wctx := compute.WithAllocator(context.WithoutCancel(ctx), f.s.Allocator)
	// A partitioned table is written by one clustered writer (partition.go).
	cc, err := newClusterCheck(datasetOf(tbl), tbl)
	if err != nil {
		return nil, err
	}
	nWorkers, layoutOpt := f.s.WriteWorkers, table.WithMaxWriteWorkers(1)
	if cc != nil {
		nWorkers, layoutOpt = 1, table.WithClusteredWrite()
	}
	failed := make(chan struct{})
	var failOnce sync.Once
	var workers []*fileWorker
	defer func() {
		// Every started worker ends before writeFiles returns: no goroutine
		// outlives the call.
		for _, w := range workers {
			w.finish()
		}
	}()
	native := cc == nil && nativeWritable(tbl, sc)
	start := func() error {
		id := writeID
		if len(workers) > 0 {
			// Distinct file names per writer: iceberg-go numbers files per call.
			id = uuid.NewSHA1(writeID, []byte{byte(len(workers))})
		}
		fail := func() { failOnce.Do(func() { close(failed) }) }
		if native {
			nf, err := newNativeFiles(wctx, tbl, sc, f.s.RowGroupRows, f.s.TargetFileSize, f.s.Allocator, id)
			if err != nil {
				return err
			}
			w := &fileWorker{in: make(chan arrow.RecordBatch, f.s.WriteQueue), done: make(chan struct{})}
			go w.runNative(nf, fail)
			workers = append(workers, w)
			return nil
		}
		w := &fileWorker{in: make(chan arrow.RecordBatch), done: make(chan struct{})}
		go w.run(wctx, tbl, sc, fail,
			table.WithWriteUUID(id),
			table.WithRecordBatchBufferSize(f.s.WriteQueue),
			table.WithTargetFileSize(f.s.TargetFileSize),
			table.WithParquetRowGroupLimit(f.s.RowGroupRows),
			layoutOpt,
		)
		workers = append(workers, w)
		return nil
	}

	srcErr := func() error {
		var (
			cur   int   // index of the worker taking batches
			taken int64 // rows it has taken in this turn
		)
		for rec, err := range rows {
			if err != nil {
				return err
			}
			if err := context.Cause(ctx); err != nil {
				return err
			}
			if rec.NumRows() == 0 {
				continue
			}
			out, err := st.Stamp(rec)
			if err != nil {
				return err
			}
			out = withValueBytes(out)
			if cc != nil {
				out = withOwnedValues(out, cc.names)
				if err := cc.check(out); err != nil {
					out.Release()
					return err
				}
			}
			if taken >= int64(f.s.RowGroupRows) {
				cur, taken = (cur+1)%nWorkers, 0
			}
			if cur == len(workers) {
				if err := start(); err != nil {
					out.Release()
					return err
				}
			}
			taken += out.NumRows()
			select {
			case workers[cur].in <- out:
			case <-failed:
				out.Release()
				return nil // the writer's error is reported below
			}
		}
		return context.Cause(ctx)
	}()

	var (
		files []iceberg.DataFile
		werr  error
	)
	for _, w := range workers {
		w.finish()
		files = append(files, w.files...)
		werr = errors.Join(werr, w.err)
	}
	if srcErr != nil {
		return files, srcErr
	}
	if werr != nil {
		return files, fmt.Errorf("facade: write data files: %w", werr)
	}
	return files, nil
}

// fileWorker runs one iceberg-go writer over the batches sent on in.
type fileWorker struct {
	in     chan arrow.RecordBatch
	done   chan struct{}
	closed bool
	files  []iceberg.DataFile
	err    error
}

func (w *fileWorker) run(ctx context.Context, tbl *table.Table, sc *arrow.Schema, fail func(), opts ...table.WriteRecordOption) {
	defer close(w.done)
	feed := func(yield func(arrow.RecordBatch, error) bool) {
		for rec := range w.in {
			if !yield(rec, nil) { // WriteRecords releases rec
				return
			}
		}
	}
	for df, err := range table.WriteRecords(ctx, tbl, sc, feed, opts...) {
		if err != nil {
			w.err = errors.Join(w.err, err)
			continue
		}
		w.files = append(w.files, df)
	}
	if w.err != nil {
		fail()
	}
	// The producer may still be sending until it sees the failure.
	for rec := range w.in {
		rec.Release()
	}
}

// finish ends the worker's input and waits for it; it is idempotent and
// called from the producer's goroutine only.
func (w *fileWorker) finish() {
	if !w.closed {
		w.closed = true
		close(w.in)
	}
	<-w.done
}

func (f *Facade) deleteFiles(tbl *table.Table, files []iceberg.DataFile) {
	if len(files) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fs, err := tbl.FS(ctx)
	if err != nil {
		f.s.Logger.Warn("facade: cannot delete staged files", "err", err, "files", len(files))
		return
	}
	seen := map[string]bool{} // the deletion vectors of a merge share one file
	for _, df := range files {
		if seen[df.FilePath()] {
			continue
		}
		seen[df.FilePath()] = true
		if err := fs.Remove(df.FilePath()); err != nil {
			f.s.Logger.Warn("facade: cannot delete staged file", "path", df.FilePath(), "err", err)
		}
	}
}
