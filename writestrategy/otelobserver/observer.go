package otelobserver

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/lakewrite/lakewrite/writestrategy/otelobserver"

// Attribute keys of the spans and metrics.
const (
	AttrWriterID   = attribute.Key("lakewrite.writer_id")
	AttrDatasetIDs = attribute.Key("lakewrite.dataset_ids")
	AttrDatasetID  = attribute.Key("lakewrite.dataset_id")
	AttrStrategy   = attribute.Key("lakewrite.strategy")
	AttrReadMode   = attribute.Key("lakewrite.read_mode")
	AttrSink       = attribute.Key("lakewrite.sink")
	AttrPhase      = attribute.Key("lakewrite.phase")
	AttrWriteMode  = attribute.Key("lakewrite.write_mode")
	AttrMergeMode  = attribute.Key("lakewrite.merge_mode")
	AttrRows       = attribute.Key("lakewrite.rows")
	AttrBytes      = attribute.Key("lakewrite.bytes")
	AttrSkipped    = attribute.Key("lakewrite.skipped")
	AttrPreserved  = attribute.Key("lakewrite.preserved")
	AttrSnapshotID = attribute.Key("lakewrite.snapshot_id")
	AttrTxnID      = attribute.Key("lakewrite.txn_id")
	AttrFullRead   = attribute.Key("lakewrite.full_read")
	AttrReplayed   = attribute.Key("lakewrite.replayed")
	// AttrErrorType is OpenTelemetry's error.type: the ErrorKind of the
	// error.
	AttrErrorType = attribute.Key("error.type")
)

// MergeNone is the lakewrite.merge_mode of an output that was no merge
// (facade.MergeNone).
const MergeNone = "none"

// Config configures New. A nil provider means a no-op one: the Observer
// never falls back to the global providers of package otel; pass
// otel.GetTracerProvider() or otel.GetMeterProvider() to use them.
type Config struct {
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
}

// Observer is a writestrategy.Observer making OpenTelemetry spans and
// metrics of the Dispatcher's writes (see the package documentation). It
// keeps no state between writes and is safe for concurrent Writes.
type Observer struct {
	tracer   trace.Tracer
	rows     metric.Int64Counter
	bytes    metric.Int64Counter
	errs     metric.Int64Counter
	writeDur metric.Float64Histogram
	phaseDur metric.Float64Histogram
}

var _ writestrategy.Observer = (*Observer)(nil)

// durationBuckets are the bounds, in seconds, of the duration histograms:
// from a millisecond phase to an hour-long write.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// New returns an Observer on the providers of cfg (nil cfg: no-op
// providers). It fails only when the meter refuses an instrument.
func New(cfg *Config) (*Observer, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.TracerProvider == nil {
		c.TracerProvider = tracenoop.NewTracerProvider()
	}
	if c.MeterProvider == nil {
		c.MeterProvider = metricnoop.NewMeterProvider()
	}
	o := &Observer{tracer: c.TracerProvider.Tracer(ScopeName)}
	m := c.MeterProvider.Meter(ScopeName)
	var errs [5]error
	o.rows, errs[0] = m.Int64Counter("lakewrite.write.rows", metric.WithUnit("{row}"),
		metric.WithDescription("Rows written by committed outputs (replayed results not counted)."))
	o.bytes, errs[1] = m.Int64Counter("lakewrite.write.bytes", metric.WithUnit("By"),
		metric.WithDescription("Bytes of the Iceberg data files added by committed outputs."))
	o.errs, errs[2] = m.Int64Counter("lakewrite.write.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Failed writes, and failed maintenance after a write, by error.type and the phase that failed."))
	o.writeDur, errs[3] = m.Float64Histogram("lakewrite.write.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of Dispatcher.Write calls."), metric.WithExplicitBucketBoundaries(durationBuckets...))
	o.phaseDur, errs[4] = m.Float64Histogram("lakewrite.write.phase.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of the phases of Dispatcher.Write calls."), metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("otelobserver: create instruments: %w", err)
	}
	return o, nil
}

// ctxKey keys the *span of a phase in the context PhaseStart returns.
type ctxKey struct{}

