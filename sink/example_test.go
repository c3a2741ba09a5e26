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

// overrides is a sink.Lookuper answering from memory, for the example: every
// writer defaults to pg with a max of iceberg_native, and a dataset may have
// an override. A *sink.Flags reads the same settings from Postgres.
type overrides map[string]sink.Sink

func (o overrides) Lookup(_ context.Context, writerID string, datasetIDs ...string) ([]sink.Setting, error) {
	ss := make([]sink.Setting, len(datasetIDs))
	for i, id := range datasetIDs {
		ss[i] = sink.Setting{WriterID: writerID, DatasetID: id, WriterKnown: true,
			Default: sink.Postgres, Max: sink.Iceberg, Override: o[id]}
	}
	return ss, nil
}

func ExampleResolver_ResolvePair() {
	ctx := context.Background()
	flags := overrides{"matched": sink.Iceberg, "unmatched": sink.Iceberg}
	r, err := sink.NewResolver(flags, nil)
	if err != nil {
		panic(err)
	}
	// Both outputs of the split flipped together.
	p, err := r.ResolvePair(ctx, "pipeline.output", "matched", "unmatched")
	fmt.Println(p.First.Sink, p.Second.Sink, err)

	// One output flipped alone: refused, nothing to run.
	delete(flags, "unmatched")
	r.Invalidate()
	_, err = r.ResolvePair(ctx, "pipeline.output", "matched", "unmatched")
	fmt.Println(errors.Is(err, sink.ErrMixedPair))
	// Output:
	// iceberg_native iceberg_native <nil>
	// true
}
