package otelobserver_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
	"github.com/lakewrite/lakewrite/writestrategy/otelobserver"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const writer = "otel.writer"

// env is a Dispatcher on real Postgres and the embedded Iceberg catalog
// (writestrategy.Open), observed by an Observer whose spans and metrics
// go to the SDK's in-memory recorder and manual reader.
type env struct {
	t      *testing.T
	lw     *writestrategy.Stack
	tp     *sdktrace.TracerProvider
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{t: t, spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	e.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(e.reader))
	t.Cleanup(func() {
		_ = e.tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	obs, err := otelobserver.New(&otelobserver.Config{TracerProvider: e.tp, MeterProvider: mp})
	require.NoError(t, err)
	e.lw, err = writestrategy.Open(ctx, pgtest.Pool(t), &writestrategy.OpenConfig{Warehouse: t.TempDir(),
		Dispatch: &writestrategy.DispatchConfig{Workspace: "test", Observer: obs}})
	require.NoError(t, err)
	require.NoError(t, e.lw.Flags.SetWriter(ctx, sink.WriterFlags{WriterID: writer, Default: sink.Iceberg, Max: sink.Iceberg}))
	return e
}

// load writes the rows of selectSQL as the contents of dataset id in the
// row store.
func (e *env) load(id, selectSQL string) {
	e.t.Helper()
	ctx := context.Background()
	_, err := e.lw.Ledger.EnsureDataset(ctx, id, id, nil)
	require.NoError(e.t, err)
	_, err = e.lw.Ledger.WithTx(ctx, ledger.OpenParams{DatasetID: id, WriterID: "seed", Sink: sink.Postgres, WriteMode: facade.Replace},
		func(ctx context.Context, tx pgx.Tx, in *ledger.Intent) (ledger.Outcome, error) {
			if _, err := tx.Exec(ctx, `DELETE FROM lakewrite.dataset_rows WHERE dataset_id = $1`, id); err != nil {
				return ledger.Outcome{}, err
			}
			n, cols, err := writestrategy.RowStoreInsert(ctx, tx, nil, id, in.ID, selectSQL)
			return ledger.Outcome{RowCount: n, CommittedAt: time.Now(), Schema: cols.JSON()}, err
		})
	require.NoError(e.t, err)
}

func (e *env) ensure(ids ...string) {
	e.t.Helper()
	for _, id := range ids {
		_, err := e.lw.Ledger.EnsureDataset(context.Background(), id, id, nil)
		require.NoError(e.t, err)
	}
}

// write runs s under a span of the caller's and returns that span's
// context with the results.
func (e *env) write(s writestrategy.WriteStrategy) (trace.SpanContext, []writestrategy.WriteResult, error) {
	ctx, caller := e.tp.Tracer("test").Start(context.Background(), "caller")
	defer caller.End()
	res, err := e.lw.Dispatcher.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: s})
	return caller.SpanContext(), res, err
}

