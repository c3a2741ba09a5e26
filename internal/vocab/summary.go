package vocab

// The snapshot summary keys lakewrite writes on every snapshot of a table
// (the facade package documentation lists them with their values for readers in other engines).
// Caller metadata is stored under SummaryMetaPrefix+key.
const (
	SummaryTxnID      = "lakewrite.txn-id"
	SummaryWriterID   = "lakewrite.writer-id"
	SummaryWorkspace  = "lakewrite.workspace"
	SummarySourceRefs = "lakewrite.source-refs" // JSON array of dataset ids
	SummaryMode       = "lakewrite.mode"
	SummaryWriteID    = "lakewrite.write-id" // unique per staged write
	SummaryCreatedAt  = "lakewrite.created-at"
	SummaryRows       = "lakewrite.rows"
	SummaryChecksum   = "lakewrite.checksum"
	SummaryMetaPrefix = "lakewrite.meta."
	// SummaryNumericRounded is the number of numeric values the write's
	// producer rounded to their column's scale, recorded when the request
	// reports it.
	SummaryNumericRounded = "lakewrite.numeric-rounded"
	// SummaryRowIDVersion records the row id version of the write.
	SummaryRowIDVersion = "lakewrite.row-id-version"
	// SummarySchemaChange records the schema change a write made, as JSON;
	// absent when the write left the schema as it was.
	SummarySchemaChange = "lakewrite.schema-change"
	// SummaryMergeKey records, on the snapshot of a merge by key that
	// updated the table in place, the key's columns as a JSON array: the
	// table holds each key once after it.
	SummaryMergeKey = "lakewrite.merge-key"
)
