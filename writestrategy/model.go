package writestrategy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental/model"
)

// kindModel names the Model strategy.
const kindModel Kind = "model"

// defaultModelWindow is a Model's window size when Window is zero.
const defaultModelWindow = 10_000

// Model writes, for each row of a source, the rows a Go function computes
// from it: an output correlated with its source row by the column
// model.KeyColumn ("__source_row_key"), which holds the source row's Key
// values (see package model for the encoding). The function (Func) is
// called on windows of Window source rows (the key column, then Columns),
// up to Concurrency windows at a time, each under Deadline, and returns
// the output rows of its window: Schema's columns plus the key, zero, one
// or several rows per source row. The output's columns are model.KeyColumn
// then Schema's, known before the first window.
//
// A Model is written through Dispatcher.Write like any strategy (intent,
// flags, both sinks, one snapshot, identity columns, recovery, shadow,
// Verify). The windows' output rows are copied (COPY, one window at a
// time) into a temporary table of the write's transaction, which the write
// then reads as its output: memory holds the windows in flight, whatever
// the source's size. A failing, panicking or late window fails the write
// with a *model.WindowError naming it; nothing is written.
//
// Verify re-scores every source row and compares checksums: parity holds
// for a deterministic function. A function that is not deterministic (a
// sampled model, a service whose answers change) has no parity to check
// beyond the keys; compare the outputs' keys instead.
type Model struct {
	Output string
	Source string
	// Key are the source's columns identifying a row; their values
	// become model.KeyColumn.
	Key []string
	// Columns are the source columns passed to the function after the
	// key (none: the key only).
	Columns []string
	// Schema declares the output columns besides model.KeyColumn.
	Schema *arrow.Schema
	// Func computes a window's output rows.
	Func model.Func
	// Window is the number of source rows per call (default 10,000).
	Window int
	// Concurrency is the number of windows scored at a time (default 1).
	Concurrency int
	// Deadline bounds each call (0: none); a window past it fails the write.
	Deadline time.Duration
}

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

// sourcePlanner is a strategy planned once its sources are resolved, with
// the write's transaction (prepare calls it instead of plan).
type sourcePlanner interface {
	planSources(ctx context.Context, tx pgx.Tx, env *Env, pc *planContext) ([]projection, error)
}

// check refuses a model that cannot run, before anything is read.
func (m Model) check() error {
	if err := checkDatasetID("output", m.Output); err != nil {
		return err
	}
	switch {
	case m.Func == nil:
		return fmt.Errorf("%w: model %q has no Func", ErrInvalid, m.Output)
	case m.Schema == nil || m.Schema.NumFields() == 0:
		return fmt.Errorf("%w: model %q declares no output column (Schema)", ErrInvalid, m.Output)
	case len(m.Key) == 0:
		return fmt.Errorf("%w: model %q has no Key", ErrInvalid, m.Output)
	case m.Window < 0 || m.Concurrency < 0 || m.Deadline < 0:
		return fmt.Errorf("%w: model %q has a negative Window, Concurrency or Deadline", ErrInvalid, m.Output)
	}
	for _, f := range m.Schema.Fields() {
		if f.Name == model.KeyColumn {
			return fmt.Errorf("%w: model %q declares %s, which it writes itself", ErrInvalid, m.Output, model.KeyColumn)
		}
	}
	_, _, err := loadColumns(m.Schema)
	return err
}

// planSources scores the source into a temporary table of tx and plans
// the output as that table's rows.
func (m Model) planSources(ctx context.Context, tx pgx.Tx, env *Env, pc *planContext) ([]projection, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	src, err := pc.source(m.Source)
	if err != nil {
		return nil, err
	}
	keySQL, err := m.keySQL(src.schema)
	if err != nil {
		return nil, err
	}
	for _, c := range m.Columns {
		if !src.schema.has(c) {
			return nil, fmt.Errorf("%w: model %q passes column %q, which source %q does not have", ErrInvalid, m.Output, c, m.Source)
		}
	}
	in, out := modelTable("in"), modelTable("out")
	b := newBuilder(nil)
	cols := ""
	if len(m.Columns) > 0 {
		cols = ", " + strings.Join(quoteIdents(m.Columns), ", ")
	}
	sql := "CREATE TEMP TABLE " + in + ` ON COMMIT DROP AS SELECT row_number() OVER (ORDER BY s."__ord") AS "__w", ` +
		keySQL + ` AS "__source_row_key"` + cols + " FROM " + src.render(b) + " s"
	tag, err := tx.Exec(ctx, sql, b.args...)
	if err != nil {
		return nil, queryError("model "+m.Output+": read source", err)
	}
	total := tag.RowsAffected()
	if _, err := tx.Exec(ctx, "CREATE INDEX ON "+in+` ("__w")`); err != nil {
		return nil, queryError("model "+m.Output+": index source rows", err)
	}
	if err := m.score(ctx, tx, env, in, out, total); err != nil {
		return nil, err
	}
	names := append([]string{model.KeyColumn}, (Schema{Columns: schemaColumns(m.Schema)}).names()...)
	p := projection{output: m.Output, kind: kindModel, sql: "SELECT " + strings.Join(quoteIdents(names), ", ") + " FROM " + out + ` ORDER BY "__ord"`}
	p.mode = facade.Replace
	return []projection{p}, nil
}

