// Package vocab holds the primitives several lakewrite packages share, defined
// once so that every package means the same thing by them: the sink a write
// goes to, the write mode of a write, the Arrow field metadata keys the cursor
// sets and the facade reads, the snapshot summary keys the facade writes and
// its double and writestrategy read, and the sentinel errors more than one
// package returns.
//
// It imports only the standard library. Users never import it: the public
// packages re-export each primitive by alias where users look for it —
// [Sink] and its values in package sink, [WriteMode] in package facade (the
// ledger-only [Maintenance] in package ledger), the metadata keys in package
// cursor, [ErrDatasetNotFound] in ledger — so a value
// or error from one package is the same value, and matches with errors.Is, in
// every other.
//
// The string values are persisted (in the control-plane tables and in Iceberg
// snapshot summaries) and must never change.
package vocab
