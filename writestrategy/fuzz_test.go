package writestrategy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// FuzzProjectionIdentifiers feeds arbitrary column names through the
// projection builder and runs the result on Postgres: a name is either
// refused with an error matching ErrUnsafeIdentifier, or it round-trips exactly (quoted,
// never spliced into the SQL). The seed corpus (and testdata/fuzz) runs in
// every test run; to fuzz, bound the minimization, which otherwise spends
// up to a minute of database round trips on each new input:
//
//	go test -run '^$' -fuzz FuzzProjectionIdentifiers -fuzztime 60s -fuzzminimizetime 20x ./writestrategy/
func FuzzProjectionIdentifiers(f *testing.F) {
	for _, s := range []string{"id", `a"b`, `x"; DROP TABLE lakewrite.datasets; --`, "Ünïcode name", "", "__row_id",
		"$1", "a\x00b", "select", `""`, "a'b", "-- comment", "/* c */", "\xff\xfe", "col\nname",
		"1234567890123456789012345678901234567890123456789012345678901234"} {
		f.Add(s, "k")
	}
	// Columns named like the aliases of the generated SQL: found by the
	// fuzzer, a bare to_jsonb(o) took the column o for the whole row.
	for _, s := range []string{"o", "x", "s", "t", "u", "n"} {
		f.Add("0", s)
	}
	pool := pgtest.Pool(f)
	l, err := ledger.New(pool, nil)
	require.NoError(f, err)
	n := 0
	f.Fuzz(func(t *testing.T, name, other string) {
		ctx := context.Background()
		if name == other {
			other += "_"
		}
		schema := writestrategy.Schema{Columns: []writestrategy.Column{{Name: name, Type: "integer"}, {Name: other, Type: "text"}}}
		raw, _ := json.Marshal(schema)
		parsed, err := writestrategy.ParseSchema(raw)
		if err != nil {
			require.True(t, errors.Is(err, writestrategy.ErrUnsafeIdentifier), "refused without ErrUnsafeIdentifier: %v", err)
			return
		}
		// JSON replaced invalid UTF-8; use the names as stored.
		name, other = parsed.Columns[0].Name, parsed.Columns[1].Name
		n++
		src, dst := fmt.Sprintf("fz_src_%d", n), fmt.Sprintf("fz_dst_%d", n)
		_, err = l.EnsureDataset(ctx, src, src, raw)
		require.NoError(t, err)
		_, err = l.EnsureDataset(ctx, dst, dst, nil)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `INSERT INTO lakewrite.dataset_rows (dataset_id, row_index, data)
			VALUES ($1, 0, jsonb_build_object($2::text, 7, $3::text, 'v'))`, src, name, other)
		require.NoError(t, err)
		var res []writestrategy.WriteResult
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			res, err = writestrategy.Apply(ctx, tx, &writestrategy.Env{},
				writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: src, Target: dst, Key: []string{name}})
			return err
		}))
		require.Equal(t, int64(1), res[0].Rows)
		require.Equal(t, []writestrategy.Column{{Name: name, Type: "integer"}, {Name: other, Type: "text"}}, writestrategy.ResultColumns(res[0]).Columns)
		var got, want string
		require.NoError(t, pool.QueryRow(ctx, `SELECT data::text, jsonb_build_object('', 1, $2::text, 7, $3::text, 'v')::text
			FROM lakewrite.dataset_rows WHERE dataset_id = $1`, dst, name, other).Scan(&got, &want))
		require.Equal(t, want, got)
	})
}
