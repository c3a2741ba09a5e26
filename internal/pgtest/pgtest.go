// Package pgtest gives each test a fresh, migrated database on a real
// PostgreSQL server.
//
// With LAKEWRITE_TEST_DATABASE_URL set, databases are created on that server.
// Otherwise one throwaway cluster is started per test binary from the system
// binaries (see internal/pgcluster) and removed when the binary exits.
//
// Use it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// then call DB, URL or Pool in a test. Each call creates a database cloned
// from a template migrated once per binary, so tests may run in parallel.
// When no server can be found the test fails with a message saying how to
// get one; it is never skipped.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/internal/pgcluster"
	"github.com/lakewrite/lakewrite/ledger"
)

// EnvURL names the environment variable holding an existing server's URL.
const EnvURL = "LAKEWRITE_TEST_DATABASE_URL"

// server is per test binary: the one place this package keeps state, and it
// belongs to the test process, not to library code.
var server struct {
	once     sync.Once
	err      error
	cluster  *pgcluster.Cluster
	adminURL string // a maintenance database (postgres) on the server
	template string
}

// Main runs the tests and then stops the cluster (if one was started) and
// drops the template database. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Shutdown()
	os.Exit(code)
}

// MainWithDatabase is Main for a package whose Examples need a database:
// before the tests run it creates one fresh migrated database and sets the
// environment variable envVar (e.g. "DATABASE_URL") to its URL, so the
// Examples read it as a user's program does; the database is dropped at
// the end. The Examples of a package run one after the other on that
// database, so each uses its own dataset ids.
func MainWithDatabase(m *testing.M, envVar string) {
	server.once.Do(func() { server.err = start() })
	if server.err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: no PostgreSQL for tests: %v\n", server.err)
		Shutdown()
		os.Exit(1)
	}
	name := "lwx_" + randomSuffix()
	if err := createDatabase(name); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		Shutdown()
		os.Exit(1)
	}
	os.Setenv(envVar, withDatabase(server.adminURL, name))
	code := m.Run()
	if err := dropDatabase(name); err != nil && code == 0 {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		code = 1
	}
	Shutdown()
	os.Exit(code)
}

func createDatabase(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, server.adminURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()+` TEMPLATE `+pgx.Identifier{server.template}.Sanitize()); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	return nil
}

func dropDatabase(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, server.adminURL)
	if err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// Shutdown stops what the package started. Main calls it; call it yourself
// only when not using Main.
func Shutdown() {
	if server.template != "" && server.cluster == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, server.adminURL); err == nil {
			_, _ = conn.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{server.template}.Sanitize()+` WITH (FORCE)`)
			_ = conn.Close(ctx)
		}
	}
	server.cluster.Stop()
}

// Cluster returns the cluster started for this binary, or nil when an
// external server (LAKEWRITE_TEST_DATABASE_URL) is used.
func Cluster(t testing.TB) *pgcluster.Cluster {
	t.Helper()
	setup(t)
	return server.cluster
}

func setup(t testing.TB) {
	t.Helper()
	server.once.Do(func() { server.err = start() })
	if server.err != nil {
		t.Fatalf("pgtest: no PostgreSQL for tests: %v", server.err)
	}
}

func start() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if u := os.Getenv(EnvURL); u != "" {
		server.adminURL = u
	} else {
		c, err := pgcluster.Start(ctx, pgcluster.Options{})
		if err != nil {
			return fmt.Errorf("%w\n(set %s to use an existing server, or `apt-get install postgresql`)", err, EnvURL)
		}
		server.cluster = c
		server.adminURL = c.URL("postgres")
	}
	server.template = "lwtpl_" + randomSuffix()
	conn, err := pgx.Connect(ctx, server.adminURL)
	if err != nil {
		return fmt.Errorf("connect %s: %w", redact(server.adminURL), err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{server.template}.Sanitize()); err != nil {
		return fmt.Errorf("create template database: %w", err)
	}
	tconn, err := pgx.Connect(ctx, withDatabase(server.adminURL, server.template))
	if err != nil {
		return err
	}
	defer tconn.Close(context.Background())
	if _, err := ledger.Migrate(ctx, tconn, ""); err != nil {
		return err
	}
	return nil
}

// URL creates a fresh migrated database for this test and returns its URL.
// The database is dropped when the test ends.
func URL(t testing.TB) string {
	t.Helper()
	setup(t)
	name := "lwt_" + randomSuffix()
	if err := createDatabase(name); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := dropDatabase(name); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return withDatabase(server.adminURL, name)
}

// Pool returns a pool on a fresh migrated database, closed when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	u := URL(t)
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	cfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(pool.Close) // registered after the drop, so it runs before it
	return pool
}

// Conn opens one connection to the database at url, closed when the test ends.
func Conn(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func withDatabase(raw, db string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		// keyword/value form
		return raw + " dbname=" + db
	}
	u.Path = "/" + db
	return u.String()
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable url)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return strings.TrimSpace(u.String())
}
