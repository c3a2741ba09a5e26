package sink_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/lakewrite/lakewrite/sink"
)

func ExampleDecide() {
	// pipeline.output: default pg, ceiling raised to iceberg_native, one
	// dataset flipped as a canary.
	d := sink.Decide(sink.Setting{
		WriterID: "pipeline.output", DatasetID: "orders_daily", WriterKnown: true,
		Default: sink.Postgres, Max: sink.Iceberg, Override: sink.Iceberg,
	})
	fmt.Println(d.Sink, d.Clamped, d.Reason)

	// The kill switch: ceiling lowered back to pg; the override is capped.
	d = sink.Decide(sink.Setting{
		WriterID: "pipeline.output", DatasetID: "orders_daily", WriterKnown: true,
		Default: sink.Postgres, Max: sink.Postgres, Override: sink.Iceberg,
	})
	fmt.Println(d.Sink, d.Clamped)

	// A writer nobody registered: safe default.
	d = sink.Decide(sink.Setting{WriterID: "sync.new", DatasetID: "contacts"})
	fmt.Println(d.Sink, d.Source)
	// Output:
	// iceberg_native false override for dataset "orders_daily": iceberg_native
	// pg true
	// pg unknown_writer
}

func ExampleRowSink_Run() {
	rs := sink.RowSink[int64]{
		Postgres: func(context.Context) (int64, error) { return 42, nil }, // INSERT INTO dataset_rows ...
		// No Iceberg arm yet.
	}
	ctx := context.Background()
	pg := sink.Decide(sink.Setting{WriterID: "pipeline.output", DatasetID: "a", WriterKnown: true, Default: sink.Postgres, Max: sink.Iceberg})
	n, err := rs.Run(ctx, pg)
	fmt.Println(n, err)

	ice := sink.Decide(sink.Setting{WriterID: "pipeline.output", DatasetID: "b", WriterKnown: true, Default: sink.Iceberg, Max: sink.Iceberg})
	_, err = rs.Run(ctx, ice)
	fmt.Println(errors.Is(err, sink.ErrMissingArm))
	// Output:
	// 42 <nil>
	// true
}

func ExamplePair() {
	set := func(ds string, m sink.Sink) sink.Decision {
		return sink.Decide(sink.Setting{WriterID: "pipeline.output", DatasetID: ds, WriterKnown: true, Default: sink.Postgres, Max: sink.Iceberg, Override: m})
	}
	p, err := sink.Pair(set("matched", sink.Iceberg), set("unmatched", sink.Iceberg))
	fmt.Println(p.Sink, err)
	_, err = sink.Pair(set("matched", sink.Iceberg), set("unmatched", sink.Postgres))
	fmt.Println(errors.Is(err, sink.ErrMixedPair))
	// Output:
	// iceberg_native <nil>
	// true
}
