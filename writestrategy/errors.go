package writestrategy

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrInvalid: a strategy or call is malformed (empty dataset id, unknown
	// join kind, ...).
	ErrInvalid = errors.New("writestrategy: invalid strategy")
	// errNoSchema: a source dataset has no declared schema to read it by.
	errNoSchema = errors.New("writestrategy: dataset has no declared schema")
	// ErrUnsafeIdentifier: an identifier or type name cannot be quoted safely.
	ErrUnsafeIdentifier = errors.New("writestrategy: unsafe identifier")
	// errCrossJoinTooLarge: the cross-join preflight refused the join.
	errCrossJoinTooLarge = errors.New("writestrategy: cross join too large")
)

// IdentifierError names an identifier that was refused. It matches
// ErrUnsafeIdentifier.
type IdentifierError struct {
	What   string // "column", "step", ...
	Name   string
	Reason string
}

func (e *IdentifierError) Error() string {
	return fmt.Sprintf("writestrategy: %s name %q refused: %s", e.What, e.Name, e.Reason)
}

// Is reports ErrUnsafeIdentifier.
func (e *IdentifierError) Is(target error) bool { return target == ErrUnsafeIdentifier }

// CrossJoinError is returned by the cross-join preflight. It matches
// ErrCrossJoinTooLarge.
type CrossJoinError struct {
	Left, Right         string
	LeftRows, RightRows int64 // recorded datasets.row_count
	Limit               int64
}

func (e *CrossJoinError) Error() string {
	return fmt.Sprintf("writestrategy: cross join of %q (%d rows) and %q (%d rows) would produce about %d rows, above the limit of %d",
		e.Left, e.LeftRows, e.Right, e.RightRows, e.LeftRows*e.RightRows, e.Limit)
}

// Is reports ErrCrossJoinTooLarge.
func (e *CrossJoinError) Is(target error) bool { return target == errCrossJoinTooLarge }

// QueryError is a failure of a statement lakewrite ran for a strategy
// (bad step SQL, a runtime error such as division by zero, ...), on either
// sink: match it with errors.As(err, &qe) whatever the output's sink. It
// unwraps to the driver's error (*pgconn.PgError for a server error, whose
// Position stays the server's, in the generated statement); on the Iceberg
// sink it wraps the *cursor.QueryError that streamed the rows.
type QueryError struct {
	Op string
	// Output is the dataset being written; empty when the statement served
	// the two outputs of a Split.
	Output string
	// Step is the Transform step whose SQL the server's error position falls
	// in ("predicate" for a Split's Predicate); empty when the error has no
	// position or it falls outside every step (the Position of a Query's
	// own SQL then has no Step).
	Step string
	// Position is the server's error position mapped into the step's own
	// SQL (a Split's Predicate, a Query's SQL): 1-based, in characters; 0
	// when unknown.
	Position int
	Err      error
}

func (e *QueryError) Error() string {
	var where strings.Builder
	if e.Output != "" {
		fmt.Fprintf(&where, "output %q: ", e.Output)
	}
	if e.Step != "" {
		fmt.Fprintf(&where, "step %q: ", e.Step)
	}
	if e.Position > 0 {
		fmt.Fprintf(&where, "at position %d of its SQL: ", e.Position)
	}
	return "writestrategy: " + where.String() + e.Op + ": " + e.Err.Error()
}

// Unwrap returns the driver's error.
func (e *QueryError) Unwrap() error { return e.Err }

func queryError(op string, err error) error {
	var qe *QueryError
	if errors.As(err, &qe) {
		return err
	}
	return &QueryError{Op: op, Err: err}
}

// BucketTypeError is returned when an output's bucket[N] partition column
// has a Postgres type the SQL bucket function does not hash (numeric,
// uuid, boolean, char(n), a domain, ...), before anything is written. It
// matches ErrInvalid.
type BucketTypeError struct {
	Dataset string
	Column  string
	Type    string // the column's Postgres type, as format_type gives it
}

func (e *BucketTypeError) Error() string {
	return fmt.Sprintf("writestrategy: dataset %q: bucket partition column %q has type %s; bucket[N] is computed in SQL for smallint, integer, bigint, date, time, timestamp, timestamptz, text, varchar and bytea only",
		e.Dataset, e.Column, e.Type)
}

// Is reports ErrInvalid.
func (e *BucketTypeError) Is(target error) bool { return target == ErrInvalid }
