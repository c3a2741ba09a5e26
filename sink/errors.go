package sink

import (
	"errors"
	"fmt"
)

// Sentinel errors; test with [errors.Is]. The typed errors below match them.
var (
	// ErrInvalidSink: a sink (writer flag value) outside the known set.
	ErrInvalidSink = errors.New("invalid sink")
	// ErrInvalidArgument: an empty writer or dataset id, or a similar caller
	// mistake.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrUnknownWriter: the writer has no flags row (set one with
	// [Flags.SetWriter] first). Resolution does not return it: an unknown
	// writer resolves to Postgres; the write dispatch returns it (as an
	// [*UnknownWriterError]) when that would move or take over a dataset.
	ErrUnknownWriter = errors.New("unknown writer")
	// ErrAboveCeiling: a sink above the writer's max sink. See [CeilingError].
	ErrAboveCeiling = errors.New("sink above the writer's max sink")
	// ErrMissingArm: the resolved sink has no arm in a [RowSink]. See
	// [MissingArmError].
	ErrMissingArm = errors.New("no arm for the resolved sink")
	// ErrMixedPair: two outputs of a split resolve to different sinks. See
	// [MixedPairError].
	ErrMixedPair = errors.New("split outputs resolve to different sinks")
	// ErrUnresolved: a [Decision] that did not come from resolution (zero
	// value or inconsistent fields) was passed to [RowSink.Run].
	ErrUnresolved = errors.New("decision not resolved")
	// ErrNotMigrated: the control-plane tables are missing; run
	// ledger.Migrate for the configured schema.
	ErrNotMigrated = errors.New("control-plane schema not migrated")
)

// CeilingError reports a sink above a writer's max sink: refused when setting
// a flag, and when a [Decision] handed to [RowSink.Run] exceeds its ceiling.
type CeilingError struct {
	WriterID  string
	DatasetID string // empty for a writer default
	Sink      Sink
	Max       Sink
}

func (e *CeilingError) Error() string {
	what := "default"
	if e.DatasetID != "" {
		what = fmt.Sprintf("override for dataset %q", e.DatasetID)
	}
	return fmt.Sprintf("sink: writer %q: %s %s is above the writer's max %s; raise the max first (SetWriter) or pick a sink <= %s",
		e.WriterID, what, e.Sink, e.Max, e.Max)
}

// Is makes errors.Is(err, ErrAboveCeiling) true.
func (e *CeilingError) Is(target error) bool { return target == ErrAboveCeiling }

// MissingArmError reports that [RowSink.Run] was given a decision whose sink
// has no arm. No arm was run.
type MissingArmError struct {
	WriterID  string
	DatasetID string
	Sink      Sink
}

func (e *MissingArmError) Error() string {
	return fmt.Sprintf("sink: writer %q dataset %q resolved to sink %s but the RowSink has no %s arm; nothing was written (clear the override or lower the writer's max until the arm exists)",
		e.WriterID, e.DatasetID, e.Sink, e.Sink)
}

// Is makes errors.Is(err, ErrMissingArm) true.
func (e *MissingArmError) Is(target error) bool { return target == ErrMissingArm }

// MixedPairError reports that the two outputs of a split resolve to different
// sinks. Split outputs flip as a pair.
type MixedPairError struct {
	First, Second Decision
}

func (e *MixedPairError) Error() string {
	return fmt.Sprintf("sink: writer %q: split outputs %q (%s) and %q (%s) resolve to different sinks; flip the pair together: set (or clear) the same override on both datasets in one call",
		e.First.WriterID, e.First.DatasetID, e.First.Sink, e.Second.DatasetID, e.Second.Sink)
}

// Is makes errors.Is(err, ErrMixedPair) true.
func (e *MixedPairError) Is(target error) bool { return target == ErrMixedPair }

// DBError is a database failure, with the operation that failed.
type DBError struct {
	Op  string
	Err error
}

func (e *DBError) Error() string { return "sink: " + e.Op + ": " + e.Err.Error() }
func (e *DBError) Unwrap() error { return e.Err }
