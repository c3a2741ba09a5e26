// Package scanfiles turns iceberg-go scan tasks into a list of data files.
//
// iceberg-go's planner splits a Parquet file larger than the table's
// read.split.target-size (128 MiB by default) into several FileScanTasks,
// one per range of row groups, all naming the same file. Code that needs
// the files of a snapshot (to replace or compact them, to count their rows,
// to read each one once) must key the tasks by path: a file listed twice is
// refused by ReplaceDataFilesWithDataFiles and counted twice by any sum.
package scanfiles

import (
	"context"
	"slices"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// Plan plans scan and returns one whole-file task per data file (see
// WholeFiles).
func Plan(ctx context.Context, scan *table.Scan) ([]table.FileScanTask, error) {
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return nil, err
	}
	return WholeFiles(tasks), nil
}

// WholeFiles merges the tasks that name the same data file into one task
// covering the whole file (Start 0, Length the file's size), with the union
// of their delete files. Files keep the order of their first task. A task
// list without splits comes back with the same tasks in the same order.
func WholeFiles(tasks []table.FileScanTask) []table.FileScanTask {
	out := make([]table.FileScanTask, 0, len(tasks))
	at := make(map[string]int, len(tasks))
	for _, t := range tasks {
		if t.File == nil {
			continue
		}
		p := t.File.FilePath()
		i, seen := at[p]
		if !seen {
			t.Start, t.Length = 0, t.File.FileSizeBytes()
			t.DeleteFiles = slices.Clone(t.DeleteFiles)
			t.EqualityDeleteFiles = slices.Clone(t.EqualityDeleteFiles)
			t.DeletionVectorFiles = slices.Clone(t.DeletionVectorFiles)
			at[p] = len(out)
			out = append(out, t)
			continue
		}
		m := &out[i]
		m.DeleteFiles = union(m.DeleteFiles, t.DeleteFiles)
		m.EqualityDeleteFiles = union(m.EqualityDeleteFiles, t.EqualityDeleteFiles)
		m.DeletionVectorFiles = union(m.DeletionVectorFiles, t.DeletionVectorFiles)
	}
	return out
}

// DataFiles returns the data files of tasks, each once (see WholeFiles).
func DataFiles(tasks []table.FileScanTask) []iceberg.DataFile {
	whole := WholeFiles(tasks)
	out := make([]iceberg.DataFile, len(whole))
	for i, t := range whole {
		out[i] = t.File
	}
	return out
}

// union appends to a the files of b whose paths a lacks.
func union(a, b []iceberg.DataFile) []iceberg.DataFile {
	for _, f := range b {
		dup := false
		for _, g := range a {
			if g.FilePath() == f.FilePath() {
				dup = true
				break
			}
		}
		if !dup {
			a = append(a, f)
		}
	}
	return a
}
