package cursor

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Test for them with errors.Is.
var (
	// ErrRunaway: the stream exceeded Options.MaxRows or
	// Options.MaxDuration; the message names the limit.
	ErrRunaway = errors.New("cursor: runaway stream")

	// ErrUnsupportedType: a result column's PostgreSQL type has no Arrow
	// mapping; the message names the column, its type and oid. Cast the
	// column in SQL or set Options.UnknownAsText.
	ErrUnsupportedType = errors.New("cursor: unsupported PostgreSQL type")

	// ErrOutOfRange matches every decode error caused by a value that has
	// no representation in the column's Arrow type (numeric overflow, with
	// NumericStrict a value that would need rounding, NaN, ±Infinity dates
	// or timestamps, multi-dimensional arrays).
	ErrOutOfRange = errors.New("cursor: value out of range for its Arrow type")
)

// errAlreadyConsumed is yielded when a single-use sequence (Rows, or a
// Stream's All or RecordReader) is ranged a second time.
var errAlreadyConsumed = errors.New("cursor: sequence already consumed (sequences are single-use)")

// errStagedNeedsSession is returned when Mode is Staged and the source is a
// transaction (or another Begin-er that is not a pool or connection): staged
// mode commits its own compute transaction, which it must not do to a
// transaction the caller owns.
var errStagedNeedsSession = errors.New("cursor: staged mode needs a pool or a connection, not a transaction")

// errConnInTransaction is returned when the source is a *pgx.Conn or a
// *pgxpool.Conn that is already inside a transaction; pass the pgx.Tx
// instead.
var errConnInTransaction = errors.New("cursor: connection is inside a transaction; pass the pgx.Tx instead")

// QueryError is an error reported by PostgreSQL or the connection while
// describing, staging, running or cleaning up the query. Unwrap gives the
// underlying error (for example a *pgconn.PgError).
type QueryError struct {
	Op  string // "describe", "stage", "query", "stream", "cleanup"
	err error
}

func (e *QueryError) Error() string { return "cursor: " + e.Op + ": " + e.err.Error() }
func (e *QueryError) Unwrap() error { return e.err }

// unsupportedTypeError names a result column whose PostgreSQL type has no
// Arrow mapping; it matches ErrUnsupportedType.
type unsupportedTypeError struct {
	Column   string
	Index    int
	TypeName string // pg_type.typname
	OID      uint32
}

func (e *unsupportedTypeError) Error() string {
	return fmt.Sprintf("cursor: column %q (#%d) has unsupported PostgreSQL type %s (oid %d); cast it in SQL or set Options.UnknownAsText",
		e.Column, e.Index, e.TypeName, e.OID)
}

// Is makes errors.Is(err, ErrUnsupportedType) true.
func (e *unsupportedTypeError) Is(target error) bool { return target == ErrUnsupportedType }

// limitError reports that a stream hit an opt-in guard; it matches
// ErrRunaway.
type limitError struct {
	MaxRows     int64         // set when the row limit was hit
	MaxDuration time.Duration // set when the duration limit was hit
}

func (e *limitError) Error() string {
	if e.MaxRows > 0 {
		return fmt.Sprintf("cursor: runaway stream: more than %d rows (Options.MaxRows)", e.MaxRows)
	}
	return fmt.Sprintf("cursor: runaway stream: ran longer than %s (Options.MaxDuration)", e.MaxDuration)
}

// Is makes errors.Is(err, ErrRunaway) true.
func (e *limitError) Is(target error) bool { return target == ErrRunaway }

// decodeError reports a value that could not be decoded into its Arrow
// column. Its message names the column, its type (MetaPGType), the 0-based
// row number in the stream and why; it unwraps to the cause (matching
// ErrOutOfRange for a value without a representation).
type decodeError struct {
	column   string
	typeName string
	row      int64
	err      error
}

func (e *decodeError) Error() string {
	return fmt.Sprintf("cursor: column %q (%s) row %d: %v", e.column, e.typeName, e.row, e.err)
}
func (e *decodeError) Unwrap() error { return e.err }

func outOfRange(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrOutOfRange}, a...)...)
}