// trace returns the ended spans of the trace of caller, by name (several
// spans of one name in their end order), and clears nothing.
func (e *env) trace(caller trace.SpanContext) map[string][]sdktrace.ReadOnlySpan {
	out := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range e.spans.Ended() {
		if s.SpanContext().TraceID() == caller.TraceID() {
			out[s.Name()] = append(out[s.Name()], s)
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func has(s sdktrace.ReadOnlySpan, k attribute.Key) bool {
	return attr(s, k).Type() != attribute.EMPTY
}

// phases returns the phase spans ("lakewrite.<phase>") of tr whose parent
// is parent, as "<phase>" or "<phase> <dataset>" for a per-dataset one,
// sorted by start.
func phases(tr map[string][]sdktrace.ReadOnlySpan, parent sdktrace.ReadOnlySpan) []string {
	var ss []sdktrace.ReadOnlySpan
	for name, list := range tr {
		if name == "lakewrite.write" || name == "lakewrite.output" || name == "caller" {
			continue
		}
		for _, s := range list {
			if s.Parent().SpanID() == parent.SpanContext().SpanID() {
				ss = append(ss, s)
			}
		}
	}
	slices.SortFunc(ss, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	var out []string
	for _, s := range ss {
		out = append(out, attr(s, otelobserver.AttrPhase).AsString())
	}
	return out
}

// output returns the output span of dataset id in tr.
func output(t *testing.T, tr map[string][]sdktrace.ReadOnlySpan, id string) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, s := range tr["lakewrite.output"] {
		if attr(s, otelobserver.AttrDatasetID).AsString() == id {
			return s
		}
	}
	t.Fatalf("no output span of %q", id)
	return nil
}

// metrics collects the metrics, by name.
func (e *env) metrics() map[string]metricdata.Metrics {
	e.t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(e.t, e.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// sum is the value of counter name for the attributes kv (exactly).
func sum(t *testing.T, ms map[string]metricdata.Metrics, name string, kv ...attribute.KeyValue) int64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0
	}
	want := attribute.NewSet(kv...)
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		if dp.Attributes.Equals(&want) {
			return dp.Value
		}
	}
	return 0
}

// count is the number of observations of histogram name whose attributes
// include kv.
func count(t *testing.T, ms map[string]metricdata.Metrics, name string, kv ...attribute.KeyValue) uint64 {
	t.Helper()
	var n uint64
	for _, dp := range ms[name].Data.(metricdata.Histogram[float64]).DataPoints {
		ok := true
		for _, a := range kv {
			v, found := dp.Attributes.Value(a.Key)
			ok = ok && found && v == a.Value
		}
		if ok {
			n += dp.Count
		}
	}
	return n
}

var iceberg = otelobserver.AttrSink.String(string(sink.Iceberg))

// A replace of one output and a split pair on Iceberg: the write's span is
// a child of the caller's, one output span per output, the phases under
// the output they concern (both outputs: the write), the attributes and
// the rows, bytes and durations recorded.
func TestReplace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.load("orders", `SELECT g::bigint AS id, (g % 10)::int AS amount FROM generate_series(1, 1000) g`)
	e.ensure("copy", "big", "small")

	caller, res, err := e.write(writestrategy.Transform{Output: "copy", Source: "orders"})
	require.NoError(t, err)
	tr := e.trace(caller)
	require.Len(t, tr["lakewrite.write"], 1)
	w := tr["lakewrite.write"][0]
	require.Equal(t, caller.SpanID(), w.Parent().SpanID(), "the write is a child of the caller's span")
	require.Equal(t, codes.Unset, w.Status().Code)
	require.Equal(t, writer, attr(w, otelobserver.AttrWriterID).AsString())
	require.Equal(t, []string{"copy"}, attr(w, otelobserver.AttrDatasetIDs).AsStringSlice())
	require.Equal(t, "transform", attr(w, otelobserver.AttrStrategy).AsString())
	require.Equal(t, "snapshot", attr(w, otelobserver.AttrReadMode).AsString())
	require.Equal(t, string(sink.Iceberg), attr(w, otelobserver.AttrSink).AsString())
	require.EqualValues(t, 1000, attr(w, otelobserver.AttrRows).AsInt64())
	require.Positive(t, res[0].Bytes)
	require.Equal(t, res[0].Bytes, attr(w, otelobserver.AttrBytes).AsInt64())

	out := output(t, tr, "copy")
	require.Equal(t, w.SpanContext().SpanID(), out.Parent().SpanID())
	require.Equal(t, "replace", attr(out, otelobserver.AttrWriteMode).AsString())
	require.Equal(t, otelobserver.MergeNone, attr(out, otelobserver.AttrMergeMode).AsString())
	require.EqualValues(t, 1000, attr(out, otelobserver.AttrRows).AsInt64())
	require.Equal(t, res[0].Bytes, attr(out, otelobserver.AttrBytes).AsInt64())
	require.Equal(t, res[0].SnapshotID, attr(out, otelobserver.AttrSnapshotID).AsInt64())
	require.Equal(t, res[0].TxnID, attr(out, otelobserver.AttrTxnID).AsString())
	require.False(t, attr(out, otelobserver.AttrReplayed).AsBool())
	// One output: every phase concerns it. On the embedded catalog the
	// snapshot and the intent commit in one transaction (no check phase).
	require.Equal(t, []string{"resolve", "open", "compute", "stream", "catalog_commit", "ledger_commit"}, phases(tr, out))
	require.Empty(t, phases(tr, w))
	stream := tr["lakewrite.stream"][0]
	require.EqualValues(t, 1000, attr(stream, otelobserver.AttrRows).AsInt64())
	require.Equal(t, string(sink.Iceberg), attr(stream, otelobserver.AttrSink).AsString())

	// A split pair: an output span each, the streams under them, the
	// phases of both outputs under the write.
	caller, res, err = e.write(writestrategy.Split{Source: "orders", Predicate: "amount >= 3", Matched: "big", Unmatched: "small"})
	require.NoError(t, err)
	tr = e.trace(caller)
	w = tr["lakewrite.write"][0]
	require.Equal(t, "split", attr(w, otelobserver.AttrStrategy).AsString())
	require.EqualValues(t, 1000, attr(w, otelobserver.AttrRows).AsInt64())
	require.Equal(t, res[0].Bytes+res[1].Bytes, attr(w, otelobserver.AttrBytes).AsInt64())
	require.Len(t, tr["lakewrite.output"], 2)
	big, small := output(t, tr, "big"), output(t, tr, "small")
	require.EqualValues(t, 700, attr(big, otelobserver.AttrRows).AsInt64())
	require.EqualValues(t, 300, attr(small, otelobserver.AttrRows).AsInt64())
	require.Equal(t, []string{"stream"}, phases(tr, big))
	require.Equal(t, []string{"stream"}, phases(tr, small))
	require.Equal(t, []string{"resolve", "open", "compute", "catalog_commit", "ledger_commit"}, phases(tr, w))

	ms := e.metrics()
	replace := []attribute.KeyValue{iceberg, otelobserver.AttrWriteMode.String("replace"), otelobserver.AttrMergeMode.String(otelobserver.MergeNone)}
	require.EqualValues(t, 1000, sum(t, ms, "lakewrite.write.rows", append(replace, otelobserver.AttrStrategy.String("transform"))...))
	require.EqualValues(t, 1000, sum(t, ms, "lakewrite.write.rows", append(replace, otelobserver.AttrStrategy.String("split"))...))
	require.Equal(t, res[0].Bytes+res[1].Bytes, sum(t, ms, "lakewrite.write.bytes", append(replace, otelobserver.AttrStrategy.String("split"))...))
	require.EqualValues(t, 2, count(t, ms, "lakewrite.write.duration", iceberg))
	require.EqualValues(t, 3, count(t, ms, "lakewrite.write.phase.duration", otelobserver.AttrPhase.String("stream"), iceberg))
	require.EqualValues(t, 2, count(t, ms, "lakewrite.write.phase.duration", otelobserver.AttrPhase.String("resolve")))
	require.NotContains(t, ms, "lakewrite.write.errors")
}

// A snapshot_replace run a second time with one row changed merges into
// the table: its output says position deletes (format v2), with the rows
// it preserved, and the rows are counted under that merge mode.
func TestMerge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.load("people", `SELECT g::bigint AS id, 'p' || g AS name FROM generate_series(1, 200) g`)
	e.ensure("people_snap")
	deploy := writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "people", Target: "people_snap", Key: []string{"id"}}

	caller, _, err := e.write(deploy)
	require.NoError(t, err)
	first := output(t, e.trace(caller), "people_snap")
	require.Equal(t, otelobserver.MergeNone, attr(first, otelobserver.AttrMergeMode).AsString(), "a new table: no merge")

	e.load("people", `SELECT g::bigint AS id, CASE WHEN g = 7 THEN 'changed' ELSE 'p' || g END AS name FROM generate_series(1, 200) g`)
	caller, res, err := e.write(deploy)
	require.NoError(t, err)
	require.Equal(t, facade.MergePositionDeletes, res[0].Merge)
	tr := e.trace(caller)
	w := tr["lakewrite.write"][0]
	require.Equal(t, "snapshot_replace", attr(w, otelobserver.AttrStrategy).AsString())
	out := output(t, tr, "people_snap")
	require.Equal(t, "position_deletes", attr(out, otelobserver.AttrMergeMode).AsString())
	require.Equal(t, "replace", attr(out, otelobserver.AttrWriteMode).AsString())
	require.EqualValues(t, 200, attr(out, otelobserver.AttrRows).AsInt64())
	require.EqualValues(t, 199, attr(out, otelobserver.AttrPreserved).AsInt64())
	require.Positive(t, attr(out, otelobserver.AttrBytes).AsInt64(), "the changed row's data file")

	ms := e.metrics()
	snap := otelobserver.AttrStrategy.String("snapshot_replace")
	replace := otelobserver.AttrWriteMode.String("replace")
	require.EqualValues(t, 200, sum(t, ms, "lakewrite.write.rows", iceberg, replace, otelobserver.AttrMergeMode.String("position_deletes"), snap))
	require.EqualValues(t, 200, sum(t, ms, "lakewrite.write.rows", iceberg, replace, otelobserver.AttrMergeMode.String(otelobserver.MergeNone), snap))
	require.Equal(t, res[0].Bytes, sum(t, ms, "lakewrite.write.bytes", iceberg, replace, otelobserver.AttrMergeMode.String("position_deletes"), snap))
}

