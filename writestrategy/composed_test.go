package writestrategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// composedSchema is a writer's own Arrow schema: some columns carry the
// Postgres type a cursor stream records (cursor.MetaPGType), some none.
var composedSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: arrow.NewMetadata([]string{cursor.MetaPGType}, []string{"varchar"})},
	{Name: "qty", Type: arrow.PrimitiveTypes.Int16, Nullable: true, Metadata: arrow.NewMetadata([]string{cursor.MetaPGType}, []string{"int2"})},
	{Name: "amount", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}, Nullable: true},
	{Name: "attrs", Type: arrow.BinaryTypes.String, Nullable: true,
		Metadata: arrow.NewMetadata([]string{cursor.MetaPGType, cursor.MetaJSON}, []string{"jsonb", "true"})},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
}, nil)

// composedDeclared is the declared schema a roll-forward gives that table.
const composedDeclared = `{"columns":[{"name":"id","type":"bigint"},{"name":"name","type":"character varying"},
	{"name":"qty","type":"smallint"},{"name":"amount","type":"numeric(12,2)"},{"name":"attrs","type":"jsonb"},
	{"name":"ts","type":"timestamp with time zone"}]}`

// composeAndDie writes three rows to dataset as a writer composing the
// ledger and the facade itself does (intent, Stage, CommitStaged), then
// dies before its ledger commit: the snapshot is in the table, the intent
// open and no longer held. It returns the intent's id.
func composeAndDie(t *testing.T, w *pgWorld, dataset string) string {
	t.Helper()
	ctx := context.Background()
	in, err := w.ledger.Open(ctx, ledger.OpenParams{DatasetID: dataset, WriterID: writer, Sink: sink.Iceberg, WriteMode: facade.Replace})
	require.NoError(t, err)
	rows := [][]any{
		{int64(1), "ann", int16(3), "1.50", `{"k": "x"}`, "2026-01-01T00:00:00Z"},
		{int64(2), "bob", int16(4), "2.25", `{"k": "y"}`, "2026-01-02T00:00:00Z"},
		{int64(3), nil, nil, nil, nil, nil},
	}
	batches := facade.FromRows(memory.DefaultAllocator, composedSchema, 1024, func(yield func([]any, error) bool) {
		for _, r := range rows {
			if !yield(r, nil) {
				return
			}
		}
	})
	staged, err := w.f.Stage(ctx, facade.Target{DatasetID: dataset, WriterID: writer, Workspace: "test"},
		facade.WriteRequest{Mode: facade.Replace, Schema: composedSchema, Rows: batches, TxnID: in.ID})
	require.NoError(t, err)
	_, err = writestrategy.CommitStaged(ctx, w.ledger, in, staged, nil)
	require.NoError(t, err)
	in.Release() // killed here: no ledger commit
	return in.ID
}

// requireRolledForward checks that the intent txnID of dataset was rolled
// forward with everything a Dispatcher commit records.
func requireRolledForward(t *testing.T, w *pgWorld, dataset, txnID string) {
	t.Helper()
	ctx := context.Background()
	found, ok, err := w.f.FindTxn(ctx, dataset, txnID)
	require.NoError(t, err)
	require.True(t, ok)
	txn, err := w.ledger.Get(ctx, txnID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusCommitted, txn.Status)
	require.Equal(t, found.SnapshotID, txn.SnapshotID)
	require.Equal(t, int64(3), txn.RowCount)
	require.True(t, txn.CommittedAt.Equal(found.CommittedAt))
}

