package sink

import (
	"errors"
)

// Sentinel errors; test with [errors.Is]. The errors that match them name
// the writer, the dataset and the sinks involved.
var (
	// ErrUnknownWriter: the writer has no flags row (set one with
	// [Flags.SetWriter] first). Resolution does not return it: an unknown
	// writer resolves to Postgres; the write dispatch returns it (as an
	// [*UnknownWriterError]) when that would move or take over a dataset.
	ErrUnknownWriter = errors.New("unknown writer")
	// ErrAboveCeiling: a sink above the writer's max sink, refused when
	// setting a flag ([Flags.SetWriter], [Flags.SetOverride]) and when a
	// [Decision] handed to [RowSink.Run] exceeds its ceiling. The message
	// names the writer, the dataset (for an override), the sink and the max.
	ErrAboveCeiling = errors.New("sink above the writer's max sink")
	// ErrMissingArm: the resolved sink has no arm in a [RowSink]; no arm
	// was run. The message names the writer, the dataset and the sink.
	ErrMissingArm = errors.New("no arm for the resolved sink")
	// ErrMixedPair: two outputs of a split resolve to different sinks;
	// split outputs flip as a pair. The message names the writer and both
	// outputs with their sinks.
	ErrMixedPair = errors.New("split outputs resolve to different sinks")
)

// Errors of caller mistakes and of a missing schema; their messages say
// what to fix.
var (
	// errInvalidSink: a sink (writer flag value) outside the known set.
	errInvalidSink = errors.New("invalid sink")
	// errInvalidArgument: an empty writer or dataset id, or a similar
	// caller mistake.
	errInvalidArgument = errors.New("invalid argument")
	// errUnresolved: a [Decision] that did not come from resolution (zero
	// value or inconsistent fields) was passed to [RowSink.Run].
	errUnresolved = errors.New("decision not resolved")
	// errNotMigrated: the control-plane tables are missing; run
	// ledger.Migrate for the configured schema.
	errNotMigrated = errors.New("control-plane schema not migrated")
)
