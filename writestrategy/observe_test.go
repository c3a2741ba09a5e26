package writestrategy_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

type ctxKey struct{}

// recorder is an Observer recording the phases it sees, as
// "start phase ids" and "end phase ids rows=N [err]", and the progress.
type recorder struct {
	mu       sync.Mutex
	events   []string
	ends     []writestrategy.PhaseEvent
	progress []writestrategy.ProgressEvent
	bad      []string // calls that broke the contract
}

func (r *recorder) PhaseStart(ctx context.Context, ev writestrategy.PhaseEvent) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ev.Duration != 0 || ev.Err != nil || ev.Rows != 0 || ev.WriterID != writer {
		r.bad = append(r.bad, fmt.Sprintf("start %+v", ev))
	}
	r.events = append(r.events, fmt.Sprintf("start %s %s", ev.Phase, strings.Join(ev.DatasetIDs, ",")))
	return context.WithValue(ctx, ctxKey{}, ev.Phase) // a span would go here
}

func (r *recorder) PhaseEnd(ctx context.Context, ev writestrategy.PhaseEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ctx.Value(ctxKey{}) != ev.Phase || ev.Duration <= 0 || ev.WriterID != writer {
		r.bad = append(r.bad, fmt.Sprintf("end %+v (ctx %v)", ev, ctx.Value(ctxKey{})))
	}
	s := fmt.Sprintf("end %s %s rows=%d", ev.Phase, strings.Join(ev.DatasetIDs, ","), ev.Rows)
	if ev.Err != nil {
		s += " err"
	}
	r.events = append(r.events, s)
	r.ends = append(r.ends, ev)
}

func (r *recorder) Progress(ctx context.Context, ev writestrategy.ProgressEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ctx.Value(ctxKey{}) != writestrategy.PhaseStream {
		r.bad = append(r.bad, fmt.Sprintf("progress %+v outside the stream phase", ev))
	}
	r.progress = append(r.progress, ev)
}

func (r *recorder) take(t *testing.T) []string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Empty(t, r.bad)
	ev := r.events
	r.events, r.ends = nil, nil
	return ev
}

func (w *world) observed(rec writestrategy.Observer) *writestrategy.Dispatcher {
	w.t.Helper()
	d, err := writestrategy.NewDispatcher(w.pool, &writestrategy.DispatchConfig{Ledger: w.ledger, Resolver: w.resolver,
		Lakehouse: w.lake, Workspace: "test", Observer: rec})
	require.NoError(w.t, err)
	return d
}

func observedWrite(d *writestrategy.Dispatcher, s writestrategy.WriteStrategy) ([]writestrategy.WriteResult, error) {
	return d.Write(context.Background(), writestrategy.Request{WriterID: writer, Strategy: s})
}

// The observer sees every phase of a write in order, on both arms, with
// the rows each wrote, and the progress of the streams.
func TestObserverPhases(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil) // the SQL catalog: table-by-table commits
	seedWorld(t, w, 3000)
	ensureOutputs(t, w.pool, "pg_out", "ice_out", "big", "small")
	w.iceberg("ice_out", "big", "small")
	rec := &recorder{}
	d := w.observed(rec)
	tr := func(out string) writestrategy.WriteStrategy {
		return writestrategy.Transform{Output: out, Source: "orders"}
	}

	_, err := observedWrite(d, tr("pg_out"))
	require.NoError(t, err)
	require.Equal(t, []string{
		"start write pg_out",
		"start resolve pg_out", "end resolve pg_out rows=0",
		"start open pg_out", "end open pg_out rows=0",
		"start apply pg_out", "end apply pg_out rows=3000",
		"start ledger_commit pg_out", "end ledger_commit pg_out rows=3000",
		"end write pg_out rows=3000",
	}, rec.take(t))

	_, err = observedWrite(d, tr("ice_out"))
	require.NoError(t, err)
	require.Equal(t, []string{
		"start write ice_out",
		"start resolve ice_out", "end resolve ice_out rows=0",
		"start open ice_out", "end open ice_out rows=0",
		"start compute ice_out", "end compute ice_out rows=0",
		"start stream ice_out", "end stream ice_out rows=3000",
		"start check ice_out", "end check ice_out rows=0",
		"start catalog_commit ice_out", "end catalog_commit ice_out rows=3000",
		"start ledger_commit ice_out", "end ledger_commit ice_out rows=3000",
		"end write ice_out rows=3000",
	}, rec.take(t))
	// Progress: rows so far, growing to the output's rows.
	require.NotEmpty(t, rec.progress)
	var last int64
	for _, p := range rec.progress {
		require.Equal(t, "ice_out", p.DatasetID)
		require.Greater(t, p.Rows, last)
		last = p.Rows
	}
	require.EqualValues(t, 3000, last)

	// A split pair on this catalog: staged both, checked both, then
	// committed table by table.
	_, err = observedWrite(d, writestrategy.Split{Source: "orders", Predicate: "amount > 1000", Matched: "big", Unmatched: "small"})
	require.NoError(t, err)
	require.Equal(t, []string{
		"start write big,small",
		"start resolve big,small", "end resolve big,small rows=0",
		"start open big,small", "end open big,small rows=0",
		"start compute big,small", "end compute big,small rows=0",
		"start stream big", "end stream big rows=2200",
		"start stream small", "end stream small rows=800",
		"start check big,small", "end check big,small rows=0",
		"start catalog_commit big", "end catalog_commit big rows=2200",
		"start ledger_commit big", "end ledger_commit big rows=2200",
		"start catalog_commit small", "end catalog_commit small rows=800",
		"start ledger_commit small", "end ledger_commit small rows=800",
		"end write big,small rows=3000",
	}, rec.take(t))
}

