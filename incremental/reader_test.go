package incremental_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"

	"github.com/lakewrite/lakewrite/facade"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// farFuture closes the final drain window once every writer has stopped.
var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

func newLedger(t *testing.T, datasets ...string) *ledger.Ledger {
	t.Helper()
	pool := pgtest.Pool(t)
	l, err := ledger.New(pool, nil)
	require.NoError(t, err)
	for _, id := range datasets {
		_, err := l.EnsureDataset(context.Background(), id, id, nil)
		require.NoError(t, err)
	}
	return l
}

func open(t *testing.T, l *ledger.Ledger, ds string) *ledger.Intent {
	t.Helper()
	in, err := l.Open(context.Background(), ledger.OpenParams{DatasetID: ds, WriterID: "pipeline.output", Sink: "iceberg_native", WriteMode: facade.Append})
	require.NoError(t, err)
	return in
}

func commit(t *testing.T, l *ledger.Ledger, in *ledger.Intent, at time.Time) {
	t.Helper()
	require.NoError(t, l.Commit(context.Background(), in, ledger.Outcome{RowCount: 1, CommittedAt: at}))
}

func ids(txns []ledger.Txn) []string {
	out := make([]string, len(txns))
	for i, x := range txns {
		out[i] = x.ID
	}
	return out
}

// A transaction between its Iceberg commit (which fixed committed_at) and its
// ledger commit holds the window below it; a naive high = now would have
// moved past it for good.
func TestWindowStopsBelowOpenIntent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const skew = 20 * time.Millisecond
	l := newLedger(t, "up")
	r, err := incremental.NewReader(l, skew)
	require.NoError(t, err)

	a := open(t, l, "up")
	commit(t, l, a, time.Now().Add(-time.Hour))

	b := open(t, l, "up")
	// The writer's clock runs behind the database's by just under skew;
	// committed_at is taken after the intent is visible (Iceberg commit).
	tauB := time.Now().Add(-(skew - 2*time.Millisecond)).Truncate(time.Millisecond)

	w1, txns, err := r.Next(ctx, "up", time.Time{})
	require.NoError(t, err)
	assert.Equal(t, []string{a.ID}, ids(txns))
	assert.False(t, w1.High.After(b.CreatedAt.Add(-skew)), "high stays below the open intent")
	assert.True(t, tauB.After(w1.High), "so B's commit time lands above the window")

	naiveHigh, err := l.Now(ctx)
	require.NoError(t, err)
	assert.False(t, tauB.After(naiveHigh), "a naive reader (high = now) would already be past B")

	commit(t, l, b, tauB)

	w2, txns2, err := r.Next(ctx, "up", w1.High)
	require.NoError(t, err)
	require.Equal(t, w1.High, w2.Low)
	drain, err := l.Committed(ctx, "up", w2.High, farFuture)
	require.NoError(t, err)
	assert.Equal(t, []string{b.ID}, append(ids(txns2), ids(drain)...), "B is read exactly once")

	naive, err := l.Committed(ctx, "up", naiveHigh, farFuture)
	require.NoError(t, err)
	assert.Empty(t, naive, "the naive reader skipped B")
}

func TestNextNeverMovesBackwards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLedger(t, "up")
	r, err := incremental.NewReader(l, 0)
	require.NoError(t, err)
	future := time.Now().Add(time.Hour)
	w, txns, err := r.Next(ctx, "up", future)
	require.NoError(t, err)
	assert.True(t, w.Empty())
	assert.Equal(t, future, w.Low)
	assert.Empty(t, txns)

	_, err = incremental.NewReader(l, -time.Second)
	require.ErrorIs(t, err, incremental.ErrInvalidArgument)
	_, err = incremental.NewReader(nil, 0)
	require.ErrorIs(t, err, incremental.ErrInvalidArgument)
}

