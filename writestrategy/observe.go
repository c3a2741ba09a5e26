package writestrategy

import (
	"context"
	"iter"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
)

// Phase names a step of Dispatcher.Write. In the order a write runs them:
// "write" (PhaseWrite, the whole write), "resolve" (the sink), "open" (the
// ledger intents), "apply" (the Postgres arm's compute and row store write,
// one statement) or "compute" (the Iceberg arm's compute transaction and
// sources) then "stream" (PhaseStream, once per output), "check" (the
// ledger's expectations), "catalog_commit" (the snapshots),
// "ledger_commit" (the intents) and "maintain" (the table lifecycle of an
// output whose commit said maintenance is due; its error is logged, never
// returned).
type Phase string

const (
	// PhaseWrite encloses the whole write, from the first phase to the
	// last: its end carries the write's duration and error.
	PhaseWrite Phase = "write"
	// phaseResolve resolves the sink of the output (or split pair).
	phaseResolve Phase = "resolve"
	// phaseOpen opens one ledger intent per output (waiting for a writer
	// of the same dataset, reconciling one that is gone).
	phaseOpen Phase = "open"
	// phaseApply is the Postgres arm's compute and row store write: one
	// statement in the write's transaction.
	phaseApply Phase = "apply"
	// phaseCompute is the Iceberg arm's compute start: the compute
	// transaction begins and the sources are resolved and hydrated; the
	// rows stream in PhaseStream.
	phaseCompute Phase = "compute"
	// PhaseStream streams one output's rows from Postgres into staged
	// Iceberg data files (one event per output; an Observer with a Progress method
	// sees its rows so far).
	PhaseStream Phase = "stream"
	// phaseCheck asks the ledger's expectations about the staged outputs.
	// On a catalog that commits into the ledger's transaction
	// (facade.TxStaged) they run inside phaseLedgerCommit instead.
	phaseCheck Phase = "check"
	// phaseCatalogCommit makes the staged snapshots current in the Iceberg
	// catalog (in the ledger's transaction on a facade.TxStaged catalog,
	// visible only with phaseLedgerCommit).
	phaseCatalogCommit Phase = "catalog_commit"
	// phaseLedgerCommit commits the intents: with the row store write on
	// the Postgres arm, with the catalog pointer swaps on a
	// facade.TxStaged catalog, after the snapshot otherwise.
	phaseLedgerCommit Phase = "ledger_commit"
	// phaseMaintain runs the table lifecycle of an output whose commit
	// said maintenance is due; its error is logged, never returned.
	phaseMaintain Phase = "maintain"
)

// PhaseEvent describes a phase of a write. PhaseStart receives it with
// Duration, Rows, Err and Results zero; PhaseEnd with them set.
type PhaseEvent struct {
	Phase    Phase
	WriterID string
	// Strategy is the kind of the Request's strategy.
	Strategy Kind
	// ReadMode is the read mode the Request asked for
	// (incremental.ReadSnapshot when it left it empty); WriteResult.FullRead
	// says which sources a delta read whole.
	ReadMode incremental.ReadMode
	// DatasetIDs are the outputs the phase concerns: every output of the
	// write for the whole-write phases, one for per-output phases
	// ("stream", "maintain", and the commits of a catalog that
	// commits table by table). Owned by the event; do not modify.
	DatasetIDs []string
	// Sink is the resolved sink (sink.Postgres or sink.Iceberg); empty
	// before the "resolve" phase ends.
	Sink sink.Sink
	// Duration of the phase (PhaseEnd only).
	Duration time.Duration
	// Rows written by the phase, where it knows them ("apply",
	// PhaseStream, the commits; PhaseEnd only).
	Rows int64
	// Err is the phase's error (PhaseEnd only); nil on success.
	Err error
	// Results are the results Write returns, one per output (the PhaseEnd
	// of a PhaseWrite that succeeded only). Owned by the Dispatcher; do
	// not modify.
	Results []WriteResult
}

// Observer sees the phases of each Dispatcher.Write, in the style of pgx's
// tracers: PhaseStart is called when a phase begins and returns the context
// the phase runs under (return ctx unchanged, or one carrying a span: the
// phase's database and catalog calls then run under it), and PhaseEnd,
// with that context, when the phase ends. Every started phase ends, on
// success and on error alike; phases nest only inside PhaseWrite. Calls
// come from the goroutine calling Write, synchronously: an Observer must
// be fast and safe for the concurrent Writes it serves, and must not call
// back into the Dispatcher.
//
// An Observer that also has a Progress method (Progress(ctx, ProgressEvent))
// sees the rows of each PhaseStream as they stream; one with a ModelWindow
// method (ModelWindow(ctx, ModelWindowEvent)) sees each window a Model
// scores.
//
// Package writestrategy/otelobserver is an Observer giving OpenTelemetry
// spans and metrics.
type Observer interface {
	PhaseStart(ctx context.Context, ev PhaseEvent) context.Context
	PhaseEnd(ctx context.Context, ev PhaseEvent)
}