// On the Postgres catalog a split pair's pointer swaps and ledger commits
// are one transaction: one catalog and one ledger commit phase for both.
func TestObserverSplitInTx(t *testing.T) {
	t.Parallel()
	w := newPGWorld(t, nil, nil)
	seedWorld(t, w.world, 3000)
	ensureOutputs(t, w.pool, "big", "small")
	w.iceberg("big", "small")
	rec := &recorder{}
	d := w.observed(rec)
	_, err := observedWrite(d, writestrategy.Split{Source: "orders", Predicate: "amount > 1000", Matched: "big", Unmatched: "small"})
	require.NoError(t, err)
	ends := rec.ends
	require.Equal(t, []string{
		"start write big,small",
		"start resolve big,small", "end resolve big,small rows=0",
		"start open big,small", "end open big,small rows=0",
		"start compute big,small", "end compute big,small rows=0",
		"start stream big", "end stream big rows=2200",
		"start stream small", "end stream small rows=800",
		"start catalog_commit big,small", "end catalog_commit big,small rows=3000",
		"start ledger_commit big,small", "end ledger_commit big,small rows=3000",
		"end write big,small rows=3000",
	}, rec.take(t))
	for _, ev := range ends {
		require.Equal(t, sink.Iceberg, ev.Sink, ev.Phase) // resolved by every end
		require.Equal(t, writestrategy.Kind("split"), ev.Strategy)
		require.Equal(t, incremental.ReadSnapshot, ev.ReadMode)
	}
	// The write's end carries the results Write returned, with the bytes
	// each output added.
	last := ends[len(ends)-1]
	require.Equal(t, writestrategy.PhaseWrite, last.Phase)
	require.Len(t, last.Results, 2)
	for _, r := range last.Results {
		require.Positive(t, r.Bytes, r.DatasetID)
		require.Equal(t, facade.MergeNone, r.Merge)
		require.False(t, r.Replayed())
	}
	for _, ev := range ends[:len(ends)-1] {
		require.Nil(t, ev.Results, ev.Phase)
	}
}

// A failing write ends the failing phase and the write with the error,
// and starts no later phase.
func TestObserverFailingWrite(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	seedWorld(t, w, 100)
	ensureOutputs(t, w.pool, "bad_pg", "bad_ice", "div_ice")
	w.iceberg("bad_ice", "div_ice")
	rec := &recorder{}
	d := w.observed(rec)
	bad := func(out string) writestrategy.WriteStrategy {
		return writestrategy.Transform{Output: out, Source: "orders", Steps: []writestrategy.Step{{Name: "x", SQL: `SELECT nope FROM source`}}}
	}

	_, err := observedWrite(d, bad("bad_pg"))
	require.Error(t, err)
	ends := rec.ends
	require.Equal(t, []string{
		"start write bad_pg",
		"start resolve bad_pg", "end resolve bad_pg rows=0",
		"start open bad_pg", "end open bad_pg rows=0",
		"start apply bad_pg", "end apply bad_pg rows=0 err",
		"end write bad_pg rows=0 err",
	}, rec.take(t))
	require.ErrorIs(t, err, ends[len(ends)-1].Err)

	_, err = observedWrite(d, bad("bad_ice"))
	require.Error(t, err)
	require.Equal(t, []string{
		"start write bad_ice",
		"start resolve bad_ice", "end resolve bad_ice rows=0",
		"start open bad_ice", "end open bad_ice rows=0",
		"start compute bad_ice", "end compute bad_ice rows=0 err",
		"end write bad_ice rows=0 err",
	}, rec.take(t))

	// A value error while the rows stream fails the stream phase.
	_, err = observedWrite(d, writestrategy.Transform{Output: "div_ice", Source: "orders", Steps: []writestrategy.Step{
		{Name: "x", SQL: `SELECT id, 1 / (id - 90) AS inv FROM source`}}})
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "22012", pgErr.Code) // division_by_zero
	require.Equal(t, []string{
		"start write div_ice",
		"start resolve div_ice", "end resolve div_ice rows=0",
		"start open div_ice", "end open div_ice rows=0",
		"start compute div_ice", "end compute div_ice rows=0",
		"start stream div_ice", "end stream div_ice rows=0 err",
		"end write div_ice rows=0 err",
	}, rec.take(t))
}