// keySQL is the expression of model.KeyColumn over the source's columns.
func (m Model) keySQL(s Schema) (string, error) {
	exprs := make([]string, len(m.Key))
	types := make([]string, len(m.Key))
	for i, k := range m.Key {
		j := slices.IndexFunc(s.Columns, func(c Column) bool { return c.Name == k })
		if j < 0 {
			return "", fmt.Errorf("%w: model %q has key column %q, which source %q does not have", ErrInvalid, m.Output, k, m.Source)
		}
		exprs[i], types[i] = "s."+quoteIdents([]string{k})[0], s.Columns[j].Type
	}
	sql, err := model.KeySQL(exprs, types)
	if err != nil {
		return "", fmt.Errorf("%w: model %q: %w", ErrInvalid, m.Output, err)
	}
	return sql, nil
}

// score runs the function over the rows of table in, window by window,
// and copies its output into a new temporary table out.
func (m Model) score(ctx context.Context, tx pgx.Tx, env *Env, in, out string, total int64) error {
	defs, names, err := loadColumns(m.Schema)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "CREATE TEMP TABLE "+out+` ("__source_row_key" pg_catalog.text, `+strings.Join(defs, ", ")+`, "__ord" bigint) ON COMMIT DROP`); err != nil {
		return queryError("model "+m.Output, err)
	}
	window := int64(m.Window)
	if window == 0 {
		window = defaultModelWindow
	}
	cols := strings.Join(quoteIdents(append([]string{model.KeyColumn}, m.Columns...)), ", ")
	readSQL := "SELECT " + cols + " FROM " + in + ` WHERE "__w" > $1 AND "__w" <= $2 ORDER BY "__w"`
	schema := model.OutputSchema(m.Schema)
	copyCols := append(append([]string{model.KeyColumn}, names...), "__ord")
	var from, ord int64
	r := &model.Runner{Func: m.Func, Concurrency: m.Concurrency, Deadline: m.Deadline, Schema: schema, Total: total}
	if env.modelProgress != nil {
		r.Progress = func(ev model.WindowEvent) { env.modelProgress(m.Output, ev) }
	}
	read := func() (arrow.RecordBatch, error) {
		if from >= total {
			return nil, nil
		}
		rec, err := readWindow(ctx, tx, readSQL, from, from+window, int(window))
		from += window
		if err != nil {
			return nil, fmt.Errorf("writestrategy: model %q: read window: %w", m.Output, err)
		}
		return rec, nil
	}
	write := func(rec arrow.RecordBatch) error {
		// The runner checked the names and types; loadRows compares whole
		// schemas.
		src := &loadRows{next: single(rec), schema: rec.Schema(), output: m.Output, ord: ord}
		defer src.release()
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"pg_temp", strings.TrimPrefix(out, "pg_temp.")}, copyCols, src)
		if src.panicked != nil {
			return fmt.Errorf("%w: model %q: %v", model.ErrOutput, m.Output, src.panicked.value)
		}
		if src.err != nil {
			return src.err
		}
		if err != nil {
			return queryError("model "+m.Output+": write window", err)
		}
		ord = src.ord
		return nil
	}
	if _, err := r.Run(ctx, read, write); err != nil {
		return fmt.Errorf("writestrategy: model %q: %w", m.Output, err)
	}
	return nil
}

// readWindow reads the rows of one window as one record batch (nil when
// it has none).
func readWindow(ctx context.Context, tx pgx.Tx, sql string, from, to int64, size int) (arrow.RecordBatch, error) {
	st, err := cursor.Batches(ctx, tx, sql, []any{from, to}, &cursor.Options{BatchSize: size})
	if err != nil {
		return nil, err
	}
	var out arrow.RecordBatch
	for rec, err := range st.All() {
		if err != nil {
			if out != nil {
				out.Release()
			}
			return nil, err
		}
		if out != nil { // one window is one batch: BatchSize is its size
			rec.Release()
			out.Release()
			return nil, fmt.Errorf("%w: a window of %d rows came in more than one batch", ErrInvalid, size)
		}
		out = rec
	}
	return out, nil
}

// single yields one borrowed record batch, then ends.
func single(rec arrow.RecordBatch) func() (arrow.RecordBatch, error, bool) {
	done := false
	return func() (arrow.RecordBatch, error, bool) {
		if done {
			return nil, nil, false
		}
		done = true
		return rec, nil, true
	}
}

// modelTable names a new temporary table of a model's write.
func modelTable(what string) string {
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	return "pg_temp.lw_model_" + what + "_" + hex.EncodeToString(suffix[:])
}

// schemaColumns lists an Arrow schema's field names as columns.
func schemaColumns(s *arrow.Schema) []Column {
	out := make([]Column, s.NumFields())
	for i, f := range s.Fields() {
		out[i] = Column{Name: f.Name}
	}
	return out
}

// ModelWindowEvent reports one window of a Model scored (see
// model.WindowEvent), to an Observer with a ModelWindow method.
type ModelWindowEvent struct {
	DatasetID string
	model.WindowEvent
}

// modelObserver is an Observer that also sees each window a Model scores,
// in window order, on the goroutine calling Write, under the context Write
// was called with.
type modelObserver interface {
	Observer
	ModelWindow(ctx context.Context, ev ModelWindowEvent)
}

// modelProgress returns the window callback of a write, nil when the
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