// Writers commit (out of timestamp order relative to when the commit
// becomes visible, with clocks behind the database's) while a reader per
// dataset advances its watermark window by window. The union of the windows
// is exactly the committed set: no gaps, no duplicates.
func TestNoSkipUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const (
		skew        = 20 * time.Millisecond
		writersPer  = 3
		txnsPer     = 12
		abortOneInN = 6
	)
	datasets := []string{"up1", "up2"}
	l := newLedger(t, datasets...)
	r, err := incremental.NewReader(l, skew)
	require.NoError(t, err)

	var mu sync.Mutex
	committed := map[string]map[string]bool{}
	for _, ds := range datasets {
		committed[ds] = map[string]bool{}
	}

	var writers sync.WaitGroup
	writersDone := make(chan struct{})
	errs := make(chan error, 64)
	for wi, ds := range datasets {
		for k := range writersPer {
			writers.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(wi), uint64(k)))
				for range txnsPer {
					if err := writeOnce(ctx, l, ds, rng, skew, abortOneInN, &mu, committed[ds]); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}

	type result struct {
		ds        string
		seen      map[string]int
		nonEmpty  int
		windows   int
		violation error
	}
	results := make(chan result, len(datasets))
	var readers sync.WaitGroup
	for _, ds := range datasets {
		readers.Go(func() {
			res := result{ds: ds, seen: map[string]int{}}
			low := time.Time{}
			consume := func(w incremental.Window, txns []ledger.Txn) {
				for _, x := range txns {
					res.seen[x.ID]++
					if !w.Contains(x.CommittedAt) && res.violation == nil {
						res.violation = fmt.Errorf("txn %s at %s outside window %s", x.ID, x.CommittedAt, w)
					}
				}
				if len(txns) > 0 {
					res.nonEmpty++
				}
				res.windows++
				low = w.High
			}
			for {
				select {
				case <-writersDone:
					// Every writer has stopped: nothing is in flight, so a
					// final window up to any time is safe.
					txns, err := l.Committed(ctx, ds, low, farFuture)
					if err != nil {
						res.violation = err
					}
					consume(incremental.Window{Low: low, High: farFuture}, txns)
					results <- res
					return
				default:
				}
				w, txns, err := r.Next(ctx, ds, low)
				if err != nil {
					res.violation = err
					results <- res
					return
				}
				if !w.Low.Equal(low) || w.High.Before(w.Low) {
					res.violation = fmt.Errorf("window %s does not continue from %s", w, low)
				}
				consume(w, txns)
				time.Sleep(time.Millisecond) // be gentle with a shared machine; not a timing assertion
			}
		})
	}

	writers.Wait()
	close(writersDone)
	readers.Wait()
	close(errs)
	close(results)
	for err := range errs {
		require.NoError(t, err)
	}

	for res := range results {
		require.NoError(t, res.violation, res.ds)
		want := committed[res.ds]
		require.NotEmpty(t, want)
		for id, n := range res.seen {
			assert.Equal(t, 1, n, "%s: txn %s read %d times", res.ds, id, n)
			assert.True(t, want[id], "%s: txn %s read but not committed", res.ds, id)
		}
		for id := range want {
			assert.Contains(t, res.seen, id, "%s: committed txn %s skipped", res.ds, id)
		}
		// The ledger agrees with what the writers saw commit.
		all, err := l.Committed(ctx, res.ds, time.Time{}, farFuture)
		require.NoError(t, err)
		assert.Len(t, all, len(want))
		assert.GreaterOrEqual(t, res.nonEmpty, 2, "%s: the reader read while writers wrote", res.ds)
		t.Logf("%s: %d committed, %d windows (%d non-empty)", res.ds, len(want), res.windows, res.nonEmpty)
	}
}

// writeOnce is one write: intent, compute, Iceberg commit (fixes
// committed_at on a clock behind the database's by up to skew-1ms, truncated
// to milliseconds), a gap, then the ledger commit, or an abort.
func writeOnce(ctx context.Context, l *ledger.Ledger, ds string, rng *rand.Rand, skew time.Duration, abortOneInN int,
	mu *sync.Mutex, committed map[string]bool) error {
	in, err := l.Open(ctx, ledger.OpenParams{DatasetID: ds, WriterID: "pipeline.output", Sink: "iceberg_native", WriteMode: facade.Append})
	if err != nil {
		return err
	}
	time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond) // compute
	behind := time.Duration(rng.Int64N(int64(skew - time.Millisecond)))
	tau := time.Now().Add(-behind).Truncate(time.Millisecond)
	time.Sleep(time.Duration(rng.IntN(6000)) * time.Microsecond) // between Iceberg commit and ledger commit
	if rng.IntN(abortOneInN) == 0 {
		return l.Abort(ctx, in, errors.New("simulated failure"))
	}
	if err := l.Commit(ctx, in, ledger.Outcome{RowCount: 1, CommittedAt: tau}); err != nil {
		return err
	}
	mu.Lock()
	committed[in.ID] = true
	mu.Unlock()
	return nil
}
