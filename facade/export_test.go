package facade

import "context"

// StripSummaryKey removes key from the snapshot summary a staged write
// will commit, to make a snapshot as written before key existed.
func StripSummaryKey(st Staged, key string) {
	delete(st.(*icebergStaged).props, key)
}

// PlannedFiles is the number and total size of the data files a Scan with
// opts reads (after partition and min/max pruning).
func PlannedFiles(ctx context.Context, f *Facade, datasetID string, opts ScanOptions) (files int, bytes int64, err error) {
	tbl, scan, isc, err := f.planTableScan(ctx, datasetID, opts)
	if err != nil || scan == nil {
		return 0, 0, err
	}
	tasks, err := f.planTasks(ctx, datasetID, tbl, scan, isc, opts)
	if err != nil {
		return 0, 0, err
	}
	for _, t := range tasks {
		bytes += t.File.FileSizeBytes()
	}
	return len(tasks), bytes, nil
}

// Lifecycle defaults the tests compare against.
const (
	DefaultKeepLast     = defaultKeepLast
	DefaultEveryCommits = defaultEveryCommits
)
