package manualtable

import (
	"errors"
	"fmt"
	"net/http"
)

// Error codes of the JSON error responses.
const (
	CodeBadRequest     = "bad_request"        // 400: bad query parameter, unreadable body
	CodeBadSchema      = "bad_schema"         // 400: a PUT declaration that is not valid
	CodeBadCSV         = "bad_csv"            // 400: malformed CSV, header not matching the columns
	CodeBadJSON        = "bad_json"           // 400: a line that is not one JSON object of known columns
	CodeTypeMismatch   = "type_mismatch"      // 400: a value that does not fit its declared column
	CodeTooLarge       = "too_large"          // 413: body (or one NDJSON line) over the limit
	CodeUnsupported    = "unsupported_type"   // 415: Content-Type other than CSV or NDJSON
	CodeEmptyUpload    = "empty_upload"       // 400: a replace with no rows, without ?allow_empty=true
	CodeUnauthorized   = "unauthorized"       // 401: Authorize did not recognise the caller
	CodeForbidden      = "forbidden"          // 403: Authorize refused the caller this action
	CodeUnknownDataset = "unknown_dataset"    // 404: no such dataset
	CodeNotFound       = "not_found"          // 404: no such route
	CodeMethod         = "method_not_allowed" // 405: a route that exists, with another method
	CodeNotManual      = "not_manual"         // 409: the dataset is not a manual table (not declared here, or another writer's)
	CodeSchemaChanged  = "schema_changed"     // 409: the declaration changed while the upload started
	CodeSchemaMismatch = "schema_mismatch"    // 409: an upload the table's schema (or its schema policy) refuses
	CodeBusy           = "busy"               // 409: another write of the dataset stayed open past the wait budget
	CodeConflict       = "conflict"           // 409: the catalog commit conflicted; nothing written, retry
	CodeVetoed         = "vetoed"             // 422: a ledger expectation refused the commit
	CodePartitionOrder = "partition_order"    // 422: the table is partitioned and the rows were not grouped by partition
	CodeWriteFailed    = "write_failed"       // 500: the write failed; nothing written, intent aborted
	CodeOutcomeUnknown = "outcome_unknown"    // 503: the commit may or may not have landed; intent left open
)

// ErrUnauthenticated is what an Authorize func wraps to answer 401 (the
// caller is not known) instead of 403 (known but not allowed).
var ErrUnauthenticated = errors.New("manualtable: unauthenticated")

// ErrEmptyUpload is the cause of an upload refused because it would
// replace the table with no rows (see the package documentation).
var ErrEmptyUpload = errors.New("manualtable: empty upload")

// InputError is a client error in a request: the request is answered with
// Status and nothing is written (an intent opened for it is aborted). Line
// is the 1-based line of the body (0 when not about a line), Column the
// declared column concerned ("" when none).
type InputError struct {
	Status int
	Code   string
	Line   int64
	Column string
	Msg    string
	Err    error // the underlying error, if any
}

func (e *InputError) Error() string {
	msg := e.Msg
	switch {
	case e.Line > 0 && e.Column != "":
		msg = fmt.Sprintf("line %d, column %q: %s", e.Line, e.Column, msg)
	case e.Line > 0:
		msg = fmt.Sprintf("line %d: %s", e.Line, msg)
	case e.Column != "":
		msg = fmt.Sprintf("column %q: %s", e.Column, msg)
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *InputError) Unwrap() error { return e.Err }

func badInput(status int, code string, line int64, column, format string, args ...any) *InputError {
	return &InputError{Status: status, Code: code, Line: line, Column: column, Msg: fmt.Sprintf(format, args...)}
}

// readError classifies an error reading the request body: over the size
// limit (413) or a broken body (400).
func readError(err error, line int64, code string) *InputError {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &InputError{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Line: line,
			Msg: fmt.Sprintf("request body is larger than %d bytes", mbe.Limit), Err: err}
	}
	return &InputError{Status: http.StatusBadRequest, Code: code, Line: line, Msg: err.Error(), Err: err}
}

// outcomeUnknownError marks a write whose commit state is unknown; it
// matches ledger.ErrOutcomeUnknown so ledger.With leaves the intent open.
type outcomeUnknownError struct {
	err error
}

func (e *outcomeUnknownError) Error() string        { return e.err.Error() }
func (e *outcomeUnknownError) Unwrap() error        { return e.err }
func (e *outcomeUnknownError) OutcomeUnknown() bool { return true }
