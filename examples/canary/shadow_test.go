package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// nameMangler writes "?" into every value of the name column: an Iceberg
// side that disagrees with Postgres on one column.
type nameMangler struct{ facade.Lakehouse }

func (m nameMangler) Stage(ctx context.Context, t facade.Target, req facade.WriteRequest) (facade.Staged, error) {
	idx := req.Schema.FieldIndices("name")[0]
	rows := req.Rows
	req.Rows = func(yield func(arrow.RecordBatch, error) bool) {
		for rec, err := range rows {
			if err != nil {
				yield(nil, err)
				return
			}
			b := array.NewStringBuilder(memory.DefaultAllocator)
			for range rec.NumRows() {
				b.Append("?")
			}
			col := b.NewArray()
			cols := append([]arrow.Array(nil), rec.Columns()...)
			cols[idx] = col
			out := array.NewRecordBatch(rec.Schema(), cols, rec.NumRows())
			col.Release()
			b.Release()
			more := yield(out, nil)
			out.Release()
			if !more {
				return
			}
		}
	}
	return m.Lakehouse.Stage(ctx, t, req)
}

// The shadow runbook: shadow, deploys recorded as matching, an injected
// mismatch shown by status and refused by promote, then promote, verify
// and revert.
func TestShadowRunbook(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	s.ok("init")
	out := s.ok("shadow", demoOutput)
	require.Contains(t, out, "override demo_orders_clean: set to shadow")
	require.Contains(t, out, "decision: sink=pg")
	out = s.ok("status", demoOutput)
	require.Contains(t, out, "demo_orders_clean: mode=shadow sink_of_record=none yet shadow_runs=0 matching=0")
	for range 2 {
		require.Contains(t, s.ok("deploy", demoOutput), "deployed demo_orders_clean: sink=pg")
	}
	out = s.ok("status", demoOutput)
	require.Contains(t, out, "demo_orders_clean: mode=shadow sink_of_record=pg shadow_runs=2 matching=2 failed=0")
	require.Contains(t, out, "  last run:  ")
	require.Contains(t, out, " matched txn=")
	require.Contains(t, out, "  last mismatch: none")

	// A write whose Iceberg side is mangled on one column.
	ctx := context.Background()
	e, err := openEnv(ctx, envOptions{databaseURL: s.url, warehouse: s.warehouse, logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	flags, err := sink.NewFlags(e.pool, nil)
	require.NoError(t, err)
	res, err := sink.NewResolver(flags, nil)
	require.NoError(t, err)
	d, err := writestrategy.NewDispatcher(e.pool, &writestrategy.DispatchConfig{Ledger: e.ledger, Resolver: res,
		Lakehouse: nameMangler{e.lake}, Workspace: "canary"})
	require.NoError(t, err)
	_, err = d.Write(ctx, writestrategy.Request{WriterID: writerID, Strategy: outputs()[demoOutput]})
	require.NoError(t, err, "the write of record commits")
	e.close()
	out = s.ok("status")
	require.Contains(t, out, "demo_orders_clean: mode=shadow sink_of_record=pg shadow_runs=3 matching=0 failed=0")
	require.Contains(t, out, "  last mismatch: ")
	require.Contains(t, out, " mismatch txn=")
	require.Contains(t, out, "columns=[name]")
	require.Contains(t, out, `examples=["postgres: id=`)
	require.Contains(t, out, "demo_category_stats: mode=pg sink_of_record=none yet shadow_runs=0")
	code, out, errs := s.run("promote", demoOutput)
	require.Equal(t, exitFailed, code)
	require.Contains(t, errs, `dataset "demo_orders_clean" not promoted`)
	require.Contains(t, errs, "is mismatch")
	require.Contains(t, out, "columns=[name]")

	// The sinks agree again: promote, verify, revert.
	s.ok("deploy", demoOutput)
	out = s.ok("promote", demoOutput)
	require.Contains(t, out, "promoted demo_orders_clean: sink of record iceberg_native")
	out = s.ok("status", demoOutput)
	require.Contains(t, out, "demo_orders_clean: mode=iceberg_native sink_of_record=iceberg_native shadow_runs=4 matching=1")
	require.Contains(t, s.ok("verify", demoOutput), "parity OK")
	require.Contains(t, s.ok("deploy", demoOutput), "sink=iceberg_native")
	require.Regexp(t, `drained demo_orders_clean: [1-9][0-9]* stale row-store rows deleted`, s.ok("drain", demoOutput))
	require.Contains(t, s.ok("drain", demoOutput), "drained demo_orders_clean: 0 stale")
	code, _, errs = s.run("drain", demoSource)
	require.Equal(t, exitFailed, code)
	require.Contains(t, errs, "nothing drained")
	s.ok("revert", demoOutput)
	out = s.ok("status", demoOutput)
	require.Contains(t, out, "demo_orders_clean: mode=pg sink_of_record=iceberg_native")
	require.Contains(t, s.ok("deploy", demoOutput), "sink=pg mode=replace")
	require.Contains(t, s.ok("status", demoOutput), "demo_orders_clean: mode=pg sink_of_record=pg")
	require.Contains(t, s.ok("verify", demoOutput), "parity OK")
}
