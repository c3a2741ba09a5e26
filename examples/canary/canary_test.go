package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type session struct {
	t         *testing.T
	url       string
	warehouse string
}

// run runs one command like a fresh process would, and returns its exit
// code, stdout and stderr.
func (s *session) run(args ...string) (int, string, string) {
	s.t.Helper()
	var out, errb bytes.Buffer
	full := append([]string{args[0], "-database-url", s.url, "-warehouse", s.warehouse}, args[1:]...)
	code := run(context.Background(), full, &out, &errb)
	return code, out.String(), errb.String()
}

// ok runs a command that must succeed and returns its stdout.
func (s *session) ok(args ...string) string {
	s.t.Helper()
	code, out, errs := s.run(args...)
	require.Equal(s.t, exitOK, code, "canary %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), out, errs)
	return out
}

func newSession(t *testing.T) *session {
	t.Helper()
	url := pgtest.URL(t)
	// Start from a database without the lakewrite schema, as an operator's
	// fresh database would be.
	conn := pgtest.Conn(t, url)
	_, err := conn.Exec(context.Background(), `DROP SCHEMA lakewrite CASCADE`)
	require.NoError(t, err)
	return &session{t: t, url: url, warehouse: t.TempDir()}
}

// The runbook of the README, end to end, one process per command.
func TestRunbook(t *testing.T) {
	t.Parallel()
	s := newSession(t)

	code, _, errs := s.run("check", demoOutput)
	require.Equal(t, exitFailed, code)
	require.Contains(t, errs, "run `canary init` first")

	out := s.ok("init")
	require.Contains(t, out, "writer pipeline.output: registered default=pg max=iceberg_native")
	require.Contains(t, out, "source demo_orders: seeded rows=1000 sink=pg")
	require.Contains(t, out, "output demo_orders_clean: registered (transform of demo_orders)")
	out = s.ok("init") // idempotent
	require.Contains(t, out, "already registered")
	require.Contains(t, out, "source demo_orders: already seeded rows=1000")

	out = s.ok("check", demoOutput)
	require.Contains(t, out, "writer pipeline.output: default=pg max=iceberg_native")
	require.Contains(t, out, "override demo_orders_clean: none")
	require.Contains(t, out, "decision: sink=pg source=default clamped=false")
	require.Contains(t, out, "contents: none yet")
	require.Contains(t, out, "preflight: every value fits its Iceberg type exactly")

	// verify before the flip: no Iceberg table yet.
	code, out, errs = s.run("verify", demoOutput)
	require.Equal(t, exitFailed, code)
	require.Contains(t, out, "iceberg table: none")
	require.Contains(t, errs, "parity FAILED")

	out = s.ok("set", demoOutput)
	require.Contains(t, out, "override demo_orders_clean: set to iceberg_native")
	require.Contains(t, out, "decision: sink=iceberg_native source=override")

	out = s.ok("deploy", demoOutput)
	require.Contains(t, out, "deployed demo_orders_clean: sink=iceberg_native mode=replace rows=667 ")
	require.Contains(t, out, "snapshot=")

	out = s.ok("verify", demoOutput)
	require.Contains(t, out, "preflight: every value fits its Iceberg type exactly")
	require.Contains(t, out, "postgres compute: rows=667 ")
	require.Contains(t, out, "iceberg table:    rows=667 ")
	require.Contains(t, out, "parity OK")

	out = s.ok("check", demoOutput)
	require.Contains(t, out, "override demo_orders_clean: iceberg_native")
	require.Contains(t, out, "contents: sink=iceberg_native rows=667")

	out = s.ok("revert", demoOutput)
	require.Contains(t, out, "override demo_orders_clean: cleared")
	require.Contains(t, out, "decision: sink=pg source=default")
	require.Contains(t, out, "effective within the resolver TTL")
	require.Contains(t, out, "at most 10s")

	out = s.ok("check", demoOutput)
	require.Contains(t, out, "override demo_orders_clean: none")
	require.Contains(t, out, "decision: sink=pg")
	require.Contains(t, out, "contents: sink=iceberg_native", "until the next deploy")

	out = s.ok("deploy", demoOutput)
	require.Contains(t, out, "deployed demo_orders_clean: sink=pg mode=replace rows=667 ")
	require.NotContains(t, out, "snapshot=")
	out = s.ok("check", demoOutput)
	require.Contains(t, out, "contents: sink=pg rows=667")

	out = s.ok("revert", demoOutput)
	require.Contains(t, out, "override demo_orders_clean: none to clear")
}

// check and verify show the Iceberg preflight of an output: columns whose
// values an Iceberg write rounds (a note; parity holds at the written
// scale) or refuses (a warning; the write, and verify's compute, fail).
func TestPreflightInCheckAndVerify(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	require.Contains(t, s.ok("init"), "output demo_category_stats: registered (transform of demo_orders)")

	const rounded = `preflight note: demo_category_stats column "big_order_share" (numeric): 3 value(s) rounded half-even to the column's scale`
	out := s.ok("check", demoStats)
	require.Contains(t, out, "decision: sink=pg")
	require.Contains(t, out, rounded)
	require.Contains(t, out, "a strict writer (cursor.NumericStrict) refuses them")
	require.NotContains(t, out, "WARNING")
	// Not an output: no preflight.
	require.NotContains(t, s.ok("check", demoSource), "preflight")

	s.ok("set", demoStats)
	require.Contains(t, s.ok("deploy", demoStats), "deployed demo_category_stats: sink=iceberg_native mode=replace rows=3 ")
	out = s.ok("verify", demoStats)
	require.Contains(t, out, rounded)
	require.Contains(t, out, "parity OK")

	// A value Iceberg cannot hold: check warns, verify fails.
	conn := pgtest.Conn(t, s.url)
	_, err := conn.Exec(context.Background(), `UPDATE lakewrite.dataset_rows SET data = jsonb_set(data, '{ts}', '"infinity"')
		WHERE dataset_id = $1 AND (data->>'id')::int IN (1, 4)`, demoSource)
	require.NoError(t, err)
	out = s.ok("check", demoOutput)
	require.Contains(t, out, `preflight WARNING: demo_orders_clean column "ts" (timestamptz): 2 value(s) refused (first at row 0: timestamp ±infinity)`)
	require.Contains(t, out, "fails at the first refused value")
	code, out, errs := s.run("verify", demoOutput)
	require.Equal(t, exitFailed, code)
	require.Contains(t, out, `preflight WARNING: demo_orders_clean column "ts"`)
	require.Contains(t, errs, "timestamp ±infinity")
}

// verify fails with both figures when the Iceberg table and the Postgres
// compute differ (here: the source changed after the deploy).
func TestVerifyMismatch(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	s.ok("init")
	s.ok("set", demoOutput)
	s.ok("deploy", demoOutput)
	s.ok("verify", demoOutput)

	conn := pgtest.Conn(t, s.url)
	_, err := conn.Exec(context.Background(), `DELETE FROM lakewrite.dataset_rows WHERE dataset_id = $1 AND (data->>'id')::int <= 3`, demoSource)
	require.NoError(t, err)
	code, out, errs := s.run("verify", demoOutput)
	require.Equal(t, exitFailed, code)
	require.Contains(t, out, "postgres compute: rows=665 ")
	require.Contains(t, out, "iceberg table:    rows=667 ")
	require.Contains(t, errs, "parity FAILED for demo_orders_clean: rows postgres=665 iceberg=667; checksum postgres=665:")

	// Re-deploying brings the table back to parity.
	s.ok("deploy", demoOutput)
	require.Contains(t, s.ok("verify", demoOutput), "parity OK")
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	s.ok("init")
	cases := []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"deploy", "nope"}, exitUsage, `unknown output "nope"`},
		{[]string{"verify", "nope"}, exitUsage, `unknown output "nope"`},
		{[]string{"check", "nope"}, exitFailed, "dataset not found"},
		{[]string{"set", "nope"}, exitFailed, "dataset not found"},
		{[]string{"set", "-sink", "delta", demoOutput}, exitUsage, "invalid sink"},
		{[]string{"check"}, exitUsage, "needs exactly one <dataset>"},
		{[]string{"init", "extra"}, exitUsage, "takes no arguments"},
	}
	for _, c := range cases {
		code, _, errs := s.run(c.args...)
		require.Equal(t, c.code, code, "%v: %s", c.args, errs)
		require.Contains(t, errs, c.err, "%v", c.args)
	}

	// Above the ceiling: lower the writer's max (the kill switch), then try
	// to set an Iceberg override.
	conn := pgtest.Conn(t, s.url)
	_, err := conn.Exec(context.Background(), `UPDATE lakewrite.writer_flags SET max_mode = 'pg' WHERE writer_id = $1`, writerID)
	require.NoError(t, err)
	code, _, errs := s.run("set", demoOutput)
	require.Equal(t, exitFailed, code)
	require.Contains(t, errs, "above")
	// init leaves a lowered max alone.
	require.Contains(t, s.ok("init"), "already registered default=pg max=pg (left unchanged)")

	var out, errb bytes.Buffer
	require.Equal(t, exitUsage, run(context.Background(), []string{"check", "-database-url", "", demoOutput}, &out, &errb))
	require.Contains(t, errb.String(), "no database")
	require.Equal(t, exitUsage, run(context.Background(), []string{"frobnicate"}, &out, &errb))
	require.Equal(t, exitUsage, run(context.Background(), nil, &out, &errb))
}