// A write whose SQL fails: the failing phase and the write record the
// error with status Error and error.type "query", the output is marked
// failed, no later phase starts, nothing is counted as written, and one
// error is counted with the phase it failed in.
func TestFailedWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.load("orders", `SELECT g::bigint AS id FROM generate_series(1, 10) g`)
	e.ensure("bad")

	caller, _, err := e.write(writestrategy.Transform{Output: "bad", Source: "orders", Steps: []writestrategy.Step{{Name: "x", SQL: `SELECT nope FROM source`}}})
	var qe *writestrategy.QueryError
	require.ErrorAs(t, err, &qe)
	require.Equal(t, otelobserver.KindQuery, otelobserver.ErrorKind(err))
	tr := e.trace(caller)
	w := tr["lakewrite.write"][0]
	require.Equal(t, codes.Error, w.Status().Code)
	require.Equal(t, err.Error(), w.Status().Description)
	require.Equal(t, "query", attr(w, otelobserver.AttrErrorType).AsString())
	require.EqualValues(t, 0, attr(w, otelobserver.AttrRows).AsInt64())
	require.Len(t, w.Events(), 1)
	require.Equal(t, "exception", w.Events()[0].Name)

	out := output(t, tr, "bad")
	require.Equal(t, codes.Error, out.Status().Code)
	require.Equal(t, "query", attr(out, otelobserver.AttrErrorType).AsString())
	require.False(t, has(out, otelobserver.AttrWriteMode), "no result: no write mode")
	require.Equal(t, []string{"resolve", "open", "compute"}, phases(tr, out))
	compute := tr["lakewrite.compute"][0]
	require.Equal(t, codes.Error, compute.Status().Code)
	require.Equal(t, "query", attr(compute, otelobserver.AttrErrorType).AsString())
	require.Equal(t, codes.Unset, tr["lakewrite.open"][0].Status().Code)

	ms := e.metrics()
	require.NotContains(t, ms, "lakewrite.write.rows")
	require.EqualValues(t, 1, sum(t, ms, "lakewrite.write.errors", iceberg, otelobserver.AttrStrategy.String("transform"),
		otelobserver.AttrPhase.String("compute"), otelobserver.AttrErrorType.String("query")))
	require.EqualValues(t, 1, count(t, ms, "lakewrite.write.duration", otelobserver.AttrErrorType.String("query")))
	require.EqualValues(t, 1, count(t, ms, "lakewrite.write.phase.duration", otelobserver.AttrPhase.String("compute"), otelobserver.AttrErrorType.String("query")))
	require.EqualValues(t, 1, count(t, ms, "lakewrite.write.phase.duration", otelobserver.AttrPhase.String("open")))
	require.Zero(t, count(t, ms, "lakewrite.write.phase.duration", otelobserver.AttrPhase.String("stream")))
}

