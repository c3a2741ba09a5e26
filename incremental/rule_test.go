package incremental_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
)

func TestChooseReadMode(t *testing.T) {
	t.Parallel()
	pg, ice := decision(sink.Postgres), decision(sink.Iceberg)
	txn := func(id string, s sink.Sink, mode facade.WriteMode) ledger.Txn {
		return ledger.Txn{ID: id, DatasetID: "up", Sink: s, WriteMode: mode, Status: ledger.StatusCommitted}
	}
	pgApp, pgRep := txn("a", sink.Postgres, facade.Append), txn("b", sink.Postgres, facade.Replace)
	iceApp, iceRep := txn("c", sink.Iceberg, facade.Append), txn("d", sink.Iceberg, facade.Replace)
	open := pgApp
	open.Status = ledger.StatusOpen
	maint := iceApp
	maint.WriteMode = ledger.Maintenance
	other := pgApp
	other.DatasetID = "elsewhere"

	onPG := incremental.Output{Decision: pg, Previous: sink.Postgres}
	onIce := incremental.Output{Decision: ice, Previous: sink.Iceberg}
	rowStore := func(txns ...ledger.Txn) incremental.Source {
		return incremental.Source{DatasetID: "up", Lives: sink.Postgres, Txns: txns}
	}
	native := func(appendOnly bool, txns ...ledger.Txn) incremental.Source {
		return incremental.Source{DatasetID: "up", Lives: sink.Iceberg, Txns: txns, AppendOnly: appendOnly}
	}
	cases := []struct {
		name string
		out  incremental.Output
		req  incremental.ReadMode
		src  incremental.Source
		want incremental.ReadMode
	}{
		{"snapshot requested", onIce, incremental.ReadSnapshot, native(true, iceApp), incremental.ReadSnapshot},
		{"empty mode is a snapshot", onPG, "", rowStore(pgApp), incremental.ReadSnapshot},
		{"unresolved sink", incremental.Output{Previous: sink.Postgres}, incremental.ReadDelta, rowStore(pgApp), incremental.ReadSnapshot},
		{"row store to Postgres", onPG, incremental.ReadDelta, rowStore(pgApp, pgRep), incremental.ReadDelta},
		{"row store to Iceberg", onIce, incremental.ReadDelta, rowStore(pgApp), incremental.ReadDelta},
		{"first Postgres write", incremental.Output{Decision: pg}, incremental.ReadDelta, rowStore(pgApp), incremental.ReadDelta},
		{"first Iceberg write", incremental.Output{Decision: ice}, incremental.ReadDelta, rowStore(pgApp), incremental.ReadSnapshot},
		{"flip to Iceberg", incremental.Output{Decision: ice, Previous: sink.Postgres}, incremental.ReadDelta, rowStore(pgApp), incremental.ReadSnapshot},
		{"flip to Postgres", incremental.Output{Decision: pg, Previous: sink.Iceberg}, incremental.ReadDelta, native(true, iceApp), incremental.ReadSnapshot},
		{"row store, a window txn written to Iceberg (drained or never written)", onIce, incremental.ReadDelta, rowStore(pgApp, iceApp), incremental.ReadSnapshot},
		{"row store, an open txn", onPG, incremental.ReadDelta, rowStore(open), incremental.ReadSnapshot},
		{"row store, a txn of another dataset", onPG, incremental.ReadDelta, rowStore(other), incremental.ReadSnapshot},
		{"row store, empty window", onPG, incremental.ReadDelta, rowStore(), incremental.ReadDelta},
		{"never written source, empty window", onPG, incremental.ReadDelta, incremental.Source{DatasetID: "up"}, incremental.ReadDelta},
		{"native appends", onIce, incremental.ReadDelta, native(true, iceApp, iceApp), incremental.ReadDelta},
		{"native appends to Postgres", onPG, incremental.ReadDelta, native(true, iceApp), incremental.ReadDelta},
		{"native, table not append-only", onIce, incremental.ReadDelta, native(false, iceApp), incremental.ReadSnapshot},
		{"native, a replace in the window", onIce, incremental.ReadDelta, native(true, iceApp, iceRep), incremental.ReadSnapshot},
		{"native, a txn written to the row store (promoted shadow)", onIce, incremental.ReadDelta, native(true, pgApp), incremental.ReadSnapshot},
		{"native, a maintenance txn", onIce, incremental.ReadDelta, native(true, maint), incremental.ReadSnapshot},
		{"native, empty window", onIce, incremental.ReadDelta, native(false), incremental.ReadDelta},
		{"relation", onPG, incremental.ReadDelta, incremental.Source{DatasetID: "up", Lives: sink.Relation}, incremental.ReadSnapshot},
		{"unknown sink", onPG, incremental.ReadDelta, incremental.Source{DatasetID: "up", Lives: "dual"}, incremental.ReadSnapshot},
	}
	for _, c := range cases {
		got, why := incremental.ChooseReadMode(c.out, c.req, c.src)
		assert.Equal(t, c.want, got, c.name)
		if c.req == incremental.ReadDelta {
			assert.Equal(t, got == incremental.ReadSnapshot, why != "", "%s: a clamped delta says why (%q)", c.name, why)
		}
	}
}

// The rule is never looser than the output-only clamp on a sink that is
// not resolved, and never allows a delta on the first write to a sink
// other than a Postgres output's very first.
func TestChooseReadModeFlipsRebuild(t *testing.T) {
	t.Parallel()
	sinks := []sink.Sink{"", sink.Postgres, sink.Iceberg}
	for _, to := range []sink.Sink{sink.Postgres, sink.Iceberg} {
		for _, prev := range sinks {
			for _, lives := range sinks {
				out := incremental.Output{Decision: decision(to), Previous: prev}
				src := incremental.Source{DatasetID: "up", Lives: lives, AppendOnly: true}
				got, _ := incremental.ChooseReadMode(out, incremental.ReadDelta, src)
				rebuild := (prev != "" && prev != to) || (to == sink.Iceberg && prev == "")
				if rebuild {
					assert.Equal(t, incremental.ReadSnapshot, got, "%s -> %s", prev, to)
				}
			}
		}
	}
}
