package ledger

// DefaultSchema is the Postgres schema that holds the control-plane tables
// when no other is configured.
const DefaultSchema = "lakewrite"
