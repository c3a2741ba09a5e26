package identity

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidRequest: the write request itself is malformed (no schema, no
// rows, unknown mode, reserved column names). Re-exported by facade.
var ErrInvalidRequest = errors.New("facade: invalid write request")

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

// CommitError is a failed commit of dataset after attempts tries: kind
// (facade.ErrCommitConflict or facade.ErrCommitStateUnknown) with the
// dataset and the attempt count in the message, wrapping the catalog's own
// error cause too, so errors.Is matches both.
func CommitError(kind error, dataset string, attempts int, cause error) error {
	if cause == nil {
		return fmt.Errorf("%w: dataset %q after %d attempt(s)", kind, dataset, attempts)
	}
	return fmt.Errorf("%w: dataset %q after %d attempt(s): %w", kind, dataset, attempts, cause)
}
