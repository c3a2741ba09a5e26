package cursor

// DefaultBatchSize is the batch size a zero Options.BatchSize means after
// the first batch, for the external tests.
const DefaultBatchSize = defaultBatchSize