// ErrorKind classifies by the packages' sentinel errors, wrapped or not,
// causes before the consequences they also match.
func TestErrorKind(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("commit: %w", facade.ErrCommitConflict), otelobserver.KindConflict},
		{fmt.Errorf("%w: %w", ledger.ErrOutcomeUnknown, facade.ErrCommitStateUnknown), otelobserver.KindCommitStateUnknown},
		{fmt.Errorf("ledger commit: %w", ledger.ErrOutcomeUnknown), otelobserver.KindOutcomeUnknown},
		{fmt.Errorf("%w: %w", writestrategy.ErrConnectionLost, ledger.ErrOutcomeUnknown), otelobserver.KindConnectionLost},
		{fmt.Errorf("%w: statement_timeout: %w", writestrategy.ErrServerTimeout, ledger.ErrLostHold), otelobserver.KindServerTimeout},
		{fmt.Errorf("x: %w", writestrategy.ErrSinkChanged), otelobserver.KindSinkChanged},
		{writestrategy.ErrPartitionKey, otelobserver.KindInvalid},
		{fmt.Errorf("open: %w", context.Canceled), otelobserver.KindCanceled},
		{sink.ErrMixedPair, otelobserver.KindSinkConfig},
		{fmt.Errorf("plain"), otelobserver.KindOther},
	} {
		require.Equal(t, c.want, otelobserver.ErrorKind(c.err), "%v", c.err)
	}
}
