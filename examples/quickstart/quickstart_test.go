package main

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The main job runs end to end (small) so it cannot rot.
func TestQuickstart(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-rows", "3000", "-database-url", pgtest.URL(t), "-warehouse", t.TempDir()}, &out, &errb)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	for _, want := range []string{"parity OK  orders_enriched", "parity OK  daily_revenue", "parity OK  orders_large",
		"parity OK  orders_small", "category_totals", "All outputs written and verified"} {
		require.Contains(t, out.String(), want)
	}
}

// Without -warehouse the quickstart reruns against one persistent
// database: it resets the tables an earlier run left in the catalog (here
// one whose warehouse was removed afterwards) and drops its own at exit.
func TestQuickstartRerunsOnPersistentDatabase(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	tables := func() int {
		conn, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		defer conn.Close(ctx)
		var n int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM iceberg_tables`).Scan(&n))
		return n
	}
	quick := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(ctx, append([]string{"-rows", "2000", "-database-url", url}, args...), &out, &errb)
		require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
		require.Contains(t, out.String(), "All outputs written and verified")
		require.Contains(t, out.String(), "phases: resolve ")
		return out.String()
	}
	// A run with a warehouse of its own keeps its tables; the warehouse
	// then disappears, leaving catalog rows that point at nothing.
	gone := t.TempDir()
	quick("-warehouse", gone)
	require.Equal(t, 4, tables())
	require.NoError(t, os.RemoveAll(gone))
	for range 2 {
		quick()
		require.Equal(t, 0, tables(), "the run dropped its tables")
	}
}

func TestQuickstartBadFlags(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 2, run(context.Background(), []string{"-rows", "0"}, &out, &errb))
	require.Equal(t, 2, run(context.Background(), []string{"-nope"}, &out, &errb))
}

// -h never prints the database URL (which may hold a password).
func TestHelpPrintsNoSecrets(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://user:s3cret-pw@127.0.0.1:1/db")
	var out, errb bytes.Buffer
	run(context.Background(), []string{"-h"}, &out, &errb)
	require.NotContains(t, out.String()+errb.String(), "s3cret-pw")
	require.Contains(t, errb.String(), "$DATABASE_URL")
}