// ProgressEvent reports a streaming output's progress: the rows handed to
// the lakehouse so far and the time since its PhaseStream began. It comes
// once per batch, under the context PhaseStart returned for that
// PhaseStream (whose PhaseEvent names the writer and the sink).
//
// A write in slices (Request.Slices) reports each slice apart, from the
// slice's goroutine (so concurrently): Slice is its index, Rows its rows.
// When the slices are written in other processes (DispatchConfig.StageSlices,
// e.g. package sliceriver), a slice is reported once, when its files reach
// the coordinator (sliced.Config.SliceDone): Rows is all its rows, Elapsed
// the time since the write in slices began.
type ProgressEvent struct {
	DatasetID string
	Rows      int64
	Elapsed   time.Duration
	Slice     int
}

// progressObserver is an Observer that also sees each batch an Iceberg
// write streams (after the batch is written to the staged files'
// encoder). Progress is called once per batch, under the PhaseStream
// context; rate limiting (a progress bar's redraw) is the observer's.
type progressObserver interface {
	Observer
	Progress(ctx context.Context, ev ProgressEvent)
}

// phase is a started phase; its zero value (no observer) does nothing.
type phase struct {
	obs Observer
	w   *writeInfo
	ctx context.Context
	ev  PhaseEvent
	t0  time.Time
}

// observe starts phase p of w under ctx and returns the context the phase
// runs under. Without an observer it returns ctx and a no-op phase.
func (d *Dispatcher) observe(ctx context.Context, w *writeInfo, p Phase, ids []string) (context.Context, phase) {
	if d.cfg.Observer == nil {
		return ctx, phase{}
	}
	ev := PhaseEvent{Phase: p, WriterID: w.writerID, Strategy: w.kind, ReadMode: w.readMode, DatasetIDs: ids, Sink: w.sink}
	pctx := d.cfg.Observer.PhaseStart(ctx, ev)
	if pctx == nil {
		pctx = ctx
	}
	return pctx, phase{obs: d.cfg.Observer, w: w, ctx: pctx, ev: ev, t0: time.Now()}
}

// end ends the phase with its rows and error.
func (ph *phase) end(rows int64, err error) {
	ph.endWrite(rows, err, nil)
}

// endWrite ends the phase with its rows and error, and, for a PhaseWrite
// that succeeded, the results Write returns.
func (ph *phase) endWrite(rows int64, err error, results []WriteResult) {
	if ph.obs == nil {
		return
	}
	ev := ph.ev
	if err != nil {
		rows, results = 0, nil
	}
	ev.Results = results
	ev.Sink = ph.w.sink
	ev.Duration, ev.Rows, ev.Err = time.Since(ph.t0), rows, err
	ph.obs.PhaseEnd(ph.ctx, ev)
	ph.obs = nil // ends once
}

// writeInfo is what every event of one write carries.
type writeInfo struct {
	writerID string
	kind     Kind
	readMode incremental.ReadMode
	outs     []string
	sink     sink.Sink
	// datasets are the outputs' rows as read before any intent was
	// opened (after their recovery); a missing one is not registered.
	datasets map[string]ledger.Dataset
	// shadow holds the outputs whose decision said shadow (shadowmode.go).
	shadow map[string]bool
}

// progress wraps an output's borrowed batches so that a progressObserver
// sees the rows so far; without one it returns rows unchanged.
func (d *Dispatcher) progress(ctx context.Context, datasetID string, slice int, rows iter.Seq2[arrow.RecordBatch, error]) iter.Seq2[arrow.RecordBatch, error] {
	po, ok := d.cfg.Observer.(progressObserver)
	if !ok {
		return rows
	}
	return func(yield func(arrow.RecordBatch, error) bool) {
		t0 := time.Now()
		ev := ProgressEvent{DatasetID: datasetID, Slice: slice}
		for rec, err := range rows {
			var n int64
			if err == nil && rec != nil {
				n = rec.NumRows()
			}
			if !yield(rec, err) {
				return
			}
			if err == nil && rec != nil {
				ev.Rows += n
				ev.Elapsed = time.Since(t0)
				po.Progress(ctx, ev)
			}
		}
	}
}

// logResults logs one Info record per output written and, for a write in
// delta mode that read sources whole, one more saying why
// (WriteResult.FullRead).
func (d *Dispatcher) logResults(ctx context.Context, req Request, rs []WriteResult) {
	for _, r := range rs {
		d.log.InfoContext(ctx, "lakewrite output written", "writer_id", req.WriterID, "dataset_id", r.DatasetID,
			"strategy", string(req.Strategy.Kind()), "sink", r.Sink, "mode", r.Mode, "rows", r.Rows,
			"skipped", r.Skipped, "preserved", r.Preserved, "rounded", r.Rounded, "txn_id", r.TxnID, "snapshot_id", r.SnapshotID)
		if r.Refresh.Mode == incremental.RefreshFull {
			msg := "lakewrite declared output recomputed in full"
			if req.Strategy.Kind() == kindModel {
				msg = "lakewrite model output scored in full"
			}
			d.log.InfoContext(ctx, msg, "writer_id", req.WriterID, "dataset_id", r.DatasetID, "txn_id", r.TxnID, "reason", r.Refresh.Reason)
		}
		if r.FullRead != "" {
			d.log.InfoContext(ctx, "lakewrite delta request read whole", "writer_id", req.WriterID, "dataset_id", r.DatasetID,
				"txn_id", r.TxnID, "full_read", r.FullRead)
		}
	}
}
