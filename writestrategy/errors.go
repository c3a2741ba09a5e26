package writestrategy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrInvalid: a strategy or call is malformed (empty dataset id, unknown
	// join kind, a cross join above the preflight limit, ...).
	ErrInvalid = errors.New("writestrategy: invalid strategy")
	// ErrNoSchema: a dataset read by a write (a source, or a deploy's
	// target) has no declared schema (datasets.schema is NULL or not a
	// declared schema), so its columns and types are unknown. Every commit
	// of a Dispatcher write records it, and so does a roll-forward through
	// Dispatcher.Lookup; a dataset committed only by a writer of its own
	// whose ledger commits set no Outcome.Schema has none. The error names
	// the dataset.
	ErrNoSchema = errors.New("writestrategy: dataset has no declared schema")
	// ErrTxCommitLost: the Lakehouse hides the one-transaction commit of
	// snapshot and ledger (a wrapper whose staged writes drop
	// facade.TxStaged), and DispatchConfig.AcceptTwoCommits is not set.
	// The write is refused before any snapshot or intent commits; the
	// error names the dataset, the staged write's type and both fixes.
	ErrTxCommitLost = errors.New("writestrategy: the Lakehouse hides the one-transaction commit")
	// ErrUnsafeIdentifier: an identifier or type name cannot be quoted
	// safely. The error names what was refused (a column, a step, a
	// relation, ...), the name and why.
	ErrUnsafeIdentifier = errors.New("writestrategy: unsafe identifier")
	// errCrossJoinTooLarge: the cross-join preflight refused the join; it
	// matches ErrInvalid.
	errCrossJoinTooLarge = fmt.Errorf("%w: cross join too large", ErrInvalid)
)

// identifierError refuses name, an identifier of kind what ("column",
// "step", ...), for reason. It matches ErrUnsafeIdentifier.
// datasetSchema parses the declared schema of dataset id, read by a write.
// A missing one is an error matching ErrNoSchema that says how a dataset
// gets one.
func datasetSchema(id string, raw json.RawMessage) (Schema, error) {
	s, err := ParseSchema(raw)
	switch {
	case errors.Is(err, ErrNoSchema):
		return s, fmt.Errorf("dataset %q: %w: write it through a Dispatcher, or commit its ledger intents with Outcome.Schema set "+
			"(a landed write rolled forward by Dispatcher.Lookup gets one)", id, err)
	case err != nil:
		return s, fmt.Errorf("dataset %q: %w", id, err)
	}
	return s, nil
}

func identifierError(what, name, reason string) error {
	return fmt.Errorf("%w: %s name %q refused: %s", ErrUnsafeIdentifier, what, name, reason)
}

// crossJoinError is the cross-join preflight's refusal of left (leftRows
// recorded in datasets.row_count) joined with right (rightRows) above
// limit. It matches ErrInvalid.
func crossJoinError(left, right string, leftRows, rightRows, limit int64) error {
	return fmt.Errorf("%w: %q (%d rows) and %q (%d rows) would produce about %d rows, above the limit of %d",
		errCrossJoinTooLarge, left, leftRows, right, rightRows, leftRows*rightRows, limit)
}

// QueryError is a failure of a statement lakewrite ran for a strategy
// (bad step SQL, a runtime error such as division by zero, ...), on either
// sink: match it with errors.As(err, &qe) whatever the output's sink. It
// unwraps to the driver's error (*pgconn.PgError for a server error, whose
// Position stays the server's, in the generated statement); on the Iceberg
// sink it wraps the *cursor.QueryError that streamed the rows.
type QueryError struct {
	op string // the statement's part in the write ("compute", ...)
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

	err error // the driver's error
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
	return "writestrategy: " + where.String() + e.op + ": " + e.err.Error()
}

// Unwrap returns the driver's error.
func (e *QueryError) Unwrap() error { return e.err }

func queryError(op string, err error) error {
	var qe *QueryError
	if errors.As(err, &qe) {
		return err
	}
	return &QueryError{op: op, err: err}
}

// bucketTypeError refuses column of dataset, a bucket[N] partition
// column whose Postgres type typ (as format_type gives it) the SQL bucket
// function does not hash (numeric, uuid, boolean, char(n), a domain, ...),
// before anything is written. It matches ErrInvalid.
func bucketTypeError(dataset, column, typ string) error {
	return fmt.Errorf("%w: dataset %q: bucket partition column %q has type %s; bucket[N] is computed in SQL for smallint, integer, bigint, date, time, timestamp, timestamptz, text, varchar and bytea only",
		ErrInvalid, dataset, column, typ)
}