// A write composed from a ledger intent, facade.Stage and CommitStaged
// whose writer dies before its ledger commit is rolled forward whole by
// Dispatcher.Lookup (through ledger.Recover, or by the next Dispatcher
// write of the dataset): row count, snapshot, committed-at and watermark,
// and a declared schema derived from the landed table (the summary has
// none), so a Dispatcher write can then read it as a source.
func TestComposedWriteRolledForwardWithSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPGWorld(t, nil, nil)
	ensureOutputs(t, w.pool, "composed", "composed_next", "downstream", "bare", "outcome", "downstream2")

	t.Run("recover", func(t *testing.T) {
		txnID := composeAndDie(t, w, "composed")
		rep, err := w.ledger.Recover(ctx, "composed", time.Nanosecond, w.d.Lookup)
		require.NoError(t, err)
		require.Len(t, rep.RolledForward, 1)
		requireRolledForward(t, w, "composed", txnID)
		ds, err := w.ledger.Dataset(ctx, "composed")
		require.NoError(t, err)
		require.JSONEq(t, composedDeclared, string(ds.Schema))
		require.Equal(t, int64(3), ds.RowCount)
		require.Equal(t, sink.Iceberg, ds.Sink)
		found, _, err := w.f.FindTxn(ctx, "composed", txnID)
		require.NoError(t, err)
		require.True(t, ds.SourceWatermark.Equal(found.CommittedAt))

		res, err := w.write(writestrategy.Transform{Output: "downstream", Source: "composed", Steps: []writestrategy.Step{{Name: "f",
			SQL: `SELECT id, name, qty * 2 AS qty2, amount, attrs->>'k' AS k, ts FROM source WHERE name IS NOT NULL`}}})
		require.NoError(t, err)
		require.Equal(t, int64(2), res[0].Rows)
		require.Equal(t, []string{
			`{"k": "x", "id": 1, "ts": "2026-01-01T00:00:00+00:00", "name": "ann", "qty2": 6, "amount": 1.50}`,
			`{"k": "y", "id": 2, "ts": "2026-01-02T00:00:00+00:00", "name": "bob", "qty2": 8, "amount": 2.25}`,
		}, rowStoreRows(t, w.pool, "downstream"))
	})
	// The next Dispatcher write of the dataset rolls it forward first, and
	// reads it (itself) as its source.
	t.Run("next_write", func(t *testing.T) {
		txnID := composeAndDie(t, w, "composed_next")
		w.iceberg("composed_next")
		res, err := w.write(writestrategy.Transform{Output: "composed_next", Source: "composed_next", Steps: []writestrategy.Step{{Name: "f",
			SQL: `SELECT id, name, qty, amount, attrs, ts FROM source WHERE id > 1`}}})
		require.NoError(t, err)
		require.Equal(t, int64(2), res[0].Rows)
		requireRolledForward(t, w, "composed_next", txnID)
	})

	// A composing writer that commits its intent itself: with
	// CommitOutcome the dataset is readable as a source; with an outcome
	// that has no schema it is not, and the read says so.
	t.Run("own_commit", func(t *testing.T) {
		read := func(source string) error {
			_, err := w.write(writestrategy.Transform{Output: "downstream2", Source: source})
			return err
		}
		for _, id := range []string{"bare", "outcome"} {
			in, err := w.ledger.Open(ctx, ledger.OpenParams{DatasetID: id, WriterID: writer, Sink: sink.Iceberg, WriteMode: facade.Replace})
			require.NoError(t, err)
			staged, err := w.f.Stage(ctx, facade.Target{DatasetID: id, WriterID: writer, Workspace: "test"},
				facade.WriteRequest{Mode: facade.Replace, Schema: composedSchema, TxnID: in.ID,
					Rows: facade.FromRows(memory.DefaultAllocator, composedSchema, 8, func(yield func([]any, error) bool) {
						yield([]any{int64(1), "ann", int16(3), "1.50", `{"k": "x"}`, "2026-01-01T00:00:00Z"}, nil)
					})})
			require.NoError(t, err)
			res, err := writestrategy.CommitStaged(ctx, w.ledger, in, staged, nil)
			require.NoError(t, err)
			o := writestrategy.CommitOutcome(res, nil)
			require.JSONEq(t, composedDeclared, string(o.Schema))
			require.Equal(t, ledger.Outcome{RowCount: 1, SnapshotID: res.SnapshotID, CommittedAt: res.CommittedAt, Schema: o.Schema}, o)
			if id == "bare" {
				o.Schema = nil
			}
			require.NoError(t, w.ledger.Commit(ctx, in, o))
		}
		err := read("bare")
		require.ErrorIs(t, err, writestrategy.ErrNoSchema)
		require.ErrorContains(t, err, `dataset "bare": writestrategy: dataset has no declared schema: write it through a Dispatcher, or commit`)
		require.NoError(t, read("outcome"))
	})
}
