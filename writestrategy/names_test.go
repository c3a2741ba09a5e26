package writestrategy_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// The name rule is one for both sinks: a dataset id the Iceberg naming
// refuses is refused on the Postgres sink too, before anything is written,
// and output columns equal up to case are refused on either sink.
func TestDispatchNameRule(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	seedWorld(t, w, 10)
	ctx := context.Background()
	for _, id := range []string{"daily totals", "a/b", "daily.totals", "__x", "dåily", "x;drop table events", "-x"} {
		_, err := w.write(writestrategy.Transform{Output: id, Source: "orders", Steps: []writestrategy.Step{{Name: "f", SQL: `SELECT id FROM source`}}})
		require.ErrorIs(t, err, facade.ErrInvalidDatasetID, id)
		require.ErrorIs(t, err, writestrategy.ErrInvalid, id)
		var ne *facade.NameError
		require.True(t, errors.As(err, &ne), id)
		require.Equal(t, id, ne.Name)
		_, err = w.ledger.Dataset(ctx, id)
		require.ErrorIs(t, err, ledger.ErrDatasetNotFound, "nothing registered for %q", id)
	}
	// A valid id still writes, on either sink.
	ensureOutputs(t, w.pool, "daily_totals-2", "daily_ice")
	w.mustWrite(writestrategy.Transform{Output: "daily_totals-2", Source: "orders", Steps: []writestrategy.Step{{Name: "f", SQL: `SELECT id FROM source`}}})
	w.iceberg("daily_ice")
	for _, out := range []string{"daily_totals-2", "daily_ice"} {
		_, err := w.write(writestrategy.Transform{Output: out, Source: "orders", Steps: []writestrategy.Step{{Name: "f", SQL: `SELECT id AS a, id AS "A" FROM source`}}})
		require.ErrorIs(t, err, writestrategy.ErrUnsafeIdentifier, out)
		require.ErrorContains(t, err, "case-insensitively", out)
	}
	w.mustWrite(writestrategy.Transform{Output: "daily_ice", Source: "orders", Steps: []writestrategy.Step{{Name: "f", SQL: `SELECT id AS a, id AS b FROM source`}}})
}

func TestParseSchemaFoldsCase(t *testing.T) {
	t.Parallel()
	_, err := writestrategy.ParseSchema([]byte(`{"columns":[{"name":"a","type":"int"},{"name":"A","type":"int"}]}`))
	require.ErrorIs(t, err, writestrategy.ErrUnsafeIdentifier)
	_, err = writestrategy.ParseSchema([]byte(`{"columns":[{"name":"a","type":"int"},{"name":"b","type":"int"}]}`))
	require.NoError(t, err)
}
