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
