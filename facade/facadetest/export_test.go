package facadetest

import (
	"testing"

	"github.com/lakewrite/lakewrite/facade"
)

// NullValue is how a null renders in a Row.
const NullValue = nullValue

// Rows returns the business rows of the dataset's current snapshot, in table
// order. It fails the test when the dataset has no table or cannot be read.
func Rows(t testing.TB, lake facade.Lakehouse, datasetID string) []Row {
	t.Helper()
	rows, err := readRows(lake, datasetID)
	if err != nil {
		t.Fatalf("facadetest: read rows of %q: %v", datasetID, err)
		return nil
	}
	return rows
}

// RequireChecksumEqual checks that two checksums (row count and sums) are
// equal, e.g. the checksum of rows computed in Postgres
// (facade.ChecksumBatches) and that of a table (Lakehouse.Checksum).
func RequireChecksumEqual(t testing.TB, want, got facade.Checksum) {
	t.Helper()
	if want != got {
		t.Fatalf("facadetest: checksums differ: want %s (%d rows), got %s (%d rows)", want, want.Rows, got, got.Rows)
	}
}
