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

// clampReadMode returns the read mode a build writing with decision d may
// use for a requested mode, and whether it was clamped, when nothing else
// is known: a delta is kept on a Postgres output only. [ChooseReadMode] is
// the rule the write dispatch applies, which also allows a delta on an
// Iceberg output and over an Iceberg source where it is provably safe.
//
// It fails safe: a delta request is clamped to snapshot for any sink other
// than Postgres — Iceberg, but also an unresolved zero Decision. A
// snapshot request is never changed. Call it after resolving the sink and
// before the delta block.
func clampReadMode(d sink.Decision, requested ReadMode) (mode ReadMode, clamped bool) {
	if requested == ReadSnapshot || d.Sink == sink.Postgres {
		return requested, false
	}
	return ReadSnapshot, true
}
