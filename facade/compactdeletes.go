package facade

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// compactDeletedShare is the share of a data file's rows removed by
// position deletes from which compaction rewrites the file whatever its
// size, applying the deletes: reads then stop paying for the deleted rows
// and their delete files.
const compactDeletedShare = 0.2

// onlyPositionDeletes reports whether t's delete files are all Parquet
// position deletes scoped to its data file (as merges write them), so the
// rows a rewrite keeps are known from the files' counts (liveRows).
func onlyPositionDeletes(t table.FileScanTask) bool {
	return len(fileScopedDeletes(t)) == len(t.DeleteFiles)+len(t.DeletionVectorFiles)
}

// liveRows is the rows of t's data file that its deletes leave. A
// deletion vector holds every deleted position of its file (also those of
// older position delete files, which readers then ignore).
func liveRows(t table.FileScanTask) int64 {
	n := t.File.Count()
	if len(t.DeletionVectorFiles) > 0 {
		for _, d := range t.DeletionVectorFiles {
			n -= d.Count()
		}
		return n
	}
	for _, d := range t.DeleteFiles {
		n -= d.Count()
	}
	return n
}

// fileScopedDeletes are t's position delete files that apply to its data
// file alone, and its deletion vector: a rewrite of the file applies them,
// so they go with it.
func fileScopedDeletes(t table.FileScanTask) []iceberg.DataFile {
	out := slices.Clone(t.DeletionVectorFiles)
	for _, d := range t.DeleteFiles {
		if referencedPath(d) == t.File.FilePath() &&
			d.ContentType() == iceberg.EntryContentPosDeletes && d.FileFormat() == iceberg.ParquetFile {
			out = append(out, d)
		}
	}
	return out
}

// deleteHeavy reports whether the deletes of t (file-scoped, see
// onlyPositionDeletes) remove compactDeletedShare or more of its rows.
func deleteHeavy(t table.FileScanTask) bool {
	dead := t.File.Count() - liveRows(t)
	return t.File.Count() > 0 && float64(dead) >= compactDeletedShare*float64(t.File.Count())
}

func hasDeletes(cf compactFile) bool {
	return len(cf.task.DeleteFiles) > 0 || len(cf.task.DeletionVectorFiles) > 0
}

// deleteHeavyTable reports, from a snapshot summary, whether position
// deletes remove compactDeletedShare or more of the table's stored rows:
// maintenance is then due, and its compaction rewrites the delete-heavy
// files.
func deleteHeavyTable(summary iceberg.Properties) bool {
	rows, err1 := strconv.ParseInt(summary["total-records"], 10, 64)
	dels, err2 := strconv.ParseInt(summary["total-position-deletes"], 10, 64)
	return err1 == nil && err2 == nil && rows > 0 && float64(dels) >= compactDeletedShare*float64(rows)
}

// posDeletePathID is the field id of a position delete file's file_path.
const posDeletePathID = 2147483546

// referencedPath is the one data file a position delete file applies to:
// its referenced_data_file, else its file_path bounds when they are equal;
// "" for a delete file of several data files.
func referencedPath(d iceberg.DataFile) string {
	if ref := d.ReferencedDataFile(); ref != nil && *ref != "" {
		return *ref
	}
	lo, hi := d.LowerBoundValues()[posDeletePathID], d.UpperBoundValues()[posDeletePathID]
	if len(lo) > 0 && string(lo) == string(hi) {
		return string(lo)
	}
	return ""
}

// shadowedDeletes are the file-scoped Parquet position delete files of the
// data files being rewritten that scan planning leaves out because a
// deletion vector covers the file (a v3 merge on a table upgraded from
// v2): the rewrite applies them too, so they go with the file.
func shadowedDeletes(ctx context.Context, tbl *table.Table, snap *table.Snapshot, files []compactFile) ([]iceberg.DataFile, error) {
	covered := map[string]bool{}
	for _, cf := range files {
		if len(cf.task.DeletionVectorFiles) > 0 {
			covered[cf.task.File.FilePath()] = true
		}
	}
	if len(covered) == 0 {
		return nil, nil
	}
	all, err := liveDeletes(ctx, tbl, snap)
	var out []iceberg.DataFile
	for _, d := range all {
		if !isDV(d) && covered[referencedPath(d)] {
			out = append(out, d)
		}
	}
	return out, err
}

// liveDeletes are the delete files and deletion vectors live in snap.
func liveDeletes(ctx context.Context, tbl *table.Table, snap *table.Snapshot) ([]iceberg.DataFile, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	mfs, err := snap.Manifests(fs)
	if err != nil {
		return nil, fmt.Errorf("read manifest list: %w", err)
	}
	var out []iceberg.DataFile
	for _, m := range mfs {
		if m.ManifestContent() != iceberg.ManifestContentDeletes {
			continue
		}
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				return nil, fmt.Errorf("read manifest %s: %w", m.FilePath(), err)
			}
			out = append(out, e.DataFile())
		}
	}
	return out, nil
}
