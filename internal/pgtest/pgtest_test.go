package pgtest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgcluster"
	"github.com/lakewrite/lakewrite/internal/pgtest"
)

func TestMain(m *testing.M) {
	if os.Getenv("PGTEST_CHILD") == "crash" {
		// Child mode for TestClusterRemovedWhenProcessDies: start a cluster,
		// report its directory and die without stopping it.
		c, err := pgcluster.Start(context.Background(), pgcluster.Options{})
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(3)
		}
		fmt.Println("DIR", c.Dir())
		os.Exit(7)
	}
	pgtest.Main(m)
}

// Two parallel tests each write to their own database and never see the
// other's data.
func TestIsolatedDatabases(t *testing.T) {
	var wg sync.WaitGroup
	wg.Add(2)
	names := make(chan string, 2)
	for _, tag := range []string{"a", "b"} {
		t.Run(tag, func(t *testing.T) {
			t.Parallel()
			defer wg.Done()
			pool := pgtest.Pool(t)
			ctx := context.Background()
			var db string
			require.NoError(t, pool.QueryRow(ctx, `SELECT current_database()`).Scan(&db))
			names <- db
			_, err := pool.Exec(ctx, `INSERT INTO lakewrite.datasets (id, name) VALUES ($1, $1)`, "ds-"+tag)
			require.NoError(t, err)
			time.Sleep(100 * time.Millisecond) // let the sibling write too
			var ids []string
			rows, err := pool.Query(ctx, `SELECT id FROM lakewrite.datasets`)
			require.NoError(t, err)
			for rows.Next() {
				var id string
				require.NoError(t, rows.Scan(&id))
				ids = append(ids, id)
			}
			require.NoError(t, rows.Err())
			require.Equal(t, []string{"ds-" + tag}, ids)
		})
	}
	t.Cleanup(func() {
		wg.Wait()
		close(names)
		var got []string
		for n := range names {
			got = append(got, n)
		}
		if len(got) == 2 && got[0] == got[1] {
			t.Errorf("both tests got database %s", got[0])
		}
	})
}

func TestDatabaseIsMigrated(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM lakewrite.lakewrite_migrations`).Scan(&n))
	require.Positive(t, n)
}

// A cluster is removed by Stop.
func TestClusterStopRemovesDir(t *testing.T) {
	if os.Getenv(pgtest.EnvURL) != "" && !hasBinaries() {
		t.Skip("external server in use and no local binaries")
	}
	t.Parallel()
	c, err := pgcluster.Start(context.Background(), pgcluster.Options{})
	require.NoError(t, err)
	dir := c.Dir()
	require.DirExists(t, dir)
	c.Stop()
	require.NoDirExists(t, dir)
	c.Stop() // idempotent
}

// A cluster started with TCP is reached over TCP loopback.
func TestClusterTCP(t *testing.T) {
	if os.Getenv(pgtest.EnvURL) != "" && !hasBinaries() {
		t.Skip("external server in use and no local binaries")
	}
	t.Parallel()
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{TCP: true})
	require.NoError(t, err)
	defer c.Stop()
	require.Contains(t, c.URL("postgres"), "@127.0.0.1:")
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var addr string
	require.NoError(t, conn.QueryRow(ctx, "SELECT host(inet_client_addr())").Scan(&addr))
	require.Equal(t, "127.0.0.1", addr)
}

// A cluster whose owning process dies without Stop is removed by its
// supervisor.
func TestClusterRemovedWhenProcessDies(t *testing.T) {
	if os.Getenv(pgtest.EnvURL) != "" && !hasBinaries() {
		t.Skip("external server in use and no local binaries")
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PGTEST_CHILD=crash")
	out, err := cmd.Output()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 7, ee.ExitCode(), "child output: %s", out)
	var dir string
	for _, line := range strings.Split(string(out), "\n") {
		if d, ok := strings.CutPrefix(line, "DIR "); ok {
			dir = d
		}
	}
	require.NotEmpty(t, dir, "child output: %s", out)
	require.Eventually(t, func() bool {
		_, err := os.Stat(dir)
		return os.IsNotExist(err)
	}, 20*time.Second, 100*time.Millisecond, "cluster dir %s still there after its process died", dir)
}

func hasBinaries() bool {
	_, err := pgcluster.FindBinDir()
	return err == nil
}
