package sink

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newFlags returns Flags on a fresh database holding the given datasets.
func newFlags(t *testing.T, datasets ...string) (*Flags, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.Pool(t)
	for _, id := range datasets {
		_, err := pool.Exec(context.Background(), `INSERT INTO lakewrite.datasets (id) VALUES ($1)`, id)
		require.NoError(t, err)
	}
	f, err := NewFlags(pool, nil)
	require.NoError(t, err)
	return f, pool
}

// fakeClock is an injected clock for the resolver cache.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time          { return c.t }
func (c *fakeClock) Advance(d time.Duration) { c.t = c.t.Add(d) }
