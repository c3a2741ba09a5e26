package facade_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
)

func TestNameRule(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"", "daily totals", "a/b", "daily.totals", "__x", "_x", "dåily", "x;drop table events", string(make([]byte, 129))} {
		err := facade.CheckDatasetID(id)
		require.ErrorIs(t, err, facade.ErrInvalidDatasetID, "%q", id)
		var ne *facade.NameError
		require.True(t, errors.As(err, &ne))
	}
	for _, id := range []string{"d", "daily_totals", "Daily-Totals-2", "9lives"} {
		require.NoError(t, facade.CheckDatasetID(id), id)
	}
	for _, cols := range [][]string{{""}, {"__row_id"}, {"a", "A"}, {"Amount", "amount"}, {"x", "x"}, {"a\x00"}, {string(make([]byte, 64))}} {
		err := facade.CheckColumnNames(cols...)
		require.ErrorIs(t, err, facade.ErrInvalidColumnName, "%q", cols)
		require.NotErrorIs(t, err, facade.ErrInvalidDatasetID)
	}
	require.ErrorContains(t, facade.CheckColumnNames("a", "A"), `clashes with column "a"`)
	require.NoError(t, facade.CheckColumnNames("a", "b_", "daily total", "Ünïcode"))
}