// -h never prints the database URL (which may hold a password), and the
// URL still defaults to $DATABASE_URL.
func TestHelpPrintsNoSecrets(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://user:s3cret-pw@127.0.0.1:1/db?connect_timeout=1")
	for _, args := range [][]string{{"-h"}, {"init", "-h"}, {}} {
		var out, errb bytes.Buffer
		run(context.Background(), args, &out, &errb)
		require.NotContains(t, out.String()+errb.String(), "s3cret-pw", "args %q", args)
		require.Contains(t, errb.String(), "$DATABASE_URL")
	}
	// The environment default is used: the command tries that server.
	var out, errb bytes.Buffer
	require.Equal(t, 1, run(context.Background(), []string{"init"}, &out, &errb), errb.String())
	require.NotContains(t, errb.String(), "no database")
}

// intents lists a dead writer's open intent with what the next write does
// with it; drop decommissions the output (reconciling that intent first),
// and init + deploy re-create it.
func TestIntentsAndDrop(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	s.ok("init")
	s.ok("set", demoOutput)
	s.ok("deploy", demoOutput)
	require.Contains(t, s.ok("intents"), "no open intents")

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.url)
	require.NoError(t, err)
	l, err := ledger.New(conn, nil)
	require.NoError(t, err)
	in, err := l.Open(ctx, ledger.OpenParams{DatasetID: demoOutput, WriterID: writerID, Sink: sink.Iceberg, WriteMode: facade.Replace})
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx)) // the writer dies
	out := s.ok("intents")
	require.Contains(t, out, "intent "+in.ID+" dataset "+demoOutput+" writer "+writerID+" sink iceberg_native mode replace age ")
	require.Contains(t, out, "holder gone next abort")

	out = s.ok("drop", demoOutput)
	require.Contains(t, out, "dropped "+demoOutput+": Iceberg table dropped true")
	require.Contains(t, s.ok("intents"), "no open intents")
	code, _, errs := s.run("check", demoOutput)
	require.Equal(t, exitFailed, code)
	require.Contains(t, errs, "not found")

	require.Contains(t, s.ok("init"), "output demo_orders_clean: registered")
	require.Contains(t, s.ok("deploy", demoOutput), "deployed demo_orders_clean: sink=pg mode=replace rows=667 ")
}
