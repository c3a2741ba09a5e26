package incremental

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/lakewrite/lakewrite/sink"
)

// Dependency declares that the output rows whose Key columns hold a value
// v depend only on the rows of each source whose mapped columns hold v: a
// row-wise transform keyed by any of its columns, a GROUP BY K with any
// aggregate, a DISTINCT, window functions PARTITION BY K, or a join whose
// key path goes through each mapped source. A run of a declared output
// then recomputes only the key values its sources' changes touch (see
// [ChooseRefresh]). The declaration is the caller's contract: a false one
// (the output depends on rows outside their key) gives a wrong output,
// which a verification against a full recompute finds.
type Dependency struct {
	// Key are output columns (at least one, each once).
	Key []string
	// Sources maps a source id to its columns equal to Key, in Key's
	// order. A source not in the map has no key path: any change in it
	// makes the run full.
	Sources map[string][]string
	// MaxShare is the share of changed source rows (change images over
	// the source's rows) above which a run is full. 0 means
	// DefaultMaxShare; at most 1.
	MaxShare float64
}

// DefaultMaxShare is the change share above which a declared output is
// recomputed in full when Dependency.MaxShare is 0. It is a conservative
// starting point: the crossover at which a keyed recompute stops being
// cheaper than a full one depends on the shape of the output and of its
// sources, and is measured by the refresh benchmark (examples/bench
// -refresh).
const DefaultMaxShare = 0.2

// ErrInvalidDependency is returned by [Dependency.Validate] for a
// declaration that cannot hold: test with errors.Is.
var ErrInvalidDependency = errors.New("incremental: invalid dependency")

// Validate checks d against the output's columns and the columns of the
// strategy's sources (source id -> its columns): Key is a non-empty list
// of distinct output columns, every mapped source is a source and maps
// one existing column per key column, and MaxShare is within [0, 1].
// Column names compare exactly. A nil outputColumns skips the check of
// Key against the output (its columns are known only once its SQL is
// described); a nil sources map skips the mapped sources.
func (d *Dependency) Validate(outputColumns []string, sources map[string][]string) error {
	if d == nil {
		return nil
	}
	if len(d.Key) == 0 {
		return fmt.Errorf("%w: no key column", ErrInvalidDependency)
	}
	if d.MaxShare < 0 || d.MaxShare > 1 {
		return fmt.Errorf("%w: MaxShare %v is not within [0, 1] (0 is the default, %v)", ErrInvalidDependency, d.MaxShare, DefaultMaxShare)
	}
	for i, k := range d.Key {
		if slices.Contains(d.Key[:i], k) {
			return fmt.Errorf("%w: key column %q appears twice", ErrInvalidDependency, k)
		}
		if outputColumns != nil && !slices.Contains(outputColumns, k) {
			return fmt.Errorf("%w: key column %q is not a column of the output (%s)", ErrInvalidDependency, k, strings.Join(outputColumns, ", "))
		}
	}
	if sources == nil {
		return nil
	}
	for _, id := range slices.Sorted(maps.Keys(d.Sources)) {
		cols := d.Sources[id]
		have, ok := sources[id]
		if !ok {
			return fmt.Errorf("%w: %q is not a source of the output", ErrInvalidDependency, id)
		}
		if len(cols) != len(d.Key) {
			return fmt.Errorf("%w: source %q maps %d columns to a key of %d", ErrInvalidDependency, id, len(cols), len(d.Key))
		}
		for _, c := range cols {
			if !slices.Contains(have, c) {
				return fmt.Errorf("%w: %q is not a column of source %q", ErrInvalidDependency, c, id)
			}
		}
	}
	return nil
}

// Share is d's change share limit: MaxShare, or DefaultMaxShare when 0.
func (d *Dependency) Share() float64 {
	if d == nil || d.MaxShare == 0 {
		return DefaultMaxShare
	}
	return d.MaxShare
}

// RefreshMode is how a run of an output was computed: "" for an output
// without a Dependency (always full, as it always was), incremental (only
// the affected keys recomputed) or full.
type RefreshMode string