// span is a started phase (or the write itself).
type span struct {
	span  trace.Span
	phase writestrategy.Phase
	w     *write // the write it belongs to; nil for a phase outside one
}

// write is the state of one Dispatcher.Write, used only from the
// goroutine calling it (Observer calls are synchronous).
type write struct {
	strategy string
	readMode string
	outputs  map[string]trace.Span // by dataset id
	order    []string
	// failed are the phases that failed, in order: the first is the
	// phase a failed write failed in; a write that succeeded had only
	// failures it does not return (maintenance).
	failed []failure
}

type failure struct {
	phase writestrategy.Phase
	attrs []attribute.KeyValue // sink, phase, error.type
}

// PhaseStart starts the span of the phase and returns ctx carrying it.
func (o *Observer) PhaseStart(ctx context.Context, ev writestrategy.PhaseEvent) context.Context {
	if ev.Phase == writestrategy.PhaseWrite {
		return o.writeStart(ctx, ev)
	}
	var w *write
	if p, ok := ctx.Value(ctxKey{}).(*span); ok {
		w = p.w
	}
	parent := ctx
	if w != nil && len(ev.DatasetIDs) == 1 {
		if s, ok := w.outputs[ev.DatasetIDs[0]]; ok {
			parent = trace.ContextWithSpan(ctx, s)
		}
	}
	attrs := []attribute.KeyValue{AttrPhase.String(string(ev.Phase)), AttrWriterID.String(ev.WriterID),
		AttrDatasetIDs.StringSlice(ev.DatasetIDs)}
	if ev.Sink != "" {
		attrs = append(attrs, AttrSink.String(string(ev.Sink)))
	}
	sctx, s := o.tracer.Start(parent, "lakewrite."+string(ev.Phase), trace.WithAttributes(attrs...))
	return context.WithValue(sctx, ctxKey{}, &span{span: s, phase: ev.Phase, w: w})
}

// writeStart starts the write's span and one span per output under it.
func (o *Observer) writeStart(ctx context.Context, ev writestrategy.PhaseEvent) context.Context {
	w := &write{strategy: string(ev.Strategy), readMode: string(ev.ReadMode), outputs: make(map[string]trace.Span, len(ev.DatasetIDs))}
	wctx, ws := o.tracer.Start(ctx, "lakewrite.write", trace.WithAttributes(
		AttrWriterID.String(ev.WriterID), AttrDatasetIDs.StringSlice(ev.DatasetIDs),
		AttrStrategy.String(w.strategy), AttrReadMode.String(w.readMode)))
	for _, id := range ev.DatasetIDs {
		if _, dup := w.outputs[id]; dup {
			continue
		}
		_, s := o.tracer.Start(wctx, "lakewrite.output", trace.WithAttributes(
			AttrWriterID.String(ev.WriterID), AttrDatasetID.String(id),
			AttrStrategy.String(w.strategy), AttrReadMode.String(w.readMode)))
		w.outputs[id] = s
		w.order = append(w.order, id)
	}
	return context.WithValue(wctx, ctxKey{}, &span{span: ws, phase: writestrategy.PhaseWrite, w: w})
}

// PhaseEnd ends the span PhaseStart put in ctx and records the metrics of
// the phase (and, for the write, of its outputs).
func (o *Observer) PhaseEnd(ctx context.Context, ev writestrategy.PhaseEvent) {
	p, ok := ctx.Value(ctxKey{}).(*span)
	if !ok || p.phase != ev.Phase {
		return // not a context this Observer started
	}
	if ev.Phase == writestrategy.PhaseWrite {
		o.writeEnd(ctx, p, ev)
		return
	}
	var attrs []attribute.KeyValue
	if ev.Sink != "" {
		attrs = append(attrs, AttrSink.String(string(ev.Sink)))
	}
	p.span.SetAttributes(with(attrs, AttrRows.Int64(ev.Rows))...)
	mattrs := with(attrs, AttrPhase.String(string(ev.Phase)))
	if ev.Err != nil {
		kind := ErrorKind(ev.Err)
		setError(p.span, ev.Err, kind, true)
		mattrs = with(mattrs, AttrErrorType.String(kind))
		if p.w != nil {
			p.w.failed = append(p.w.failed, failure{phase: ev.Phase, attrs: mattrs})
		} else {
			o.errs.Add(ctx, 1, metric.WithAttributes(mattrs...))
		}
	}
	o.phaseDur.Record(ctx, ev.Duration.Seconds(), metric.WithAttributes(mattrs...))
	p.span.End()
}

