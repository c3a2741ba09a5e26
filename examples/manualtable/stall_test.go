package manualtable_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/ledger"
)

// A client that sends part of an upload and then stops sending, without
// closing its connection, does not hold the dataset: the body read fails
// after the stall timeout, the intent is aborted, the table is unchanged,
// and the next upload goes through at once. A client that disconnects
// mid-upload likewise leaves no open intent.
func TestStalledClientFreesTheDataset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, envOptions{stall: 300 * time.Millisecond, batchRows: 10})
	require.Equal(t, http.StatusCreated, e.declare("m", "id bigint", "name text").status)

	openIntents := func() int {
		var n int
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions
			WHERE dataset_id = 'm' AND status = 'open'`).Scan(&n))
		return n
	}

	// Stall: the body pipe is never closed while the server waits.
	pr, pw := io.Pipe()
	go func() {
		_, _ = io.WriteString(pw, "id,name\n")
		for i := range 50 {
			_, _ = fmt.Fprintf(pw, "%d,row %d\n", i, i)
		}
		// ... and then nothing more, until the test ends.
	}()
	t.Cleanup(func() { _ = pw.Close() })
	start := time.Now()
	resp, err := e.send(http.MethodPost, "/datasets/m/rows", "text/csv", pr)
	if err == nil {
		require.NotEqual(t, http.StatusOK, resp.status, "body: %s", resp.body)
	}
	require.Less(t, time.Since(start), 20*time.Second)
	require.Eventually(t, func() bool { return openIntents() == 0 }, 20*time.Second, 20*time.Millisecond)
	var aborted int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions
		WHERE dataset_id = 'm' AND status = $1`, ledger.StatusAborted).Scan(&aborted))
	require.Equal(t, 1, aborted)
	require.Zero(t, e.currentSnapshot("m"))

	// Disconnect mid-upload: the client's context ends while sending.
	cctx, cancel := context.WithCancel(ctx)
	pr2, pw2 := io.Pipe()
	go func() {
		_, _ = io.WriteString(pw2, "id,name\n1,a\n")
		time.Sleep(100 * time.Millisecond)
		cancel()
		_ = pw2.Close()
	}()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, e.srv.URL+"/datasets/m/rows", pr2)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "text/csv")
	if r, err := e.srv.Client().Do(req); err == nil {
		_ = r.Body.Close()
	}
	require.Eventually(t, func() bool { return openIntents() == 0 }, 20*time.Second, 20*time.Millisecond)

	// The dataset is free: the next upload commits.
	res := e.uploadCSV("m", "", "id,name\n1,"+strings.Repeat("x", 3)+"\n").result(t)
	require.EqualValues(t, 1, res.Rows)
}
