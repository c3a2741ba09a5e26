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

// SinkForcesFullRebuild reports whether a build writing with decision d must
// read in snapshot mode: the one rule "an Iceberg sink forces a full
// rebuild", in one place. A delta block over a row store the Iceberg path
// does not write would silently read zero rows.
//
// It fails safe: any sink other than Postgres — Iceberg, but also an
// unresolved zero Decision — forces a full rebuild, since a snapshot read is
// always correct and a delta read is correct only on the Postgres path.
// Call it after resolving the sink and before the delta block.
func SinkForcesFullRebuild(d sink.Decision) bool {
	return d.Sink != sink.Postgres
}

// ClampReadMode returns the read mode a build writing with decision d may
// use for a requested mode, and whether it was clamped: a delta request is
// clamped to snapshot when [SinkForcesFullRebuild](d). A snapshot request is
// never changed.
func ClampReadMode(d sink.Decision, requested ReadMode) (mode ReadMode, clamped bool) {
	if requested == ReadSnapshot || !SinkForcesFullRebuild(d) {
		return requested, false
	}
	return ReadSnapshot, true
}

// ChooseReadMode combines the rules a build applies before its delta block:
// the sink clamp ([ClampReadMode]) and the window ([WindowAllowsDelta]). It
// returns delta only for a delta request, a Postgres sink and a window that
// allows a delta; otherwise snapshot, with a reason naming the rule that
// decided.
func ChooseReadMode(d sink.Decision, requested ReadMode, w Window) (ReadMode, string) {
	switch {
	case requested != ReadDelta:
		return ReadSnapshot, "snapshot requested"
	case SinkForcesFullRebuild(d):
		return ReadSnapshot, "sink " + string(d.Sink) + " forces a full rebuild"
	case !WindowAllowsDelta(w):
		return ReadSnapshot, "window does not allow a delta (no watermark yet, or high before low)"
	}
	return ReadDelta, "delta over " + w.String()
}
