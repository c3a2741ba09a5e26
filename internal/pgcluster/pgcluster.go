// Package pgcluster starts a throwaway PostgreSQL cluster from the system's
// binaries (initdb, postgres) for tests and for the examples' embedded default.
//
// The cluster lives in a fresh temporary directory and listens only on a unix
// socket inside it. A small supervisor process (a POSIX shell loop) owns the
// server: when the Go process that started it exits for any reason — normal
// return, test failure, panic, SIGKILL — the supervisor notices within half a
// second, stops the server immediately and removes the directory. Stop does the
// same synchronously.
//
// When the current user is root (as in CI), initdb refuses to run, so every
// process of the cluster runs as the "postgres" system user.
package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoPostgres is returned by Start when no PostgreSQL server binaries can be
// found. The message says how to get them.
var ErrNoPostgres = errors.New("pgcluster: no PostgreSQL server binaries found (looked for initdb and postgres on PATH and under /usr/lib/postgresql/*/bin); install them with `apt-get install postgresql` or point LAKEWRITE_TEST_DATABASE_URL / DATABASE_URL at a server")

// Cluster is a running throwaway PostgreSQL server.
type Cluster struct {
	dir        string
	socketDir  string
	port       int
	tcp        bool
	supervisor *exec.Cmd
	stopped    bool
}

// Options tune Start. The zero value is a sensible default.
type Options struct {
	// Settings are extra server settings (name -> value) passed with -c.
	Settings map[string]string
	// TCP makes the server listen on 127.0.0.1 as well, at a free port,
	// and URL connect over TCP loopback (as a service reaches a server on
	// another host) instead of the unix socket.
	TCP bool
}

// FindBinDir returns the directory holding initdb and postgres: the one on PATH
// if any, otherwise the highest version under /usr/lib/postgresql/*/bin.
func FindBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(matches, func(i, j int) bool {
		return versionOf(matches[i]) > versionOf(matches[j])
	})
	for _, m := range matches {
		dir := filepath.Dir(m)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	return "", ErrNoPostgres
}

func versionOf(initdbPath string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdbPath))))
	return v
}

// Start initialises and starts a new cluster. The caller must call Stop; if
// the process dies first, the supervisor cleans up on its own.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	bin, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("pgcluster: running as root needs the postgres system user to run the server (initdb refuses root): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}

	dir, err := os.MkdirTemp("", "lakewrite-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	c := &Cluster{dir: dir, socketDir: filepath.Join(dir, "sock"), port: 5432, tcp: opts.TCP}
	if c.tcp {
		if c.port, err = freePort(); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	cleanupDir := true
	defer func() {
		if cleanupDir {
			_ = os.RemoveAll(dir)
		}
	}()
	if err := os.Mkdir(c.socketDir, 0o700); err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	if cred != nil {
		for _, p := range []string{dir, c.socketDir} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, fmt.Errorf("pgcluster: chown %s: %w", p, err)
			}
		}
	}
	data := filepath.Join(dir, "data")

	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
		"-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	var out bytes.Buffer
	initdb.Stdout, initdb.Stderr = &out, &out
	if err := initdb.Run(); err != nil {
		return nil, fmt.Errorf("pgcluster: initdb: %w\n%s", err, out.String())
	}

	settings := map[string]string{
		"listen_addresses":        "",
		"unix_socket_directories": c.socketDir,
		"port":                    strconv.Itoa(c.port),
		"fsync":                   "off",
		"synchronous_commit":      "off",
		"full_page_writes":        "off",
		"max_connections":         "300",
		"shared_buffers":          "256MB",
		"logging_collector":       "off",
	}
	if c.tcp {
		settings["listen_addresses"] = "127.0.0.1"
	}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	args := []string{"-D", data}
	for _, k := range keys {
		args = append(args, "-c", k+"="+settings[k])
	}

	// The supervisor: start the server, wait until either the parent (this
	// process) or the server is gone, then stop the server and remove dir.
	script := `
"$PG_BIN/postgres" "$@" >"$PG_DIR/server.log" 2>&1 &
pg=$!
while [ -d "/proc/$PG_PARENT" ] && [ -d "/proc/$pg" ] && ! grep -q '^State:.*Z' "/proc/$pg/status" 2>/dev/null; do sleep 0.2; done
kill -QUIT "$pg" 2>/dev/null
wait "$pg" 2>/dev/null
rm -rf "$PG_DIR"
`
	sup := exec.Command("/bin/sh", append([]string{"-c", script, "pgcluster-supervisor"}, args...)...)
	sup.Env = append(os.Environ(),
		"PG_BIN="+bin, "PG_DIR="+dir, "PG_PARENT="+strconv.Itoa(os.Getpid()))
	sup.Dir = dir
	// Own process group: a Ctrl-C to the terminal's group reaches only us,
	// and the supervisor still cleans up after we are gone.
	sup.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	if err := sup.Start(); err != nil {
		return nil, fmt.Errorf("pgcluster: start server: %w", err)
	}
	c.supervisor = sup
	cleanupDir = false

	if err := c.waitReady(ctx); err != nil {
		logText, _ := os.ReadFile(filepath.Join(dir, "server.log"))
		c.Stop()
		return nil, fmt.Errorf("pgcluster: server did not become ready: %w\n%s", err, logText)
	}
	return c, nil
}

