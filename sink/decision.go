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

// Decision is where one write of one (writer, dataset) goes.
type Decision struct {
	WriterID  string
	DatasetID string
	// Sink is where the write goes: Requested capped by Max; Postgres
	// when that is Shadow.
	Sink Sink
	// Shadow is true when Requested capped by Max is [Shadow]: Sink is
	// Postgres, the sink of record, and the write also writes the
	// dataset's Iceberg table.
	Shadow bool
	// Requested is the override, or else the writer default, before capping.
	Requested Sink
	// Max is the writer's max sink (Postgres for an unknown writer).
	Max Sink
	// Clamped is true when Requested was above Max and Sink was capped.
	Clamped bool
	Source  Source
	// Reason explains the decision in words, for logs and operators.
	Reason string
}

// Decide resolves a setting: the override wins over the writer default, both
// are capped by the max sink (capping is reported as Clamped), and a writer
// without a flags row resolves to Postgres ([SourceUnknownWriter]). Decide is
// pure; [Resolver] adds the flag lookup, the cache and the log line.
//
// A setting holding an invalid sink (which the schema's CHECK constraints
// prevent) resolves to Postgres with a reason saying so.
func Decide(s Setting) Decision {
	d := Decision{WriterID: s.WriterID, DatasetID: s.DatasetID}
	if !s.WriterKnown {
		d.Sink, d.Requested, d.Max = Postgres, Postgres, Postgres
		d.Source = SourceUnknownWriter
		d.Reason = fmt.Sprintf("writer %q has no flags row: safe default pg", s.WriterID)
		return d
	}
	d.Max = s.Max
	if s.Override != "" {
		d.Requested, d.Source = s.Override, SourceOverride
		d.Reason = fmt.Sprintf("override for dataset %q: %s", s.DatasetID, s.Override)
	} else {
		d.Requested, d.Source = s.Default, SourceDefault
		d.Reason = fmt.Sprintf("writer default: %s (no override for dataset %q)", s.Default, s.DatasetID)
	}
	if !d.Requested.Valid() || !d.Max.Valid() {
		d.Sink, d.Max = Postgres, Postgres
		d.Clamped = d.Requested != Postgres
		d.Reason += fmt.Sprintf("; invalid flag (sink %q, max %q): safe default pg", d.Requested, s.Max)
		return d
	}
	d.Sink = d.Requested
	if d.Sink.Compare(d.Max) > 0 {
		d.Sink, d.Clamped = d.Max, true
		d.Reason += fmt.Sprintf("; clamped to the writer's max %s", d.Max)
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
	if !d.Sink.Valid() || d.Sink == Shadow || !d.Max.Valid() {
		return fmt.Errorf("sink: %w: writer %q dataset %q: sink %q, max %q; obtain decisions from Resolver.Resolve or Decide",
			ErrUnresolved, d.WriterID, d.DatasetID, d.Sink, d.Max)
	}
	if d.Sink.Compare(d.Max) > 0 {
		return &CeilingError{WriterID: d.WriterID, DatasetID: d.DatasetID, Sink: d.Sink, Max: d.Max}
	}
	return nil
}

// logAttrs returns the decision as log attributes: writer, dataset, sink,
// requested, max, clamped, shadow, source, reason.
func (d Decision) logAttrs() []slog.Attr {
	return []slog.Attr{
		slog.String("writer", d.WriterID),
		slog.String("dataset", d.DatasetID),
		slog.String("sink", string(d.Sink)),
		slog.String("requested", string(d.Requested)),
		slog.String("max", string(d.Max)),
		slog.Bool("clamped", d.Clamped),
		slog.Bool("shadow", d.Shadow),
		slog.String("source", string(d.Source)),
		slog.String("reason", d.Reason),
	}
}
