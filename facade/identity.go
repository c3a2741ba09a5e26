package facade

import (
	"errors"
	"fmt"

	"github.com/apache/iceberg-go"
)

// RowIDVersion is the version of the row hash behind __row_id that this
// library computes (Checksum uses it too, telling a float -0 from +0 where
// __row_id does not: see "Identity" in the package documentation). Every
// table the facade writes records it as the table property
// "lakewrite.row-id-version", and every snapshot under the summary key
// "lakewrite.row-id-version". A change to how __row_id is computed must
// bump it: the tables written with another version are then refused
// (ErrRowIDVersion) instead of silently mixing row ids of two functions,
// and moving a table to the new version is a deliberate migration.
const RowIDVersion = "1"

// propertyRowIDVersion is the table property recording the RowIDVersion a
// table's __row_id values were computed with. A table without it was
// written before it was recorded, by version 1.
const propertyRowIDVersion = "lakewrite.row-id-version"

// ErrRowIDVersion: the table records a row id version this library does not
// compute (a newer library wrote it). Nothing was written.
var ErrRowIDVersion = errors.New("facade: unknown row id version")

// checkRowIDVersion refuses a table whose recorded version is not ours.
func checkRowIDVersion(dataset string, props iceberg.Properties) error {
	if v, ok := props[propertyRowIDVersion]; ok && v != RowIDVersion {
		return fmt.Errorf("%w: dataset %q records %s=%q, this library computes version %s: "+
			"writing would mix two row id functions (upgrade the library or migrate the table)",
			ErrRowIDVersion, dataset, propertyRowIDVersion, v, RowIDVersion)
	}
	return nil
}
