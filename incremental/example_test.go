package incremental_test

import (
	"fmt"
	"time"

	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
)

func ExampleClampReadMode() {
	ice := sink.Decide(sink.Setting{WriterID: "pipeline.output", DatasetID: "orders_daily", WriterKnown: true,
		Default: sink.Postgres, Max: sink.Iceberg, Override: sink.Iceberg})
	mode, clamped := incremental.ClampReadMode(ice, incremental.ReadDelta)
	fmt.Println(mode, clamped)
	// Output: snapshot true
}

func ExampleSafeHigh() {
	now := time.Date(2026, 7, 4, 12, 0, 10, 0, time.UTC)
	openSince := time.Date(2026, 7, 4, 12, 0, 4, 0, time.UTC) // an intent between its Iceberg and ledger commits
	fmt.Println(incremental.SafeHigh(now, openSince, true, time.Second).Format(time.TimeOnly))
	fmt.Println(incremental.SafeHigh(now, time.Time{}, false, time.Second).Format(time.TimeOnly))
	// Output:
	// 12:00:03
	// 12:00:09
}

func ExampleDeltaPredicate() {
	low := time.Date(2026, 7, 4, 12, 0, 0, 0, time.UTC)
	w := incremental.Window{Low: low, High: low.Add(time.Minute)}
	fmt.Println(incremental.WindowAllowsDelta(w), w)
	p, err := incremental.DeltaPredicate(w, 2, "src", "__created_at")
	fmt.Println(p.SQL, len(p.Args), err)
	// Output:
	// true (2026-07-04T12:00:00Z, 2026-07-04T12:01:00Z]
	// ("src"."__created_at" > $2 AND "src"."__created_at" <= $3) 2 <nil>
}

func ExampleWindow_Next() {
	t0 := time.Date(2026, 7, 4, 12, 0, 0, 0, time.UTC)
	w := incremental.Window{Low: t0, High: t0.Add(time.Second)}
	fmt.Println(w.Next(t0.Add(3 * time.Second)))
	fmt.Println(w.Next(t0).Empty()) // nothing safe to read yet: empty, never backwards
	// Output:
	// (2026-07-04T12:00:01Z, 2026-07-04T12:00:03Z]
	// true
}

func ExampleChooseReadMode() {
	ice := sink.Decide(sink.Setting{WriterID: "pipeline.output", DatasetID: "orders_daily", WriterKnown: true,
		Default: sink.Postgres, Max: sink.Iceberg, Override: sink.Iceberg})
	appended := ledger.Txn{ID: "t1", DatasetID: "orders", Sink: sink.Iceberg, WriteMode: "append", Status: ledger.StatusCommitted}
	src := incremental.Source{DatasetID: "orders", Lives: sink.Iceberg, Txns: []ledger.Txn{appended}, AppendOnly: true}

	// The output's first write on Iceberg is a full rebuild.
	fmt.Println(incremental.ChooseReadMode(incremental.Output{Decision: ice}, incremental.ReadDelta, src))
	// Its next writes read only what the window's append snapshots added.
	fmt.Println(incremental.ChooseReadMode(incremental.Output{Decision: ice, Previous: sink.Iceberg}, incremental.ReadDelta, src))
	// Output:
	// snapshot first write of the Iceberg table: a full rebuild
	// delta
}
