package incremental

import (
	"fmt"
	"time"
)

// Window is the half-open interval (Low, High] of ledger commit times
// (committed_at) a delta reader consumes in one build. A zero Low means "from
// the beginning". Successive windows of one reader share their bounds: the
// next Low is the previous High, so no commit time is
// in two windows and none falls between two.
type Window struct {
	Low, High time.Time
}

// contains reports whether t lies in (Low, High]. A zero Low is unbounded
// below.
func (w Window) contains(t time.Time) bool {
	return (w.Low.IsZero() || t.After(w.Low)) && !t.After(w.High)
}

// empty reports whether no time lies in the window.
func (w Window) empty() bool {
	return !w.Low.IsZero() && !w.High.After(w.Low)
}

// next returns the window that follows w up to high: (w.High, max(w.High,
// high)]. It never moves backwards; when high is not after w.High the
// window is empty ("nothing safe to read yet").
func (w Window) next(high time.Time) Window {
	return Window{Low: w.High, High: laterOf(w.High, high)}
}

func (w Window) String() string {
	low := "-inf"
	if !w.Low.IsZero() {
		low = w.Low.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("(%s, %s]", low, w.High.UTC().Format(time.RFC3339Nano))
}

// windowAllowsDelta reports whether a delta read over w is sound: the reader
// has a watermark (Low is not zero: a first build reads a snapshot) and the
// window is not inverted (High is not before Low). An empty window (High ==
// Low) allows a delta that reads nothing. Pure; it does not know the sink —
// apply clampReadMode too (or use [ChooseReadMode]).
func windowAllowsDelta(w Window) bool {
	return !w.Low.IsZero() && !w.High.Before(w.Low)
}

// safeHigh is the highest window upper bound that cannot skip a
// transaction still in flight, given the database clock dbNow read first,
// then the created_at of the dataset's oldest open intent (hasOpen false
// when none), and the clock-skew allowance skew:
//
//	high = min(dbNow, oldestOpen) - skew
//
// Why it is safe: a writer takes its commit time τ (the Iceberg snapshot
// timestamp, on its own clock) after its intent became visible. An intent
// visible when the reader looked has created_at >= oldestOpen, so τ >
// oldestOpen - skew; an intent not yet visible then became visible after
// dbNow was read, so τ > dbNow - skew. Either way τ > high: every
// transaction that commits after the reader looked lands above the window.
// skew must cover the writers' clock offset from the database plus the
// precision lost by committed_at (1 ms for Iceberg snapshot timestamps).
func safeHigh(dbNow, oldestOpen time.Time, hasOpen bool, skew time.Duration) time.Time {
	h := dbNow
	if hasOpen && oldestOpen.Before(h) {
		h = oldestOpen
	}
	return h.Add(-skew)
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
