package facade

import (
	"context"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// defaultFormatVersion is the Iceberg format version of the tables the
// facade creates unless Config.FormatVersionFor says otherwise.
const defaultFormatVersion = 2

// formatVersion is the declared format version of a dataset's table, and
// whether one is declared (Config.FormatVersionFor). A declaration other
// than 2 or 3 is an ErrInvalidRequest.
func (f *Facade) formatVersion(datasetID string) (int, bool, error) {
	if f.s.FormatVersionFor == nil {
		return defaultFormatVersion, false, nil
	}
	v, ok := f.s.FormatVersionFor(datasetID)
	if !ok {
		return defaultFormatVersion, false, nil
	}
	if v != 2 && v != 3 {
		return 0, false, fmt.Errorf("%w: dataset %q: Config.FormatVersionFor returned format version %d (want 2 or 3)", ErrInvalidRequest, datasetID, v)
	}
	return v, true, nil
}

// createFormatProps sets the format version of a new table in props: the
// declared one, else Config.TableProperties' format-version if it sets
// one, else defaultFormatVersion.
func (f *Facade) createFormatProps(props iceberg.Properties, datasetID string) error {
	v, ok, err := f.formatVersion(datasetID)
	if err != nil {
		return err
	}
	if _, set := props[table.PropertyFormatVersion]; ok || !set {
		props[table.PropertyFormatVersion] = strconv.Itoa(v)
	}
	return nil
}

// upgradeFormat stages in txn the upgrade of the table to its declared
// format version when the table is older. A table is never downgraded: a
// declared version below the table's leaves it as it is.
func (f *Facade) upgradeFormat(txn *table.Transaction, datasetID string) error {
	v, ok, err := f.formatVersion(datasetID)
	if err != nil || !ok {
		return err
	}
	staged, err := txn.StagedTable()
	if err != nil {
		return fmt.Errorf("facade: stage format version: %w", err)
	}
	if staged.Metadata().Version() >= v {
		return nil
	}
	if err := txn.UpgradeFormatVersion(v); err != nil {
		return fmt.Errorf("facade: dataset %q: upgrade to format version %d: %w", datasetID, v, err)
	}
	return nil
}

// addV3 stages the snapshot of a write that is not a merge on a format v3
// table. Rows added by a write get their _row_id by inheritance, which
// iceberg-go's RowDelta leaves to the manifest list; a replace removes
// every data file, and iceberg-go's replace wants the new files'
// first_row_id set: they get the next row ids of the table being
// committed onto (build runs again on the refreshed table before each
// attempt, so the ids always start at its next-row-id). A replace
// removes every live file, so no other manifest of its snapshot claims
// row ids. The delete files of the removed files (oldDeletes) go with
// them.
func addV3(ctx context.Context, txn *table.Transaction, old, oldDeletes, files []iceberg.DataFile, summary iceberg.Properties) error {
	if len(old) == 0 {
		if len(files) == 0 {
			return emptySnapshot(ctx, txn, summary)
		}
		return txn.NewRowDelta(summary).AddRows(files...).Commit(ctx)
	}
	staged, err := txn.StagedTable()
	if err != nil {
		return err
	}
	meta := staged.Metadata()
	next := meta.NextRowID()
	withIDs := make([]iceberg.DataFile, len(files))
	for i, df := range files {
		spec := meta.PartitionSpecByID(int(df.SpecID()))
		if spec == nil {
			return fmt.Errorf("data file %s: unknown partition spec %d", df.FilePath(), df.SpecID())
		}
		if withIDs[i], err = withFirstRowID(df, *spec, next); err != nil {
			return err
		}
		next += df.Count()
	}
	if len(oldDeletes) > 0 {
		return txn.ReplaceFiles(ctx, old, withIDs, oldDeletes, summary)
	}
	return txn.ReplaceDataFilesWithDataFiles(ctx, old, withIDs, summary)
}

// withFirstRowID returns data file df with first_row_id id.
func withFirstRowID(df iceberg.DataFile, spec iceberg.PartitionSpec, id int64) (iceberg.DataFile, error) {
	b, err := iceberg.NewDataFileBuilder(spec, df.ContentType(), df.FilePath(), df.FileFormat(), df.Partition(),
		nil, nil, df.Count(), df.FileSizeBytes())
	if err != nil {
		return nil, fmt.Errorf("data file %s: %w", df.FilePath(), err)
	}
	b.ColumnSizes(df.ColumnSizes()).ValueCounts(df.ValueCounts()).NullValueCounts(df.NullValueCounts()).
		NaNValueCounts(df.NaNValueCounts()).LowerBoundValues(df.LowerBoundValues()).UpperBoundValues(df.UpperBoundValues()).
		SplitOffsets(df.SplitOffsets()).KeyMetadata(df.KeyMetadata()).FirstRowID(id)
	if so := df.SortOrderID(); so != nil {
		b.SortOrderID(*so)
	}
	return b.Build(), nil
}

// stagedVersion is the format version of the table txn builds.
func stagedVersion(txn *table.Transaction) int {
	staged, err := txn.StagedTable()
	if err != nil {
		return 0
	}
	return staged.Metadata().Version()
}

// Row lineage (format v3). The rows a write adds get their _row_id and
// _last_updated_sequence_number by inheritance (from their data file's
// first_row_id and sequence number). A merge leaves unchanged rows in
// their files, so they keep both; a changed row is a delete and a new row
// (a new _row_id; lakewrite's own identity columns follow the rules of
// merges). Compaction moves rows to new files and writes both columns
// into them, as the spec requires of a rewrite that does not modify rows.

// lineageSchema is the schema with the row lineage columns that a rewrite
// of files writes on a format v3 table, or nil when the rows have no
// lineage to keep (v2, or a file written before the table's upgrade that
// no v3 snapshot has given row ids yet).
func lineageSchema(tbl *table.Table, files []compactFile) (*iceberg.Schema, error) {
	if tbl.Metadata().Version() < 3 || len(files) == 0 {
		return nil, nil
	}
	for _, cf := range files {
		if cf.task.FirstRowID == nil {
			return nil, nil
		}
	}
	return iceberg.SchemaWithRowLineage(tbl.Schema()), nil
}

// lineageArrowSchema is the Arrow schema of sc with field ids, which the
// writer needs to place the row lineage columns (their reserved ids are in
// no name mapping).
func lineageArrowSchema(tbl *table.Table, sc *iceberg.Schema) (*arrow.Schema, error) {
	out, err := table.SchemaToArrowSchemaWithOptions(sc, table.ArrowSchemaOptions{
		IncludeFieldIDs: true, TableProperties: tbl.Metadata().Properties(),
	})
	if err != nil {
		return nil, fmt.Errorf("row lineage schema: %w", err)
	}
	return out, nil
}
