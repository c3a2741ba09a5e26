package writestrategy

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/incremental/changelog"
	"github.com/lakewrite/lakewrite/incremental/model"
	"github.com/lakewrite/lakewrite/internal/refresh"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
)

// kindModel names the Model strategy.
const kindModel Kind = "model"

// Model writes, for each row of its source, the rows a Go function
// computes from it (see model.Spec for the fields): an output whose
// columns are model.KeyColumn ("__source_row_key", the source row's key)
// then the declared ones. It is written through Dispatcher.Write like any
// strategy (intent, flags, both sinks, one snapshot, identity columns,
// recovery, shadow, Verify). The function's output rows are copied, one
// window at a time, into a temporary table of the write's transaction,
// which the write then reads as its output: memory holds the windows in
// flight, whatever the source's size. A failing, panicking or late window
// fails the write with a *model.WindowError naming it; nothing is written.
// An Observer with a ModelWindow method sees each window.
//
// A run after the first scores only the source rows whose key changed
// since the last run when the source is a tracked relation, a row-store
// dataset or an Iceberg dataset; WriteResult.Refresh says which mode ran,
// for how many touched keys, or why the run scored every row.
//
// Verify re-scores every source row and compares checksums: parity holds
// for a deterministic function. For one that is not (a sampled model, a
// service whose answers drift) a mismatch says only that the answers
// changed; compare the outputs' keys instead (the row counts agree). A
// shadow run's parity compares the write of record with its Iceberg
// mirror, not with a re-score: it holds for any function.
type Model model.Spec

// Kind implements WriteStrategy.
func (Model) Kind() Kind { return kindModel }

// Outputs implements WriteStrategy.
func (m Model) Outputs() []string { return []string{m.Output} }

// Sources implements WriteStrategy.
func (m Model) Sources() []string { return []string{m.Source} }

// Apply writes the output into the row store inside tx; see [Apply].
func (m Model) Apply(ctx context.Context, tx pgx.Tx, env *Env) ([]WriteResult, error) {
	return applyStrategy(ctx, tx, env, m)
}

// ComputeRows scores the source and streams the output from tx without
// writing it; see [ComputeRows].
func (m Model) ComputeRows(ctx context.Context, tx pgx.Tx, env *Env, opts *cursor.Options) ([]Computed, error) {
	return ComputeRows(ctx, tx, env, m, opts)
}

func (m Model) plan(*planContext) ([]projection, error) {
	return nil, fmt.Errorf("%w: model %q is planned with its source read", ErrInvalid, m.Output)
}

// sourcePlanner is a strategy planned once its sources are resolved, in
// the write's transaction (prepare calls it instead of plan).
type sourcePlanner interface {
	planSources(ctx context.Context, tx pgx.Tx, env *Env, pc *planContext, sinkTo sink.Sink, ds map[string]datasetRow) ([]projection, error)
}