// writeEnd ends the output spans and the write's span.
func (o *Observer) writeEnd(ctx context.Context, p *span, ev writestrategy.PhaseEvent) {
	w := p.w
	var sinkAttr []attribute.KeyValue
	if ev.Sink != "" {
		sinkAttr = []attribute.KeyValue{AttrSink.String(string(ev.Sink))}
	}
	var bytes int64
	done := map[string]bool{}
	for _, r := range ev.Results {
		bytes += r.Bytes
		merge := string(r.Merge)
		if r.Merge == facade.MergeNone {
			merge = MergeNone
		}
		oattrs := []attribute.KeyValue{AttrSink.String(string(r.Sink)), AttrWriteMode.String(string(r.Mode)), AttrMergeMode.String(merge)}
		if s, ok := w.outputs[r.DatasetID]; ok && !done[r.DatasetID] {
			done[r.DatasetID] = true
			s.SetAttributes(oattrs...)
			s.SetAttributes(AttrRows.Int64(r.Rows), AttrBytes.Int64(r.Bytes), AttrSkipped.Int64(r.Skipped),
				AttrPreserved.Int64(r.Preserved), AttrTxnID.String(r.TxnID), AttrReplayed.Bool(r.Replayed()))
			if r.SnapshotID != 0 {
				s.SetAttributes(AttrSnapshotID.Int64(r.SnapshotID))
			}
			if r.FullRead != "" {
				s.SetAttributes(AttrFullRead.String(r.FullRead))
			}
		}
		if r.Replayed() {
			continue
		}
		mattrs := metric.WithAttributes(with(oattrs, AttrStrategy.String(w.strategy))...)
		o.rows.Add(ctx, r.Rows, mattrs)
		if r.Bytes > 0 {
			o.bytes.Add(ctx, r.Bytes, mattrs)
		}
	}
	kind := ""
	if ev.Err != nil {
		kind = ErrorKind(ev.Err)
	}
	for _, id := range w.order {
		s := w.outputs[id]
		if ev.Err != nil && !done[id] {
			setError(s, ev.Err, kind, false)
		}
		s.End()
	}
	p.span.SetAttributes(with(sinkAttr, AttrRows.Int64(ev.Rows), AttrBytes.Int64(bytes))...)
	mattrs := with(sinkAttr, AttrStrategy.String(w.strategy), AttrReadMode.String(w.readMode))
	if ev.Err != nil {
		setError(p.span, ev.Err, kind, true)
		// One error per failed write: its kind, and the phase it failed in.
		failed := writestrategy.PhaseWrite
		if len(w.failed) > 0 {
			failed = w.failed[0].phase
		}
		o.errs.Add(ctx, 1, metric.WithAttributes(with(sinkAttr, AttrStrategy.String(w.strategy),
			AttrPhase.String(string(failed)), AttrErrorType.String(kind))...))
		mattrs = with(mattrs, AttrErrorType.String(kind))
	} else {
		// A write that succeeded returns no error of a phase that failed
		// after its commit (maintenance): each is counted.
		for _, f := range w.failed {
			o.errs.Add(ctx, 1, metric.WithAttributes(with(f.attrs, AttrStrategy.String(w.strategy))...))
		}
	}
	o.writeDur.Record(ctx, ev.Duration.Seconds(), metric.WithAttributes(mattrs...))
	p.span.End()
}

// setError marks s failed with err, recording err as an exception event
// when record is set.
func setError(s trace.Span, err error, kind string, record bool) {
	if record {
		s.RecordError(err)
	}
	s.SetStatus(codes.Error, err.Error())
	s.SetAttributes(AttrErrorType.String(kind))
}

// with returns a new slice of base followed by more (never sharing base's
// array).
func with(base []attribute.KeyValue, more ...attribute.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(base)+len(more))
	return append(append(out, base...), more...)
}
