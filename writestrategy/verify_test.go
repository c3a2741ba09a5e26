package writestrategy_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/writestrategy"

	"github.com/lakewrite/lakewrite/sink"
)

// Verify compares each output, on either sink, with a fresh compute of its
// strategy: equal after a write, a mismatch (not an error) once the
// sources change, equal again after the next write.
func TestVerifyParityOnBothSinks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Strict numerics for writes: Verify rounds for its checksums anyway.
	w := newWorldWith(t, nil, nil, &cursor.Options{Numeric: cursor.NumericStrict}, nil)
	seedWorld(t, w, 500)
	ensureOutputs(t, w.pool, "v_pg", "v_ice", "v_big", "v_small", "v_avg")
	w.iceberg("v_ice", "v_big", "v_small")
	avg := writestrategy.Transform{Output: "v_avg", Source: "orders", Steps: []writestrategy.Step{
		// avg() has 20 fractional digits: stored whole in the row store.
		{Name: "a", SQL: `SELECT category, avg(amount) AS mean FROM source GROUP BY category ORDER BY category`}}}
	strategies := []writestrategy.WriteStrategy{
		writestrategy.Transform{Output: "v_pg", Source: "orders"},
		writestrategy.Join{Output: "v_ice", Left: "orders", Right: "cats", Type: writestrategy.LeftJoin,
			On: []writestrategy.JoinOn{{Left: "category", Right: "code"}}},
		writestrategy.Split{Source: "orders", Predicate: "amount > 600", Matched: "v_big", Unmatched: "v_small"},
		avg,
	}
	verifyAll := func() map[string]writestrategy.Parity {
		out := map[string]writestrategy.Parity{}
		for _, s := range strategies {
			ps, err := w.d.Verify(ctx, writestrategy.Request{Strategy: s})
			require.NoError(t, err)
			require.Len(t, ps, len(s.Outputs()))
			for i, p := range ps {
				require.Equal(t, s.Outputs()[i], p.DatasetID)
				out[p.DatasetID] = p
			}
		}
		return out
	}
	for _, s := range strategies {
		w.mustWrite(s)
	}
	for id, p := range verifyAll() {
		require.True(t, p.OK(), "%s", p)
		require.Equal(t, w.checksum(id), p.Stored, id)
		want := sink.Iceberg
		if id == "v_pg" || id == "v_avg" {
			want = sink.Postgres
		}
		require.Equal(t, want, p.Sink, id)
	}
	require.EqualValues(t, 500, verifyAll()["v_ice"].Stored.Rows)

	// The source changes: every output now differs from its compute.
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, 400)
	for id, p := range verifyAll() {
		require.False(t, p.OK(), "%s", id)
		require.Contains(t, p.String(), "MISMATCH "+id)
	}
	for _, s := range strategies {
		w.mustWrite(s)
	}
	for _, p := range verifyAll() {
		require.True(t, p.OK(), "%s", p)
	}

	_, err := w.d.Verify(ctx, writestrategy.Request{})
	require.ErrorIs(t, err, writestrategy.ErrInvalid)
	_, err = writestrategy.DatasetChecksum(ctx, w.d, "no such dataset")
	require.Error(t, err)
}
