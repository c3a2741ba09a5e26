package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The example runs end to end: the second run scores only the changed
// reviews (2 of 2,000 updated, 2 deleted) and the output equals a full
// re-score.
func TestModelExample(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-rows", "2000", "-database-url", pgtest.URL(t), "-warehouse", t.TempDir()}, &out, &errb)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	require.Contains(t, out.String(), "first run: model called for 2000 reviews")
	require.Contains(t, out.String(), "after changes: model called for 2 reviews")
	require.Contains(t, out.String(), "OK review_sentiment")
}
