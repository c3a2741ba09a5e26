package writestrategy_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// envLoadKill marks the child process of TestLoadKilledMidStream (which
// also sets envCrashURL, so that the child starts no database server).
const envLoadKill = "LAKEWRITE_LOADKILL_DATASET"

// TestLoadKillChild is the loader process of TestLoadKilledMidStream: it
// loads record batches into the dataset named by envLoadKill and, after
// three batches, prints crashMarker and blocks until it is killed. Run by
// the test runner it has nothing to do.
func TestLoadKillChild(t *testing.T) {
	id := os.Getenv(envLoadKill)
	if id == "" {
		return
	}
	w := newWorldOn(t, os.Getenv(envCrashURL), nil, nil, nil, nil)
	mem := memory.NewGoAllocator()
	batches := func(yield func(arrow.RecordBatch, error) bool) {
		for i := 0; ; i++ {
			if i == 3 {
				fmt.Println(crashMarker)
				select {} // wait for SIGKILL in the middle of the load
			}
			rec := loadBatch(mem, i*100, i*100+100)
			more := yield(rec, nil)
			rec.Release()
			if !more {
				return
			}
		}
	}
	_, err := w.d.Load(context.Background(), writestrategy.LoadRequest{WriterID: writer, DatasetID: id, Batches: batches})
	t.Fatalf("the load returned instead of blocking: %v", err)
}

// A loader SIGKILLed in the middle of its batches leaves nothing visible
// on either sink; the next load of the dataset reconciles the dead intent
// and lands.
func TestLoadKilledMidStream(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	w := newWorldOn(t, url, nil, nil, nil, nil)
	ensureOutputs(t, w.pool, "k_pg", "k_ice")
	w.iceberg("k_ice")
	for _, id := range []string{"k_pg", "k_ice"} {
		killLoader(t, url, id)
		require.Equal(t, facade.Checksum{}, w.checksum(id), id)
		var rows int
		require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT count(*) FROM lakewrite.dataset_rows WHERE dataset_id = $1`, id).Scan(&rows))
		require.Zero(t, rows, id)
		_, err := w.lake.(*facade.Facade).LoadTable(context.Background(), id)
		if err == nil {
			t.Fatalf("%s: a table exists after the killed load", id)
		}
		res, err := w.load(writestrategy.LoadRequest{DatasetID: id, SQL: `SELECT 1::bigint AS id`})
		require.NoError(t, err, id)
		require.Equal(t, int64(1), res.Rows)
		require.Equal(t, int64(1), w.checksum(id).Rows)
		var aborted int
		require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT count(*) FROM lakewrite.pipeline_build_transactions
			WHERE dataset_id = $1 AND status = 'aborted'`, id).Scan(&aborted))
		require.Equal(t, 1, aborted, id)
		require.Zero(t, w.openIntents(id), id)
	}
}

func killLoader(t *testing.T, url, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestLoadKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCrashURL+"="+url, envLoadKill+"="+id)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var out []string
	reached := false
	for sc := bufio.NewScanner(stdout); sc.Scan(); {
		if sc.Text() == crashMarker {
			reached = true
			break
		}
		out = append(out, sc.Text())
	}
	_ = cmd.Process.Kill()
	err = cmd.Wait()
	require.True(t, reached, "the loader ended early (%v)\nstdout:\n%s\nstderr:\n%s", err, strings.Join(out, "\n"), stderr.String())
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee))
	ws, ok := ee.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "loader ended with %v", err)
}
