package facadetest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/internal/identity"
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

// Hits returns how many times a fault of the wrapper lh (from Wrap) fired
// at p so far.
func Hits(lh facade.Lakehouse, p Point) int { return lh.(*faulty).hitsAt(p) }

// FailingCommits returns a BeforeCommit fault and the contract suite's
// FailCommits for it: fail(id, kind, n) makes the next n commits fail with
// kind, without committing (the suite writes one dataset, so id is not
// checked).
func FailingCommits() (Fault, func(id string, kind error, n int)) {
	var (
		mu   sync.Mutex
		err  error
		left int
	)
	f := Fault{Point: BeforeCommit, Do: func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if left == 0 {
			return nil
		}
		left--
		return err
	}}
	return f, func(id string, kind error, n int) {
		mu.Lock()
		defer mu.Unlock()
		err, left = identity.CommitError(kind, id, 1, errors.New("injected by the test")), n
	}
}
