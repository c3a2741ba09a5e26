package incremental_test

import (
	"math/rand/v2"
	"testing"
	"testing/quick"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/sink"
)

func decision(m sink.Sink) sink.Decision {
	return sink.Decide(sink.Setting{WriterID: "pipeline.output", DatasetID: "ds", WriterKnown: true, Default: m, Max: sink.Iceberg})
}

func TestClampRule(t *testing.T) {
	t.Parallel()
	pg, ice := decision(sink.Postgres), decision(sink.Iceberg)
	clampedIce := sink.Decide(sink.Setting{WriterID: "w", DatasetID: "ds", WriterKnown: true, Default: sink.Postgres, Max: sink.Postgres, Override: sink.Iceberg})
	require.Equal(t, sink.Postgres, clampedIce.Sink)

	_, clamped := incremental.ClampReadMode(clampedIce, incremental.ReadDelta)
	assert.False(t, clamped, "the effective sink counts, not the requested mode")

	cases := []struct {
		d       sink.Decision
		req     incremental.ReadMode
		want    incremental.ReadMode
		clamped bool
	}{
		{pg, incremental.ReadDelta, incremental.ReadDelta, false},
		{pg, incremental.ReadSnapshot, incremental.ReadSnapshot, false},
		{ice, incremental.ReadDelta, incremental.ReadSnapshot, true},
		{ice, incremental.ReadSnapshot, incremental.ReadSnapshot, false},
		{sink.Decision{}, incremental.ReadDelta, incremental.ReadSnapshot, true},
	}
	for _, c := range cases {
		got, clamped := incremental.ClampReadMode(c.d, c.req)
		assert.Equal(t, c.want, got, "%s %s", c.d.Sink, c.req)
		assert.Equal(t, c.clamped, clamped, "%s %s", c.d.Sink, c.req)
	}
}

func TestWindowAllowsDelta(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 7, 4, 0, 0, 0, 0, time.UTC)
	assert.True(t, incremental.WindowAllowsDelta(incremental.Window{Low: t0, High: t0.Add(1)}))
	assert.True(t, incremental.WindowAllowsDelta(incremental.Window{Low: t0, High: t0}), "empty window: a delta that reads nothing")
	assert.False(t, incremental.WindowAllowsDelta(incremental.Window{High: t0}), "no watermark: snapshot")
	assert.False(t, incremental.WindowAllowsDelta(incremental.Window{Low: t0, High: t0.Add(-1)}), "inverted")
}

// genTime turns a quick-generated int64 into a time in a bounded range with
// many collisions.
func genTime(x int64) time.Time {
	return time.Unix(1_780_000_000, 0).Add(time.Duration(x%5000) * time.Millisecond)
}

// Consecutive windows built with Next partition (first.Low, last.High]:
// every time in it lies in exactly one window, every time outside in none.
func TestPropertyWindowsPartition(t *testing.T) {
	t.Parallel()
	f := func(start int64, highs []int64, probes []int64) bool {
		w := incremental.Window{Low: genTime(start), High: genTime(start)}
		var ws []incremental.Window
		for _, h := range highs {
			w = w.Next(genTime(h))
			if w.High.Before(w.Low) || !incremental.WindowAllowsDelta(w) {
				return false // never backwards
			}
			ws = append(ws, w)
		}
		if len(ws) == 0 {
			return true
		}
		lo, hi := ws[0].Low, ws[len(ws)-1].High
		for i := 1; i < len(ws); i++ {
			if !ws[i].Low.Equal(ws[i-1].High) {
				return false // contiguous
			}
		}
		for _, p := range append(probes, start, highs[len(highs)-1]) {
			x := genTime(p)
			n := 0
			for _, w := range ws {
				if w.Contains(x) {
					n++
				}
			}
			want := 0
			if x.After(lo) && !x.After(hi) {
				want = 1
			}
			if n != want {
				return false
			}
		}
		return true
	}
	require.NoError(t, quick.Check(f, &quick.Config{MaxCount: 2000}))
}

// Empty, Contains and a zero Low agree.
func TestPropertyWindowContains(t *testing.T) {
	t.Parallel()
	f := func(lo, hi, x int64, zeroLow bool) bool {
		w := incremental.Window{Low: genTime(lo), High: genTime(hi)}
		if zeroLow {
			w.Low = time.Time{}
		}
		xt := genTime(x)
		in := w.Contains(xt)
		if zeroLow {
			return in == !xt.After(w.High) && !w.Empty()
		}
		if w.Empty() && in {
			return false
		}
		return in == (xt.After(w.Low) && !xt.After(w.High))
	}
	require.NoError(t, quick.Check(f, &quick.Config{MaxCount: 5000}))
}

