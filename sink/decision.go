package sink

import (
	"fmt"
	"log/slog"
)

// Source says which flag a [Decision] came from.
type Source string

// The sources of a decision.
const (
	// SourceOverride: a per-dataset override (a canary).
	SourceOverride Source = "override"
	// SourceDefault: the writer's default (no override for the dataset).
	SourceDefault Source = "default"
	// SourceUnknownWriter: the writer has no flags row; the decision is the
	// safe default, Postgres.
	SourceUnknownWriter Source = "unknown_writer"
)

// Setting is what the flags say about one (writer, dataset): the input of
// [Decide]. [Flags.Lookup] reads it from Postgres.
type Setting struct {
	WriterID  string
	DatasetID string
	// WriterKnown is false when the writer has no flags row; Default, Max
	// and Override are then ignored.
	WriterKnown bool
	Default     Sink
	Max         Sink
	// Override is the per-dataset override, or "" when there is none.
	Override Sink
}

// Decision is where one write of one (writer, dataset) goes. Obtain it from
// [Resolver.Resolve], [Flags.Check] or [Decide]: it also carries, unexported,
// the writer, the requested sink and the writer's max sink, which
// [RowSink.Run] checks and the decision's log line reports.
type Decision struct {
	DatasetID string
	// Sink is where the write goes: the requested sink (the override, or
	// else the writer default) capped by the writer's max sink; Postgres
	// when that is Shadow.
	Sink Sink
	// Shadow is true when the requested sink capped by the max is
	// [Shadow]: Sink is Postgres, the sink of record, and the write also
	// writes the dataset's Iceberg table.
	Shadow bool
	// Clamped is true when the requested sink was above the writer's max
	// sink and Sink was capped.
	Clamped bool
	Source  Source
	// Reason explains the decision in words, for logs and operators: the
	// requested sink, where it came from, and the max when it capped it.
	Reason string

	writerID  string
	requested Sink // the override, or else the writer default, before capping
	max       Sink // the writer's max sink (Postgres for an unknown writer)
}

// Decide resolves a setting: the override wins over the writer default, both
// are capped by the max sink (capping is reported as Clamped), and a writer
// without a flags row resolves to Postgres ([SourceUnknownWriter]). Decide is
// pure; [Resolver] adds the flag lookup, the cache and the log line.
//
// A setting holding an invalid sink (which the schema's CHECK constraints
// prevent) resolves to Postgres with a reason saying so.
func Decide(s Setting) Decision {
	d := Decision{writerID: s.WriterID, DatasetID: s.DatasetID}
	if !s.WriterKnown {
		d.Sink, d.requested, d.max = Postgres, Postgres, Postgres
		d.Source = SourceUnknownWriter
		d.Reason = fmt.Sprintf("writer %q has no flags row: safe default pg", s.WriterID)
		return d
	}
	d.max = s.Max
	if s.Override != "" {
		d.requested, d.Source = s.Override, SourceOverride
		d.Reason = fmt.Sprintf("override for dataset %q: %s", s.DatasetID, s.Override)
	} else {
		d.requested, d.Source = s.Default, SourceDefault
		d.Reason = fmt.Sprintf("writer default: %s (no override for dataset %q)", s.Default, s.DatasetID)
	}
	if !d.requested.Valid() || !d.max.Valid() {
		d.Sink, d.max = Postgres, Postgres
		d.Clamped = d.requested != Postgres
		d.Reason += fmt.Sprintf("; invalid flag (sink %q, max %q): safe default pg", d.requested, s.Max)
		return d
	}
	d.Sink = d.requested
	if d.Sink.Compare(d.max) > 0 {
		d.Sink, d.Clamped = d.max, true
		d.Reason += fmt.Sprintf("; clamped to the writer's max %s", d.max)
	}
	if d.Sink == Shadow {
		d.Sink, d.Shadow = Postgres, true
		d.Reason += "; Postgres is the sink of record, Iceberg the shadow"
	}
	return d
}

// check reports whether d is a consistent resolved decision within its
// ceiling.
func (d Decision) check() error {
	if !d.Sink.Valid() || d.Sink == Shadow || !d.max.Valid() {
		return fmt.Errorf("sink: %w: writer %q dataset %q: sink %q, max %q; obtain decisions from Resolver.Resolve or Decide",
			errUnresolved, d.writerID, d.DatasetID, d.Sink, d.max)
	}
	if d.Sink.Compare(d.max) > 0 {
		return ceilingError(d.writerID, d.DatasetID, d.Sink, d.max)
	}
	return nil
}

// ceilingError refuses sink s above ceiling, the writer's max sink, for the
// writer default (datasetID "") or a dataset's override. It matches
// [ErrAboveCeiling].
func ceilingError(writerID, datasetID string, s, ceiling Sink) error {
	what := "default"
	if datasetID != "" {
		what = fmt.Sprintf("override for dataset %q", datasetID)
	}
	return fmt.Errorf("sink: %w: writer %q: %s %s is above the writer's max %s; raise the max first (SetWriter) or pick a sink <= %s",
		ErrAboveCeiling, writerID, what, s, ceiling, ceiling)
}

// logAttrs returns the decision as log attributes: writer, dataset, sink,
// requested, max, clamped, shadow, source, reason.
func (d Decision) logAttrs() []slog.Attr {
	return []slog.Attr{
		slog.String("writer", d.writerID),
		slog.String("dataset", d.DatasetID),
		slog.String("sink", string(d.Sink)),
		slog.String("requested", string(d.requested)),
		slog.String("max", string(d.max)),
		slog.Bool("clamped", d.Clamped),
		slog.Bool("shadow", d.Shadow),
		slog.String("source", string(d.Source)),
		slog.String("reason", d.Reason),
	}
}
