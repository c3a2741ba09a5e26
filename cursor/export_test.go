package cursor

// DefaultBatchSize is the batch size a zero Options.BatchSize means after
// the first batch, for the external tests.
const DefaultBatchSize = defaultBatchSize

// The error types behind ErrRunaway and ErrUnsupportedType, for the
// external tests that read their fields.
type (
	LimitError           = limitError
	UnsupportedTypeError = unsupportedTypeError
)

// ErrConnInTransaction is the error for a connection already inside a
// transaction, for the external tests.
var ErrConnInTransaction = errConnInTransaction

// IssueFields is every field of a ColumnIssue, unexported ones included,
// for the external tests to compare.
type IssueFields struct {
	Column     string
	Index      int
	TypeName   string
	Rounded    int64
	Refused    int64
	Refusal    string
	RefusedRow int64
}

// Fields returns c's fields.
func Fields(c ColumnIssue) IssueFields {
	return IssueFields{Column: c.Column, Index: c.index, TypeName: c.TypeName, Rounded: c.Rounded,
		Refused: c.Refused, Refusal: c.refusal, RefusedRow: c.refusedRow}
}

// The sentinels of a sequence ranged twice and of a staged stream over a
// transaction, for the external tests.
var (
	ErrAlreadyConsumed    = errAlreadyConsumed
	ErrStagedNeedsSession = errStagedNeedsSession
)

// DecodeError is the error of a value that could not be decoded.
type DecodeError = decodeError

// DecodeErrorColumn, DecodeErrorRow and DecodeErrorTypeName return e's
// column, row and type name.
func DecodeErrorColumn(e *DecodeError) string   { return e.column }
func DecodeErrorRow(e *DecodeError) int64       { return e.row }
func DecodeErrorTypeName(e *DecodeError) string { return e.typeName }
