package facade

import (
	"errors"
	"fmt"

	"github.com/apache/iceberg-go"
)

// RowIDVersion is the version of the row hash behind __row_id (and
// Checksum) that this library computes. Every table the facade writes
// records it as the table property PropertyRowIDVersion, and every
// snapshot under SummaryRowIDVersion. A change to how __row_id is computed
// must bump it: the tables written with another version are then refused
// (*RowIDVersionError) instead of silently mixing row ids of two functions,
// and moving a table to the new version is a deliberate migration.
const RowIDVersion = "1"

// PropertyRowIDVersion is the table property recording the RowIDVersion a
// table's __row_id values were computed with. A table without it was
// written before it was recorded, by version 1.
const PropertyRowIDVersion = "lakewrite.row-id-version"

// SummaryRowIDVersion is the snapshot summary key recording the
// RowIDVersion of the write.
const SummaryRowIDVersion = "lakewrite.row-id-version"

// ErrRowIDVersion: the table records a row id version this library does not
// compute (a newer library wrote it). Nothing was written.
var ErrRowIDVersion = errors.New("facade: unknown row id version")

// RowIDVersionError names the dataset and the version its table records.
// It matches ErrRowIDVersion.
type RowIDVersionError struct {
	Dataset string
	Version string // the table's PropertyRowIDVersion
}

func (e *RowIDVersionError) Error() string {
	return fmt.Sprintf("%v: dataset %q records %s=%q, this library computes version %s: "+
		"writing would mix two row id functions (upgrade the library or migrate the table)",
		ErrRowIDVersion, e.Dataset, PropertyRowIDVersion, e.Version, RowIDVersion)
}

// Is reports whether target is ErrRowIDVersion.
func (e *RowIDVersionError) Is(target error) bool { return target == ErrRowIDVersion }

// checkRowIDVersion refuses a table whose recorded version is not ours.
func checkRowIDVersion(dataset string, props iceberg.Properties) error {
	if v, ok := props[PropertyRowIDVersion]; ok && v != RowIDVersion {
		return &RowIDVersionError{Dataset: dataset, Version: v}
	}
	return nil
}
