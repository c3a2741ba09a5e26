package incremental

import (
	"fmt"

	"github.com/lakewrite/lakewrite/internal/vocab"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
)

// Output is what [ChooseReadMode] knows about the output of a build.
type Output struct {
	// Decision is the sink the build resolved for the output.
	Decision sink.Decision
	// Previous is the sink of the output's last committed write
	// (ledger.Dataset.Sink); "" when the output has none.
	Previous sink.Sink
}

// Source is what [ChooseReadMode] knows about one source a build asks to
// read in delta mode.
type Source struct {
	// DatasetID is the source dataset.
	DatasetID string
	// Lives is where the source's contents live now (ledger.Dataset.Sink).
	Lives sink.Sink
	// Txns are the window's transactions as the ledger records them (as
	// [Reader.Next] returns them, or ledger.Ledger.Get of each id).
	Txns []ledger.Txn
	// AppendOnly is the lakehouse's answer for a source that lives on
	// Iceberg: every window transaction's snapshot is in the table's
	// current ancestry, and it and every snapshot after it up to the head
	// is an append (facade.Facade.ScanAppended). Only the data files those
	// snapshots added then hold the window's rows. Consulted only for a
	// source on Iceberg with transactions in the window; false when
	// unknown.
	AppendOnly bool
}

// ChooseReadMode is the rule that decides whether a build may read src as
// a delta (only the rows its window's transactions wrote) or must read it
// whole (a snapshot read), for the requested mode and the build's output
// out. It returns the mode and, for a snapshot read of a delta request,
// why. A delta is allowed only where it is provably the window's whole
// change:
//
//   - the output is not written for the first time after a flip: its last
//     committed write was on the sink it is written to now, and an Iceberg
//     output has a committed write already (Previous is not ""). The first
//     write on a sink is a full rebuild;
//   - every window transaction is a committed, non-maintenance write of
//     src;
//   - a source read from the row store (Lives is Postgres): every window
//     transaction wrote its rows to the row store (its sink is Postgres). A
//     transaction written to Iceberg has no rows there (the row store was
//     never written or was drained), so a delta predicate would read
//     nothing for it;
//   - a source on Iceberg: every window transaction is an append written
//     to Iceberg, and the table holds them as appends with nothing but
//     appends after them (AppendOnly). A replace, merge, delete or
//     compaction in or after the window may have moved or removed the
//     window's rows, so the source is read whole;
//   - any other source (a registered relation, an unknown sink) is read
//     whole.
//
// A window without transactions allows a delta that reads nothing. Pure:
// the caller gathers the facts; for a source on Iceberg it may ask the
// lakehouse for AppendOnly only when the rule with AppendOnly true allows
// a delta.
func ChooseReadMode(out Output, requested ReadMode, src Source) (mode ReadMode, why string) {
	if requested != ReadDelta {
		return ReadSnapshot, ""
	}
	to := out.Decision.Sink
	switch {
	case to != sink.Postgres && to != sink.Iceberg:
		return ReadSnapshot, fmt.Sprintf("the output's sink %q is not resolved to a write target", to)
	case out.Previous != "" && out.Previous != to:
		return ReadSnapshot, fmt.Sprintf("first write after a flip from %s to %s: a full rebuild", out.Previous, to)
	case to == sink.Iceberg && out.Previous == "":
		return ReadSnapshot, "first write of the Iceberg table: a full rebuild"
	}
	for _, t := range src.Txns {
		if t.Status != ledger.StatusCommitted || t.WriteMode == ledger.Maintenance || (src.DatasetID != "" && t.DatasetID != src.DatasetID) {
			return ReadSnapshot, fmt.Sprintf("transaction %s is not a committed write of %q", t.ID, src.DatasetID)
		}
	}
	switch src.Lives {
	case sink.Postgres, "":
		for _, t := range src.Txns {
			if t.Sink != sink.Postgres {
				return ReadSnapshot, fmt.Sprintf("transaction %s of %q was written to %s, not to the row store the source is read from", t.ID, src.DatasetID, t.Sink)
			}
		}
		return ReadDelta, ""
	case sink.Iceberg:
		for _, t := range src.Txns {
			if t.Sink != sink.Iceberg || t.WriteMode != vocab.Append {
				return ReadSnapshot, fmt.Sprintf("transaction %s of %q is a %s on %s, not an append on Iceberg", t.ID, src.DatasetID, t.WriteMode, t.Sink)
			}
		}
		if len(src.Txns) > 0 && !src.AppendOnly {
			return ReadSnapshot, fmt.Sprintf("the Iceberg table of %q does not hold the window as appends only", src.DatasetID)
		}
		return ReadDelta, ""
	}
	return ReadSnapshot, fmt.Sprintf("source %q lives on %s, which has no delta", src.DatasetID, src.Lives)
}
