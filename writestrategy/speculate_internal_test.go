package writestrategy

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// A session checks cached descriptions only when its connection caches
// statements (exec mode and capacity); the answer is kept per connection
// and is the same when asked again.
func TestCachesStatements(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	connect := func(set func(*pgx.ConnConfig)) *pgx.Conn {
		cfg, err := pgx.ParseConfig(url)
		require.NoError(t, err)
		set(cfg)
		conn, err := pgx.ConnectConfig(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		return conn
	}
	for _, c := range []struct {
		name string
		set  func(*pgx.ConnConfig)
		want bool
	}{
		{"cache statement", func(*pgx.ConnConfig) {}, true},
		{"cache describe", func(c *pgx.ConnConfig) { c.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe }, false},
		{"exec", func(c *pgx.ConnConfig) { c.DefaultQueryExecMode = pgx.QueryExecModeExec }, false},
		{"no capacity", func(c *pgx.ConnConfig) { c.StatementCacheCapacity = 0 }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := connect(c.set)
			require.Equal(t, c.want, cachesStatements(conn))
			require.NotNil(t, conn.PgConn().CustomData()[cachesStatementsKey], "kept with the session")
			require.Equal(t, c.want, cachesStatements(conn), "asked again")
			tx := newPipelinedTx(conn, "BEGIN")
			require.Equal(t, c.want, tx.canSpeculate(tx))
		})
	}
}
