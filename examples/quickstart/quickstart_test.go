package main

import (
	"bytes"
	"context"
	"testing"

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
