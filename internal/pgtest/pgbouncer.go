package pgtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PgBouncer starts a PgBouncer (from the system's packages: pgbouncer on
// PATH or in /usr/sbin) in front of the database at dbURL (a URL from
// URL), with the given pool_mode ("session" or "transaction") and
// server_round_robin on (so that consecutive transactions of a client
// land on different server connections when several are idle), and
// returns the URL of that database through it. pgx talks to it with the
// simple protocol (PgBouncer before 1.21 keeps no prepared statements in
// transaction mode). It is stopped when the test ends. Run as root, it
// runs as the postgres system user (PgBouncer refuses root). Its pool
// has up to 20 server connections (PgBouncerPool sets another size).
func PgBouncer(t testing.TB, dbURL, mode string) string {
	t.Helper()
	return PgBouncerPool(t, dbURL, mode, 20)
}

// PgBouncerPool is PgBouncer with at most poolSize server connections
// (default_pool_size).
func PgBouncerPool(t testing.TB, dbURL, mode string, poolSize int) string {
	t.Helper()
	if poolSize < 1 {
		t.Fatalf("pgtest: PgBouncer pool size %d", poolSize)
	}
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		bin = "/usr/sbin/pgbouncer"
		if _, serr := os.Stat(bin); serr != nil {
			t.Fatalf("pgtest: no pgbouncer (apt-get install pgbouncer): %v", err)
		}
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	host, port := u.Hostname(), u.Port()
	if h := u.Query().Get("host"); h != "" {
		host = h
	}
	if p := u.Query().Get("port"); p != "" {
		port = p
	}
	if port == "" {
		port = "5432"
	}
	userName := u.User.Username()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: free port: %v", err)
	}
	listen := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()

	dir, err := os.MkdirTemp("", "lakewrite-pgbouncer-")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ini := fmt.Sprintf(`[databases]
%s = host=%s port=%s dbname=%s user=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = any
pool_mode = %s
server_round_robin = 1
default_pool_size = %d
max_client_conn = 200
ignore_startup_parameters = extra_float_digits,application_name
logfile = %s
pidfile = %s
`, db, host, port, db, userName, listen, mode, poolSize, filepath.Join(dir, "pgbouncer.log"), filepath.Join(dir, "pgbouncer.pid"))
	cfgPath := filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(cfgPath, []byte(ini), 0o644); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	cmd := exec.Command(bin, cfgPath)
	if os.Geteuid() == 0 {
		pu, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("pgtest: pgbouncer refuses root and there is no postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(pu.Uid)
		gid, _ := strconv.Atoi(pu.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("pgtest: start pgbouncer: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT) // PgBouncer's immediate shutdown
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	q := url.Values{}
	q.Set("sslmode", "disable")
	q.Set("default_query_exec_mode", "simple_protocol")
	through := (&url.URL{Scheme: "postgres", User: url.User(userName), Host: "127.0.0.1:" + strconv.Itoa(listen),
		Path: "/" + db, RawQuery: q.Encode()}).String()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := pgx.Connect(ctx, through)
		if err == nil {
			_, err = c.Exec(ctx, "SELECT 1")
			_ = c.Close(ctx)
		}
		cancel()
		if err == nil {
			return through
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			t.Fatalf("pgtest: pgbouncer exited: %s\n%s", out.String(), log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgtest: pgbouncer does not answer: %v\n%s", err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
