package cursor_test

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.MainWithDatabase(m, "DATABASE_URL") }

func TestSmoke(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	for _, mode := range []cursor.StreamMode{cursor.Direct, cursor.Staged} {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		s, err := cursor.Batches(ctx, pool, `SELECT g::int8 AS id, g::text AS s, (g/3.0)::numeric(10,2) AS n FROM generate_series(1,$1::int) g`, []any{25}, &cursor.Options{Mode: mode, BatchSize: 10, Allocator: mem})
		require.NoError(t, err)
		t.Log(s.Schema())
		n := 0
		for b, err := range s.All() {
			require.NoError(t, err)
			n += int(b.NumRows())
			t.Log(b)
			b.Release()
		}
		require.Equal(t, 25, n)
		mem.AssertSize(t, 0)
		var c int
		for v, err := range cursor.Rows(ctx, pool, `SELECT g FROM generate_series(1,@n::int) g`, []any{pgx.NamedArgs{"n": 5}}, pgx.RowTo[int32], &cursor.Options{Mode: mode}) {
			require.NoError(t, err)
			c += int(v)
		}
		require.Equal(t, 15, c)
	}
}

func rowToAny(row pgx.CollectableRow) (any, error) {
	v, err := row.Values()
	if err != nil {
		return nil, err
	}
	return v[0], nil
}
