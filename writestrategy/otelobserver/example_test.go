package otelobserver_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
	"github.com/lakewrite/lakewrite/writestrategy/otelobserver"
)

// Wiring the Observer into a service: its own providers (here the SDK's,
// exporting wherever the service sends traces and metrics), and the
// Observer in the Dispatcher's configuration. Every Write then joins the
// trace of the context it is given.
func ExampleNew() {
	ctx := context.Background()
	tp := sdktrace.NewTracerProvider() // with the service's exporter
	defer tp.Shutdown(ctx)
	mp := sdkmetric.NewMeterProvider() // with the service's reader
	defer mp.Shutdown(ctx)
	obs, err := otelobserver.New(&otelobserver.Config{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		panic(err)
	}

	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	lw, err := writestrategy.Open(ctx, pool, &writestrategy.OpenConfig{
		Warehouse: "s3://bucket/warehouse",
		Dispatch:  &writestrategy.DispatchConfig{Workspace: "analytics", Observer: obs},
	})
	if err != nil {
		panic(err)
	}

	ctx, span := tp.Tracer("analytics").Start(ctx, "daily job")
	defer span.End()
	_, err = lw.Dispatcher.Write(ctx, writestrategy.Request{ // a child span of "daily job"
		WriterID: "analytics.daily",
		Strategy: writestrategy.Transform{Output: "visits_by_page", Source: "visits"},
	})
	if err != nil {
		panic(err)
	}
}

// The spans and the rows metric of one write, with the Observer called as
// a Dispatcher calls it for a split pair written to Iceberg (here by hand,
// so that the example runs without a database).
func Example() {
	ctx := context.Background()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	obs, err := otelobserver.New(&otelobserver.Config{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		panic(err)
	}

	// Dispatcher.Write: the write, its phases, then the write's end with
	// the results.
	ev := writestrategy.PhaseEvent{WriterID: "jobs.split", Strategy: "split", ReadMode: "snapshot", DatasetIDs: []string{"big", "small"}}
	phase := func(ctx context.Context, p writestrategy.Phase, ids ...string) {
		e := ev
		e.Phase, e.DatasetIDs, e.Sink = p, ids, sink.Iceberg
		pctx := obs.PhaseStart(ctx, e)
		e.Duration = time.Millisecond
		obs.PhaseEnd(pctx, e)
	}
	ev.Phase = writestrategy.PhaseWrite
	wctx := obs.PhaseStart(ctx, ev)
	phase(wctx, "resolve", "big", "small")
	phase(wctx, "open", "big", "small")
	phase(wctx, "compute", "big", "small")
	phase(wctx, writestrategy.PhaseStream, "big")
	phase(wctx, writestrategy.PhaseStream, "small")
	phase(wctx, "catalog_commit", "big", "small")
	phase(wctx, "ledger_commit", "big", "small")
	ev.Sink, ev.Duration, ev.Rows = sink.Iceberg, 10*time.Millisecond, 1000
	ev.Results = []writestrategy.WriteResult{
		{DatasetID: "big", Sink: sink.Iceberg, Mode: facade.Replace, Rows: 700, Bytes: 5600},
		{DatasetID: "small", Sink: sink.Iceberg, Mode: facade.Replace, Rows: 300, Bytes: 2400},
	}
	obs.PhaseEnd(wctx, ev)

	// The span tree (each span's children in the order they ended).
	children := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	var root sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if !s.Parent().IsValid() {
			root = s
		}
		children[s.Parent().SpanID()] = append(children[s.Parent().SpanID()], s)
	}
	var print func(s sdktrace.ReadOnlySpan, depth int)
	print = func(s sdktrace.ReadOnlySpan, depth int) {
		line := strings.Repeat("  ", depth) + s.Name()
		for _, kv := range s.Attributes() {
			if s.Name() == "lakewrite.output" && (kv.Key == otelobserver.AttrDatasetID || kv.Key == otelobserver.AttrMergeMode || kv.Key == otelobserver.AttrRows) {
				line += " " + kv.Value.String()
			}
		}
		fmt.Println(line)
		for _, c := range children[s.SpanContext().SpanID()] {
			print(c, depth+1)
		}
	}
	print(root, 0)

	// The rows metric.
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name == "lakewrite.write.rows" {
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				mode, _ := dp.Attributes.Value(attribute.Key("lakewrite.write_mode"))
				fmt.Println(m.Name, mode.AsString(), dp.Value)
			}
		}
	}
	// Output:
	// lakewrite.write
	//   lakewrite.resolve
	//   lakewrite.open
	//   lakewrite.compute
	//   lakewrite.catalog_commit
	//   lakewrite.ledger_commit
	//   lakewrite.output big none 700
	//     lakewrite.stream
	//   lakewrite.output small none 300
	//     lakewrite.stream
	// lakewrite.write.rows replace 1000
}