func (c *Cluster) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, c.URL("postgres"))
		if err == nil {
			err = conn.Ping(cctx)
			_ = conn.Close(cctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return last
}

// URL returns a connection string for database db as the postgres superuser.
func (c *Cluster) URL(db string) string {
	if c.tcp {
		return "postgres://postgres@127.0.0.1:" + strconv.Itoa(c.port) + "/" + url.PathEscape(db) + "?sslmode=disable"
	}
	q := url.Values{}
	q.Set("host", c.socketDir)
	q.Set("port", strconv.Itoa(c.port))
	q.Set("sslmode", "disable")
	return "postgres://postgres@/" + url.PathEscape(db) + "?" + q.Encode()
}

// Dir is the directory holding the cluster (data, socket, log). It is removed
// when the cluster stops.
func (c *Cluster) Dir() string { return c.dir }

// Stop shuts the server down immediately and removes its directory. It is
// safe to call more than once.
func (c *Cluster) Stop() {
	if c == nil || c.stopped || c.supervisor == nil {
		return
	}
	c.stopped = true
	if pid, err := c.postmasterPID(); err == nil {
		_ = syscall.Kill(pid, syscall.SIGQUIT)
	}
	done := make(chan struct{})
	go func() {
		_ = c.supervisor.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = c.supervisor.Process.Kill()
		<-done
	}
	_ = os.RemoveAll(c.dir)
}

func (c *Cluster) postmasterPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(c.dir, "data", "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
}

// CrashRestart makes the server end every session at once and come back,
// as pg_ctl restart -m immediate does, without the postmaster exiting (the
// supervisor removes the cluster when it exits): it SIGKILLs one backend,
// so the postmaster terminates every other session, reinitialises shared
// memory (locks included) and runs crash recovery. It returns once the
// server accepts connections again.
func (c *Cluster) CrashRestart(ctx context.Context) error {
	victim, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	var pid int32
	err = victim.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid)
	if err != nil {
		_ = victim.Close(ctx)
		return err
	}
	if err := syscall.Kill(int(pid), syscall.SIGKILL); err != nil {
		_ = victim.Close(ctx)
		return fmt.Errorf("pgcluster: kill backend %d: %w", pid, err)
	}
	_ = victim.Close(ctx)
	deadline := time.Now().Add(time.Minute)
	for {
		time.Sleep(100 * time.Millisecond)
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := pgx.Connect(cctx, c.URL("postgres"))
		if err == nil {
			err = conn.Ping(cctx)
			_ = conn.Close(cctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("pgcluster: the server did not come back after a crash restart: %w", err)
		}
	}
}

// freePort returns a TCP port of 127.0.0.1 free at the time of the call.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgcluster: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
