package writestrategy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// TestQueryErrorWhere: a query failure is a *writestrategy.QueryError on
// both sinks, naming the output, and for an error with a position the step
// and the position within the step's own SQL; the Iceberg sink's error
// also still matches *cursor.QueryError. A Query's position is within its
// SQL.
func TestQueryErrorWhere(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	seedWorld(t, w, 50)
	ensureOutputs(t, w.pool, "where_pg", "where_ice")
	w.iceberg("where_ice")
	const bad = "SELECT id,\n  amount FROM sourc"
	for _, out := range []string{"where_pg", "where_ice"} {
		_, err := w.write(writestrategy.Transform{Output: out, Source: "orders", Steps: []writestrategy.Step{
			{Name: "all", SQL: `SELECT * FROM source`}, {Name: "pick", SQL: bad}}})
		var qe *writestrategy.QueryError
		require.ErrorAs(t, err, &qe, out)
		require.Equal(t, out, qe.Output)
		require.Equal(t, "pick", qe.Step)
		require.Equal(t, strings.Index(bad, "sourc")+1, qe.Position)
		var pe *pgconn.PgError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, "42P01", pe.Code)
		require.Contains(t, err.Error(), `output "`+out+`": step "pick": at position 26 of its SQL`)

		_, err = w.write(writestrategy.Transform{Output: out, Source: "orders", Steps: []writestrategy.Step{
			{Name: "div", SQL: `SELECT id, 1 / (id - id) AS x FROM source`}}})
		qe = nil
		require.ErrorAs(t, err, &qe, out)
		require.Equal(t, out, qe.Output)
		require.ErrorAs(t, err, &pe)
		require.Equal(t, "22012", pe.Code, "division by zero")
		if out == "where_ice" {
			var ce *cursor.QueryError
			require.ErrorAs(t, err, &ce, "the cursor's error is kept inside")
		}
		_, err = w.d.Verify(context.Background(), writestrategy.Request{Strategy: writestrategy.Transform{Output: out, Source: "orders",
			Steps: []writestrategy.Step{{Name: "div", SQL: `SELECT id, 1 / (id - id) AS x FROM source`}}}})
		qe = nil
		require.ErrorAs(t, err, &qe, "Verify: %s", out)
		require.Equal(t, out, qe.Output)
	}
	ensureOutputs(t, w.pool, "where_hi", "where_lo")
	_, err := w.write(writestrategy.Split{Source: "orders", Predicate: "amount > $1 AND nope", Args: []any{10},
		Matched: "where_hi", Unmatched: "where_lo"})
	var sq *writestrategy.QueryError
	require.ErrorAs(t, err, &sq)
	require.Equal(t, "predicate", sq.Step)
	require.Equal(t, strings.Index("amount > $1 AND nope", "nope")+1, sq.Position)
	_, err = w.d.Load(context.Background(), writestrategy.LoadRequest{WriterID: writer, DatasetID: "where_pg",
		SQL: "SELECT 1 AS a, nope AS b"})
	var qe *writestrategy.QueryError
	require.ErrorAs(t, err, &qe)
	require.Equal(t, "", qe.Step)
	require.Equal(t, strings.Index("SELECT 1 AS a, nope AS b", "nope")+1, qe.Position)
}

// TestPartitionKeyChecked: a partition declaration that does not fit the
// output's columns is refused with ErrPartitionKey before anything is
// computed or written; a fitting one writes.
func TestPartitionKeyChecked(t *testing.T) {
	t.Parallel()
	parts := map[string]facade.PartitionField{
		"pk_missing": {Column: "nope", Transform: "day"},
		"pk_dayint":  {Column: "id", Transform: "day"},
		"pk_hourday": {Column: "d", Transform: "hour"},
		"pk_trunc":   {Column: "f", Transform: "truncate[2]"},
		"pk_ok":      {Column: "ts", Transform: "day"},
	}
	w := newWorldWith(t, nil, &facade.Config{PartitionFor: func(id string) (facade.Partitioning, bool) {
		pf, ok := parts[id]
		return facade.Partitioning{Fields: []facade.PartitionField{pf}}, ok
	}}, nil, nil)
	seedWorld(t, w, 50)
	ids := []string{"pk_missing", "pk_dayint", "pk_hourday", "pk_trunc", "pk_ok"}
	ensureOutputs(t, w.pool, ids...)
	w.iceberg(ids...)
	step := []writestrategy.Step{{Name: "s", SQL: `SELECT id, ts, ts::date AS d, amount::float8 AS f FROM source`}}
	for _, id := range ids[:4] {
		_, err := w.write(writestrategy.Transform{Output: id, Source: "orders", Steps: step})
		require.ErrorIs(t, err, writestrategy.ErrPartitionKey, id)
		require.ErrorIs(t, err, writestrategy.ErrInvalid)
		require.Contains(t, err.Error(), fmt.Sprintf("dataset %q: %s(%s)", id, parts[id].Transform, parts[id].Column))
		ds, err := w.ledger.Dataset(context.Background(), id)
		require.NoError(t, err)
		require.Zero(t, ds.RowCount, "%s: nothing written", id)
	}
	res := w.mustWrite(writestrategy.Transform{Output: "pk_ok", Source: "orders", Steps: step})
	require.EqualValues(t, 50, res[0].Rows)
}

// TestConnectionLost: a write whose backend is terminated mid-statement
// (pg_terminate_backend from another connection) fails with a
// ErrConnectionLost error saying nothing was written, on both sinks; the
// output keeps its rows and the next write works.
func TestConnectionLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	seedWorld(t, w, 200)
	ensureOutputs(t, w.pool, "lost_pg", "lost_ice")
	w.iceberg("lost_ice")
	for _, out := range []string{"lost_pg", "lost_ice"} {
		plain := writestrategy.Transform{Output: out, Source: "orders"}
		w.mustWrite(plain)
		before := w.checksum(out)
		slow := writestrategy.Transform{Output: out, Source: "orders", Steps: []writestrategy.Step{{Name: "slow",
			SQL: `SELECT s.*, (SELECT 1 FROM pg_sleep(CASE WHEN s.id = 150 THEN 60 ELSE 0 END)) AS lw_lost FROM source s`}}}
		done := make(chan error, 1)
		go func() { _, err := w.write(slow); done <- err }()
		killed := false
		for !killed {
			select {
			case err := <-done:
				t.Fatalf("%s: the write ended before its backend was terminated: %v", out, err)
			case <-time.After(20 * time.Millisecond):
			}
			var n int
			require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE wait_event = 'PgSleep' AND query LIKE '%lw_lost%' AND pid <> pg_backend_pid()`).Scan(&n))
			killed = n > 0
		}
		err := <-done
		t.Logf("%s: %v", out, err)
		require.ErrorIs(t, err, writestrategy.ErrConnectionLost, out)
		require.Contains(t, err.Error(), fmt.Sprintf("lost while writing %q: nothing was written", out))
		require.False(t, errors.Is(err, ledger.ErrOutcomeUnknown), "%s: nothing was written: %v", out, err)
		require.False(t, errors.Is(err, writestrategy.ErrServerTimeout))
		require.Equal(t, before, w.checksum(out), "%s keeps its rows", out)
		w.mustWrite(plain)
		require.Equal(t, before, w.checksum(out))
	}
}
