package writestrategy_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

const (
	envCheckKillURL = "LAKEWRITE_CHECKKILL_DATABASE_URL"
	checkKillApp    = "lakewrite-checkkill-child"
	checkKillRows   = 7
)

// checkKillSlow is a write whose statement runs for 15 s on the intent's
// held session (the Postgres arm's insert, the Iceberg arm's compute).
var checkKillSlow = writestrategy.Transform{Output: "slowout", Source: "orders",
	Steps: []writestrategy.Step{{Name: "s", SQL: "SELECT * FROM source WHERE (SELECT true FROM pg_sleep(15))"}}}

// TestCheckKillChild is the writer process of TestKilledDuringStatement;
// run by the test runner it has nothing to do.
func TestCheckKillChild(t *testing.T) {
	dbURL := os.Getenv(envCheckKillURL)
	if dbURL == "" {
		return
	}
	w := newWorldOn(t, dbURL, nil, nil, nil, nil)
	_, err := w.write(checkKillSlow)
	require.NoError(t, err)
	t.Fatal("the write ended: the parent did not kill it")
}

// A writer SIGKILLed while a long statement of its write runs on the
// intent's held session (a 15 s insert on the Postgres arm, a 15 s
// compute on the Iceberg arm) frees its dataset within the held
// session's client check interval, not when the statement would have
// ended: the next write, waiting at most 8 s, gets the dataset and
// writes; the dead writer's statement was cancelled with its session, so
// its write never commits (its intent is reconciled as aborted, and stays
// so once its backend is gone).
func TestKilledDuringStatement(t *testing.T) {
	t.Parallel()
	for _, sk := range []sink.Sink{sink.Postgres, sink.Iceberg} {
		t.Run(string(sk), func(t *testing.T) {
			t.Parallel()
			killedDuringStatement(t, sk)
		})
	}
}

func killedDuringStatement(t *testing.T, sk sink.Sink) {
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	w := newWorldOn(t, dbURL, nil, nil, nil, &ledger.Config{WaitTimeout: 8 * time.Second})
	seedRowStore(t, w.pool, "orders", ordersSchema, ordersSQL, checkKillRows)
	ensureOutputs(t, w.pool, "slowout")
	if sk == sink.Iceberg {
		w.iceberg("slowout") // the flags live in the database: the child's too
	}
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	q := u.Query()
	app := checkKillApp + "-" + string(sk) // the subtests' children run at once
	q.Set("application_name", app)
	u.RawQuery = q.Encode()

	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, os.Args[0], "-test.run=^TestCheckKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCheckKillURL+"="+u.String())
	out := &watchWriter{marker: "\x00", ready: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Wait until the child's statement runs, then kill it.
	for running := false; !running; {
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_stat_activity
			WHERE application_name = $1 AND state = 'active' AND query LIKE '%pg_sleep(15)%'`, app).Scan(&running))
		select {
		case err := <-exited:
			t.Fatalf("the child ended before its statement ran: %v\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	var dead string
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT id::text FROM lakewrite.pipeline_build_transactions
		WHERE dataset_id = 'slowout' AND status = 'open'`).Scan(&dead))
	require.NoError(t, cmd.Process.Kill())
	<-exited

	res, err := w.d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: writestrategy.Transform{Output: "slowout", Source: "orders"}})
	require.NoError(t, err, "the dead writer's dataset was freed while its statement would still run")
	require.Equal(t, sk, res[0].Sink)
	waitAppGone(t, w, app)
	txn, err := w.ledger.Get(ctx, dead)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusAborted, txn.Status, "the dead writer's write never committed")
	require.EqualValues(t, checkKillRows, res[0].Rows)
	ds, err := w.ledger.Dataset(ctx, "slowout")
	require.NoError(t, err)
	require.EqualValues(t, checkKillRows, ds.RowCount)
	require.Equal(t, map[string]int{"aborted/" + sinkName(sk): 1, "committed/" + sinkName(sk): 1}, intentRows(t, w, "slowout"))
}

// waitAppGone waits until the sessions of application app ended.
func waitAppGone(t *testing.T, w *world, app string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var n int
		require.NoError(t, w.pool.QueryRow(context.Background(),
			`SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n))
		if n == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), fmt.Sprintf("the sessions of %s did not end", app))
		time.Sleep(20 * time.Millisecond)
	}
}