// The refresh modes.
const (
	RefreshIncremental RefreshMode = "incremental"
	RefreshFull        RefreshMode = "full"
)

// RefreshReport is what a run of a declared output did.
type RefreshReport struct {
	// Mode is "" for an output without a declaration.
	Mode RefreshMode
	// Keys is the number of affected key values recomputed by an
	// incremental run (0 for a full run).
	Keys int64
	// Reason says why a declared output's run was full ("" otherwise).
	Reason string
	// Scanned are the sources an incremental run read without an index
	// whose leading columns are its key columns (a relation without one:
	// its rows of the affected keys were found by a scan), by id.
	Scanned []string
}

// RefreshFacts is what [ChooseRefresh] knows about a run of an output.
type RefreshFacts struct {
	// Declared: the output has a Dependency.
	Declared bool
	// Sink is the sink the run writes; Previous the sink of the output's
	// last committed write ("" when none).
	Sink, Previous sink.Sink
	// Sources are the facts of every source of the output.
	Sources []RefreshSource
	// Altered says why the output is not as its last committed run left
	// it ("" when it is): another write of it committed since (a load, a
	// write of another strategy), or its table changed outside its runs
	// (dropped, rolled back, written by another engine). Only a full run
	// makes it what the declaration computes again.
	Altered string
	// MaxShare is the Dependency's limit (0: DefaultMaxShare).
	MaxShare float64
}

// RefreshSource is what [ChooseRefresh] knows about one source of a run.
type RefreshSource struct {
	ID string
	// Mapped: the Dependency maps the source's columns to its key.
	Mapped bool
	// Known: the source's changes since the output's last committed run
	// are known exactly (a change-log window without a full-rewrite mark,
	// an Iceberg history readable between the two snapshots, the source
	// of the same kind and schema as at that run). Reason says why not.
	Known  bool
	Reason string
	// Changes are the change images of the window (an update counts an
	// old and a new image); Rows the source's rows now.
	Changes, Rows int64
}

// ChooseRefresh is the rule that decides whether a run of a declared
// output recomputes only the keys its sources' changes touch
// (RefreshIncremental) or the whole output (RefreshFull, with the reason).
// An output without a declaration gets "" (full, as always). Incremental
// only when every one of these holds:
//
//   - the output has a committed earlier run on the sink it is written
//     to now (no first write, no flip), and is as that run left it
//     (Altered is empty);
//   - every source's window is known (see RefreshSource.Known);
//   - every source with changes in the window is mapped by the
//     declaration;
//   - every source's change share (Changes over Rows; a change in an
//     empty source counts as a share of 1) is at most MaxShare.
//
// Pure: the caller gathers the facts.
func ChooseRefresh(f RefreshFacts) (RefreshMode, string) {
	if !f.Declared {
		return "", ""
	}
	switch {
	case f.Previous == "":
		return RefreshFull, "the output has no committed earlier run"
	case f.Previous != f.Sink:
		return RefreshFull, fmt.Sprintf("first write after a flip from %s to %s", f.Previous, f.Sink)
	case f.Altered != "":
		return RefreshFull, f.Altered
	}
	limit := f.MaxShare
	if limit <= 0 {
		limit = DefaultMaxShare
	}
	for _, s := range f.Sources {
		if !s.Known {
			why := s.Reason
			if why == "" {
				why = "its changes are unknown"
			}
			return RefreshFull, fmt.Sprintf("source %q: %s", s.ID, why)
		}
	}
	for _, s := range f.Sources {
		if s.Changes > 0 && !s.Mapped {
			return RefreshFull, fmt.Sprintf("source %q changed and the declaration maps no key to it", s.ID)
		}
	}
	for _, s := range f.Sources {
		if s.Changes == 0 {
			continue
		}
		share := 1.0
		if s.Rows > 0 {
			share = float64(s.Changes) / float64(s.Rows)
		}
		if share > limit {
			return RefreshFull, fmt.Sprintf("source %q: %d changes of %d rows exceed the share %v", s.ID, s.Changes, s.Rows, limit)
		}
	}
	return RefreshIncremental, ""
}