// planSources scores the source (on a run after the first, only its rows
// changed since the last run: model.Changes) into a temporary table of tx
// and plans the output as that table's rows.
func (m Model) planSources(ctx context.Context, tx pgx.Tx, env *Env, pc *planContext, sinkTo sink.Sink, ds map[string]datasetRow) ([]projection, error) {
	spec := model.Spec(m)
	if err := checkDatasetID("output", m.Output); err != nil {
		return nil, err
	}
	if err := spec.Check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	defs, _, err := loadColumns(m.Schema)
	if err != nil {
		return nil, err
	}
	r, err := pc.source(m.Source)
	if err != nil {
		return nil, err
	}
	b := newBuilder(nil)
	src := model.Source{SQL: r.render(b)}
	src.Args = b.args
	for _, c := range r.schema.Columns {
		src.Columns = append(src.Columns, model.Column{Name: c.Name, Type: c.Type})
	}
	p := projection{output: m.Output, kind: kindModel, mode: facade.Replace}
	cond := ""
	if run := env.modelRun; run != nil {
		srcSink := ds[m.Source].sink
		f := model.Facts{SameSink: ds[m.Output].sink == sinkTo, Scoped: true, // both arms replace a key set
			RowStore: srcSink != sink.Relation && srcSink != sink.Iceberg, Control: env.ctlSchema()}
		if srcSink == sink.Iceberg {
			snaps, err := env.icebergSnapshots(ctx, tx, []string{m.Source})
			if err != nil {
				return nil, err
			}
			f.Iceberg, f.Snapshot = true, snaps[m.Source]
		}
		if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT id::text FROM `+env.ctlSchema()+`.pipeline_build_transactions
			WHERE dataset_id = $1 AND status = 'committed' AND write_mode <> $2 ORDER BY committed_at DESC LIMIT 1), '')`,
			m.Output, string(ledger.Maintenance)).Scan(&f.LastTxn); err != nil {
			return nil, queryError("model "+m.Output+": last write", err)
		}
		delta, err := model.Changes(ctx, tx, changelog.New(env.Schema), &spec, src, f)
		if err != nil {
			return nil, fmt.Errorf("writestrategy: %w", err)
		}
		if delta.Reason == "" && sinkTo == sink.Iceberg && ds[m.Output].sink == sink.Iceberg {
			why, err := env.outputAltered(ctx, tx, m.Output)
			if err != nil {
				return nil, err
			}
			if why != "" {
				delta.Full(why)
			}
		}
		if delta.Snapshots != nil && run.ice == nil {
			delta.Full("the Iceberg source is read with a filter") // read before the run knew its changes
		}
		if delta.Snapshots != nil {
			if err := run.ice.changes(ctx, tx, env, &spec, src, delta, ds[m.Source].rowCount); err != nil {
				return nil, err
			}
		}
		if run.ice != nil {
			if err := run.ice.read(ctx, tx, env, &spec, delta); err != nil {
				return nil, err
			}
		}
		*run = modelRun{delta: delta, output: m.Output, source: m.Source}
		if delta.Incremental {
			cond, p.scope = delta.Cond(&spec), delta.KeysSQL()
			if r.table != "" { // the key condition next to the table, where its index serves it
				src.SQL = "(SELECT " + r.cols("s") + `, row_number() OVER () AS "__ord" FROM ` + r.table + " s WHERE " + cond + ")"
			}
		}
	}
	var progress func(model.WindowEvent)
	if env.modelProgress != nil {
		progress = func(ev model.WindowEvent) { env.modelProgress(m.Output, ev) }
	}
	scored, err := model.Score(ctx, tx, &spec, src, cond, defs, copyWindow, progress)
	if err != nil {
		return nil, fmt.Errorf("writestrategy: %w", err)
	}
	p.sql = scored.SQL
	return []projection{p}, nil
}

// copyWindow copies one window's output rows into a model's table.
func copyWindow(ctx context.Context, tx pgx.Tx, table pgx.Identifier, cols []string, rec arrow.RecordBatch, ord int64) (int64, error) {
	// The runner checked the names and types; loadRows compares schemas.
	src := &loadRows{pending: rec, next: func() (arrow.RecordBatch, error, bool) { return nil, nil, false },
		schema: rec.Schema(), output: table[len(table)-1], ord: ord}
	defer src.release()
	_, err := tx.CopyFrom(ctx, table, append(cols, "__ord"), src)
	switch {
	case src.panicked != nil:
		return ord, fmt.Errorf("%w: %v", model.ErrOutput, src.panicked.value)
	case src.err != nil:
		return ord, src.err
	case err != nil:
		return ord, queryError("model output", err)
	}
	return src.ord, nil
}

// ModelWindowEvent reports one window of a Model scored, to an Observer
// with a ModelWindow method.
type ModelWindowEvent struct {
	DatasetID string
	model.WindowEvent
}

// modelObserver is an Observer that also sees each window a Model scores,
// in window order, on the goroutine calling Write, under Write's context.
type modelObserver interface {
	Observer
	ModelWindow(ctx context.Context, ev ModelWindowEvent)
}

// modelProgress returns the window callback of a write; nil when the
// Observer has no ModelWindow method.
func (d *Dispatcher) modelProgress(ctx context.Context) func(string, model.WindowEvent) {
	mo, ok := d.cfg.Observer.(modelObserver)
	if !ok {
		return nil
	}
	return func(output string, ev model.WindowEvent) {
		mo.ModelWindow(ctx, ModelWindowEvent{DatasetID: output, WindowEvent: ev})
	}
}

// modelRun is a Model write's incremental state: what the run read of its
// source, stored once the write has committed (saveModelPosition).
type modelRun struct {
	delta  *model.Delta
	output string
	source string
	// ice is the run's Iceberg source, read once the run knows its delta.
	ice *modelIce
}

// report sets the Refresh report of a Model's result: incremental, for
// how many touched keys, or full and why.
func (run *modelRun) report(results []WriteResult) {
	if run.delta == nil || len(results) != 1 || results[0].Replayed() {
		return
	}
	r := incremental.RefreshReport{Mode: incremental.RefreshFull, Reason: run.delta.Reason}
	if run.delta.Incremental {
		r = incremental.RefreshReport{Mode: incremental.RefreshIncremental, Keys: run.delta.Keys}
	}
	results[0].Refresh = r
}

// saveModelPosition stores, once a Model's write has committed, what it
// read of its source under the write's ledger transaction. A position
// that could not be stored (an error logged here, a crash before) makes
// the next run score every row: never one that misses a change.
func (d *Dispatcher) saveModelPosition(ctx context.Context, run *modelRun, results []WriteResult, err error) {
	if err != nil || run.delta == nil || len(results) != 1 || results[0].Replayed() {
		return
	}
	pos := run.delta.Position(results[0].TxnID)
	if pos == "" {
		return
	}
	log := changelog.New(d.cfg.Ledger.Schema())
	err = pgx.BeginFunc(ctx, d.db, func(tx pgx.Tx) error {
		return log.SavePosition(ctx, tx, run.output, run.source, pos)
	})
	if err != nil {
		d.log.WarnContext(ctx, "lakewrite model position not stored: its next run scores every row", "dataset_id", run.output, "error", err)
		return
	}
	d.trimConsumed(ctx, []string{run.source}) // an Iceberg source has no log: a no-op
}

// scope is the scope of an incremental run's replace on the Iceberg arm:
// the output rows of the touched keys.
func (run *modelRun) scope(ctx context.Context, tx pgx.Tx) (*facade.Scope, error) {
	keys, err := run.delta.ScopeKeys(ctx, tx, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("writestrategy: %w", err)
	}
	return &facade.Scope{Columns: []string{model.KeyColumn}, Keys: keys}, nil
}

// replaceScoped replaces the output rows of a model's touched keys (the
// projection's scope) by its rows, appended after the others. The rows
// deleted are recorded as change images (refresh.ImagesCTE), as the rows
// appended are: a reader of the output's changes sees both.
func replaceScoped(ctx context.Context, tx pgx.Tx, ctl string, p projection, enc *rowEncoding, txn any) (int64, error) {
	if _, err := tx.Exec(ctx, `WITH del AS (DELETE FROM `+ctl+`.dataset_rows WHERE dataset_id = $1 AND data ->> '`+model.KeyColumn+`' IN (`+p.scope+`) RETURNING data), `+
		`rec AS (`+refresh.ImagesCTE(ctl, "$1::pg_catalog.text", `SELECT 'D'::"char" AS op, data FROM del`, "(SELECT count(*) FROM del)",
		"(SELECT coalesce(max(row_count), 0) FROM "+ctl+".datasets WHERE id = $1)")+`) SELECT count(*) FROM del`, p.output); err != nil {
		return 0, queryError("replace model rows", err)
	}
	return insertRows(ctx, tx, ctl, p, enc, txn, true)
}
