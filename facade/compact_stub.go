package facade

import (
	"context"

	"github.com/apache/iceberg-go/table"
)

// compact is the compaction step of Maintain: it rewrites small data files
// of tbl under policy (CompactMinFiles, CompactTargetBytes) and returns the
// table to continue from (the one its commit returned, or tbl when nothing
// was committed). Maintain copies CompactedFiles, WrittenFiles,
// CompactedBytes and SnapshotID of the returned report. A snapshot it
// commits must carry SummaryNextRowIndex (the head's value: compaction
// moves no row) so writes and recovery stay independent of history.
//
// This stub compacts nothing; the compaction implementation replaces it.
func (f *Facade) compact(_ context.Context, tbl *table.Table, _ Lifecycle) (*table.Table, MaintenanceReport, error) {
	return tbl, MaintenanceReport{}, nil
}