// The safety argument of SafeHigh, as a property: a transaction whose intent
// was visible (created_at >= oldest open) or became visible after dbNow, and
// whose commit time was taken after that on a clock at most skew behind,
// always lands above the bound.
func TestPropertySafeHigh(t *testing.T) {
	t.Parallel()
	const skew = 50 * time.Millisecond
	f := func(now, oldest int64, hasOpen bool, seed uint64) bool {
		r := rand.New(rand.NewPCG(seed, 1))
		dbNow := genTime(now)
		old := dbNow.Add(-time.Duration(uint64(oldest)%10000) * time.Millisecond)
		high := incremental.SafeHigh(dbNow, old, hasOpen, skew)
		if high.After(dbNow.Add(-skew)) || (hasOpen && high.After(old.Add(-skew))) {
			return false
		}
		// An in-flight transaction: opened at created (>= old when visible,
		// or > dbNow when not), commit time taken later on a clock behind
		// by less than skew, truncated to milliseconds.
		var created time.Time
		if hasOpen && r.IntN(2) == 0 {
			created = old.Add(time.Duration(r.IntN(1000)) * time.Microsecond)
		} else {
			created = dbNow.Add(time.Duration(1+r.IntN(1000)) * time.Microsecond)
		}
		behind := time.Duration(r.Int64N(int64(skew - time.Millisecond)))
		tau := created.Add(time.Duration(1 + r.IntN(5000))).Add(-behind).Truncate(time.Millisecond)
		return tau.After(high)
	}
	require.NoError(t, quick.Check(f, &quick.Config{MaxCount: 5000}))
}

// Property form of the no-skip rule over a simulated history: transactions
// commit in random order relative to their timestamps; a reader advancing
// with SafeHigh windows sees each committed transaction exactly once.
func TestPropertySimulatedNoSkip(t *testing.T) {
	t.Parallel()
	const skew = 10 * time.Millisecond
	f := func(seed uint64) bool {
		r := rand.New(rand.NewPCG(seed, 2))
		base := time.Unix(1_780_000_000, 0)
		type txn struct {
			open, commit time.Time // database clock: intent visible, ledger commit visible
			tau          time.Time // committed_at
		}
		// Serialized per dataset: one open intent at a time.
		var txns []txn
		at := base
		for range 1 + r.IntN(30) {
			at = at.Add(time.Duration(1+r.IntN(20)) * time.Millisecond)
			open := at
			tauAt := open.Add(time.Duration(1+r.IntN(5)) * time.Millisecond)
			tau := tauAt.Add(-time.Duration(r.Int64N(int64(skew - time.Millisecond)))).Truncate(time.Millisecond)
			at = tauAt.Add(time.Duration(r.IntN(20)) * time.Millisecond)
			txns = append(txns, txn{open: open, commit: at, tau: tau})
		}
		seen := map[int]int{}
		low := time.Time{}
		for now := base; now.Before(at.Add(3 * skew)); now = now.Add(time.Duration(1+r.IntN(7)) * time.Millisecond) {
			var oldest time.Time
			hasOpen := false
			for _, x := range txns {
				if !x.open.After(now) && x.commit.After(now) {
					oldest, hasOpen = x.open, true
				}
			}
			w := incremental.Window{High: low}.Next(incremental.SafeHigh(now, oldest, hasOpen, skew))
			for i, x := range txns {
				if !x.commit.After(now) && w.Contains(x.tau) {
					seen[i]++
				}
			}
			low = w.High
		}
		for i := range txns {
			if seen[i] != 1 {
				return false
			}
		}
		return true
	}
	require.NoError(t, quick.Check(f, &quick.Config{MaxCount: 500}))
}

func TestWindowString(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 7, 4, 1, 2, 3, 0, time.UTC)
	assert.Equal(t, "(-inf, 2026-07-04T01:02:03Z]", incremental.Window{High: t0}.String())
	assert.True(t, incremental.Window{Low: t0, High: t0}.Empty())
	assert.False(t, incremental.Window{High: t0}.Empty())
}
