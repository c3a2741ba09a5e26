package main

import (
	"context"
	"fmt"
	"io"

	"github.com/lakewrite/lakewrite/internal/scanfiles"
)

// replaceResult is what the -replaces run found in the output table after
// its last replace.
type replaceResult struct {
	Replaces int `json:"replaces"`
	// DataFiles and ScanTasks of the current snapshot: more tasks than
	// files means iceberg-go splits the table's files (those over
	// read.split.target-size, 128 MiB by default), the case that once made
	// every replace after the first fail.
	DataFiles        int   `json:"data_files"`
	ScanTasks        int   `json:"scan_tasks"`
	LargestFileBytes int64 `json:"largest_file_bytes"`
}

// replaceAgain replaces the e2e phase's output n more times, each write
// measured as its own phase (replace-1 .. replace-n), and describes the
// table afterwards.
func (b *bench) replaceAgain(ctx context.Context, n int, rep *report) error {
	for i := range n {
		name := fmt.Sprintf("replace-%d", i+1)
		b.logf("phase %s", name)
		pr, err := b.measure(ctx, name, func(ctx context.Context) (int64, int64, error) {
			res, err := b.endToEnd(ctx)
			if err != nil {
				return 0, 0, err
			}
			return res.Rows, res.Bytes, nil
		})
		if err != nil {
			return fmt.Errorf("phase %s: %w", name, err)
		}
		if pr.Rows != b.cfg.Rows {
			return fmt.Errorf("phase %s: %d rows, want %d", name, pr.Rows, b.cfg.Rows)
		}
		rep.Phases = append(rep.Phases, pr)
		b.logf("phase %s: %.1fs", name, pr.Seconds)
	}
	tbl, err := b.env.Facade.LoadTable(ctx, datasetID)
	if err != nil {
		return err
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return err
	}
	r := &replaceResult{Replaces: n, ScanTasks: len(tasks)}
	var rows int64
	for _, t := range scanfiles.WholeFiles(tasks) {
		r.DataFiles++
		r.LargestFileBytes = max(r.LargestFileBytes, t.File.FileSizeBytes())
		rows += t.File.Count()
	}
	if rows != b.cfg.Rows {
		return fmt.Errorf("after %d replaces: the table holds %d rows, want %d", n, rows, b.cfg.Rows)
	}
	rep.Replaces = r
	return nil
}

func printReplaces(w io.Writer, r *replaceResult) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "replaced %d more times: %d data file(s) planned as %d scan task(s), largest %s\n",
		r.Replaces, r.DataFiles, r.ScanTasks, mib(r.LargestFileBytes))
}
