package incremental_test

import (
	"fmt"
	"time"

	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
)

// A window is the half-open interval (Low, High] of ledger commit times a
// delta reader consumes; a reader without a watermark starts at -inf.
func ExampleWindow() {
	t0 := time.Date(2026, 7, 4, 12, 0, 0, 0, time.UTC)
	fmt.Println(incremental.Window{High: t0})
	fmt.Println(incremental.Window{Low: t0, High: t0.Add(time.Minute)})
	// Output:
	// (-inf, 2026-07-04T12:00:00Z]
	// (2026-07-04T12:00:00Z, 2026-07-04T12:01:00Z]
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

// A source read from the row store is read whole when a window transaction
// wrote its rows to Iceberg: the row store holds none of them.
func ExampleChooseReadMode_rowStore() {
	pg := sink.Decide(sink.Setting{WriterID: "pipeline.output", DatasetID: "orders_daily", WriterKnown: true,
		Default: sink.Postgres, Max: sink.Iceberg})
	out := incremental.Output{Decision: pg, Previous: sink.Postgres}
	onPG := ledger.Txn{ID: "t1", DatasetID: "orders", Sink: sink.Postgres, WriteMode: "append", Status: ledger.StatusCommitted}
	onIce := ledger.Txn{ID: "t2", DatasetID: "orders", Sink: sink.Iceberg, WriteMode: "append", Status: ledger.StatusCommitted}

	fmt.Println(incremental.ChooseReadMode(out, incremental.ReadDelta,
		incremental.Source{DatasetID: "orders", Lives: sink.Postgres, Txns: []ledger.Txn{onPG, onIce}}))
	fmt.Println(incremental.ChooseReadMode(out, incremental.ReadDelta,
		incremental.Source{DatasetID: "orders", Lives: sink.Postgres, Txns: []ledger.Txn{onPG}}))
	// Output:
	// snapshot transaction t2 of "orders" was written to iceberg_native, not to the row store the source is read from
	// delta
}
