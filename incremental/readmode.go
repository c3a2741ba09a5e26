package incremental

import "github.com/lakewrite/lakewrite/sink"

// ReadMode is how a build reads its source: the whole current contents
// (snapshot, a full rebuild) or only what the window's transactions added
// (delta).
type ReadMode string

// The read modes.
const (
	ReadSnapshot ReadMode = "snapshot"
	ReadDelta    ReadMode = "delta"
)

// ClampReadMode returns the read mode a build writing with decision d may
// use for a requested mode, and whether it was clamped: the one rule "an
// Iceberg sink forces a full rebuild", in one place. A delta block over a
// row store the Iceberg path does not write would silently read zero rows.
//
// It fails safe: a delta request is clamped to snapshot for any sink other
// than Postgres — Iceberg, but also an unresolved zero Decision — since a
// snapshot read is always correct and a delta read is correct only on the
// Postgres path. A snapshot request is never changed. Call it after
// resolving the sink and before the delta block.
func ClampReadMode(d sink.Decision, requested ReadMode) (mode ReadMode, clamped bool) {
	if requested == ReadSnapshot || d.Sink == sink.Postgres {
		return requested, false
	}
	return ReadSnapshot, true
}
