package facade

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Callers branch on them with errors.Is.
var (
	// ErrInvalidDatasetID: the dataset id is empty, too long, or holds
	// characters the naming cannot map to a safe table identifier.
	ErrInvalidDatasetID = errors.New("facade: invalid dataset id")
	// ErrInvalidRequest: the write request itself is malformed (no schema,
	// no rows, unknown mode, reserved column names).
	ErrInvalidRequest = errors.New("facade: invalid write request")
	// ErrDatasetNotFound: the dataset has no table (yet).
	ErrDatasetNotFound = errors.New("facade: dataset not found")
	// ErrSnapshotNotFound: a scan or checksum named a snapshot the table
	// does not have.
	ErrSnapshotNotFound = errors.New("facade: snapshot not found")
	// ErrCommitConflict: the catalog rejected the commit because the table
	// moved underneath it, and the retry budget is spent (or a retry would
	// be unsound, e.g. an append whose row indices no longer continue the
	// table). Nothing was committed; the staged files were deleted. Safe to
	// retry the whole write.
	ErrCommitConflict = errors.New("facade: commit conflict")
	// ErrCommitStateUnknown: the catalog failed in a way that does not say
	// whether the commit landed (network error, HTTP 5xx, database error
	// during the pointer swap). Never retry blindly: reconcile with FindTxn.
	// The staged files are kept, because the snapshot may reference them.
	ErrCommitStateUnknown = errors.New("facade: commit state unknown")
	// ErrAlreadyFinished: Commit or Abort called on a staged write that was
	// already committed or aborted.
	ErrAlreadyFinished = errors.New("facade: staged write already finished")
)

// SchemaMismatchError reports columns of an append whose names or types do
// not match the table. Columns lists the offending business columns.
type SchemaMismatchError struct {
	Dataset string
	Columns []string
	Detail  string
}

func (e *SchemaMismatchError) Error() string {
	return fmt.Sprintf("facade: schema of dataset %q does not match the write: columns %s: %s",
		e.Dataset, strings.Join(e.Columns, ", "), e.Detail)
}

// UnsupportedTypeError reports a column whose Arrow type has no Iceberg
// mapping.
type UnsupportedTypeError struct {
	Column string
	Type   string
}

func (e *UnsupportedTypeError) Error() string {
	return fmt.Sprintf("facade: column %q: type %s has no Iceberg mapping", e.Column, e.Type)
}

// NullInRequiredError reports a NULL value in a column the table declares
// required (iceberg-go v0.7.0 would silently store it as a zero value).
type NullInRequiredError struct {
	Column string
}

func (e *NullInRequiredError) Error() string {
	return fmt.Sprintf("facade: NULL in required column %q", e.Column)
}

// CommitError carries the dataset and the attempt count of a failed commit.
// It wraps ErrCommitConflict or ErrCommitStateUnknown and the catalog's
// own error, so both errors.Is checks work.
type CommitError struct {
	Dataset  string
	Attempts int
	Kind     error // ErrCommitConflict or ErrCommitStateUnknown
	Err      error
}

func (e *CommitError) Error() string {
	return fmt.Sprintf("%v: dataset %q after %d attempt(s): %v", e.Kind, e.Dataset, e.Attempts, e.Err)
}

// Unwrap returns the kind and the cause.
func (e *CommitError) Unwrap() []error { return []error{e.Kind, e.Err} }
