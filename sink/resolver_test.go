package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingLookuper counts lookups and answers from a fixed table.
type countingLookuper struct {
	n        atomic.Int64
	settings map[string]Setting // by dataset
}

func (c *countingLookuper) Lookup(_ context.Context, writerID string, ids ...string) ([]Setting, error) {
	c.n.Add(1)
	out := make([]Setting, len(ids))
	for i, id := range ids {
		s, ok := c.settings[id]
		if !ok {
			s = Setting{WriterKnown: true, Default: Postgres, Max: Iceberg}
		}
		s.WriterID, s.DatasetID = writerID, id
		out[i] = s
	}
	return out, nil
}

// A revert (clearing the override) is observed once the TTL has passed, and
// not a moment later; the cached decision holds until then.
func TestResolverTTLAndRevert(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, _ := newFlags(t, "ds.canary")
	require.NoError(t, f.SetWriter(ctx, WriterFlags{WriterID: "pipeline.output", Default: Postgres, Max: Iceberg}))
	require.NoError(t, f.SetOverride(ctx, "pipeline.output", Iceberg, "ds.canary"))

	clock := &fakeClock{t: time.Date(2026, 7, 4, 12, 0, 0, 0, time.UTC)}
	r, err := NewResolver(f, &ResolverConfig{now: clock.Now}) // default TTL
	require.NoError(t, err)

	d, err := r.Resolve(ctx, "pipeline.output", "ds.canary")
	require.NoError(t, err)
	require.Equal(t, Iceberg, d.Sink)

	// Revert.
	n, err := f.ClearOverride(ctx, "pipeline.output", "ds.canary")
	require.NoError(t, err)
	require.Equal(t, 1, n)

	clock.Advance(DefaultTTL - time.Nanosecond)
	d, err = r.Resolve(ctx, "pipeline.output", "ds.canary")
	require.NoError(t, err)
	assert.Equal(t, Iceberg, d.Sink, "still cached just before the TTL")

	clock.Advance(time.Nanosecond)
	d, err = r.Resolve(ctx, "pipeline.output", "ds.canary")
	require.NoError(t, err)
	assert.Equal(t, Postgres, d.Sink, "the revert is observed at the TTL")
	assert.Equal(t, SourceDefault, d.Source)
	assert.LessOrEqual(t, DefaultTTL, MaxTTL)
	assert.LessOrEqual(t, MaxTTL, 10*time.Second)
}

func TestResolverCachesAndExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := &countingLookuper{}
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	r, err := NewResolver(src, &ResolverConfig{TTL: 2 * time.Second, now: clock.Now})
	require.NoError(t, err)

	for range 3 {
		_, err := r.Resolve(ctx, "w", "ds")
		require.NoError(t, err)
	}
	assert.EqualValues(t, 1, src.n.Load())
	clock.Advance(2 * time.Second)
	_, err = r.Resolve(ctx, "w", "ds")
	require.NoError(t, err)
	assert.EqualValues(t, 2, src.n.Load())

	// Distinct (writer, dataset) keys are cached apart.
	_, err = r.Resolve(ctx, "w2", "ds")
	require.NoError(t, err)
	assert.EqualValues(t, 3, src.n.Load())

	r.Invalidate()
	assert.Equal(t, 0, r.len())
	_, err = r.Resolve(ctx, "w", "ds")
	require.NoError(t, err)
	assert.EqualValues(t, 4, src.n.Load())
}

func TestResolverCacheBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := &countingLookuper{}
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	r, err := NewResolver(src, &ResolverConfig{maxEntries: 8, now: clock.Now})
	require.NoError(t, err)
	for i := range 100 {
		clock.Advance(time.Millisecond)
		_, err := r.Resolve(ctx, "w", fmt.Sprint("ds", i))
		require.NoError(t, err)
		require.LessOrEqual(t, r.len(), 8)
	}
	// The most recent entries survive (the one closest to expiry goes first).
	before := src.n.Load()
	_, err = r.Resolve(ctx, "w", "ds99")
	require.NoError(t, err)
	assert.Equal(t, before, src.n.Load())
}

// A full cache first drops what expired, then the oldest entries; the
// others stay cached.
func TestResolverCacheEvictsExpiredThenOldest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := &countingLookuper{}
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	r, err := NewResolver(src, &ResolverConfig{maxEntries: 3, TTL: time.Second, now: clock.Now})
	require.NoError(t, err)
	resolve := func(id string) {
		t.Helper()
		_, err := r.Resolve(ctx, "w", id)
		require.NoError(t, err)
	}
	resolve("a")
	clock.Advance(600 * time.Millisecond)
	resolve("b")
	resolve("c")
	clock.Advance(500 * time.Millisecond) // a expired, b and c not
	resolve("d")
	require.Equal(t, 3, r.len())
	before := src.n.Load()
	resolve("b")
	resolve("c")
	resolve("d")
	require.Equal(t, before, src.n.Load(), "b, c and d stayed cached")
	resolve("e") // full, nothing expired: b (the oldest) goes
	before = src.n.Load()
	resolve("c")
	resolve("d")
	resolve("e")
	require.Equal(t, before, src.n.Load())
	resolve("b")
	require.Equal(t, before+1, src.n.Load(), "b was evicted")
}

func TestResolverConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := &countingLookuper{settings: map[string]Setting{"ds1": {WriterKnown: true, Default: Postgres, Max: Iceberg, Override: Iceberg}}}
	var mu sync.Mutex
	now := time.Unix(0, 0)
	clockFn := func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Millisecond); return now }
	r, err := NewResolver(src, &ResolverConfig{maxEntries: 4, now: clockFn})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				id := fmt.Sprint("ds", (g+i)%6)
				d, err := r.Resolve(ctx, "w", id)
				assert.NoError(t, err)
				assert.Equal(t, id == "ds1", d.Sink == Iceberg)
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, r.len(), 4)
}

func TestResolverConfig(t *testing.T) {
	t.Parallel()
	src := &countingLookuper{}
	for _, c := range []*ResolverConfig{{TTL: 11 * time.Second}, {TTL: -time.Second}, {maxEntries: -1}} {
		_, err := NewResolver(src, c)
		require.ErrorIs(t, err, errInvalidArgument)
	}
	_, err := NewResolver(nil, nil)
	require.ErrorIs(t, err, errInvalidArgument)
	r, err := NewResolver(src, &ResolverConfig{TTL: MaxTTL})
	require.NoError(t, err)
	_, err = r.Resolve(context.Background(), "", "ds")
	require.ErrorIs(t, err, errInvalidArgument)
	_, err = r.Resolve(context.Background(), "w", "")
	require.ErrorIs(t, err, errInvalidArgument)
}

// Every decision is logged once, at Info, with the documented attributes.
func TestResolverLogsDecisions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	src := &countingLookuper{settings: map[string]Setting{"ds": {WriterKnown: true, Default: Postgres, Max: Postgres, Override: Iceberg}}}
	r, err := NewResolver(src, &ResolverConfig{Logger: log})
	require.NoError(t, err)
	_, err = r.Resolve(ctx, "pipeline.output", "ds")
	require.NoError(t, err)
	_, err = r.Resolve(ctx, "pipeline.output", "ds")
	require.NoError(t, err)

	dec := json.NewDecoder(&buf)
	for i, cached := range []bool{false, true} {
		var rec map[string]any
		require.NoError(t, dec.Decode(&rec), "record %d", i)
		assert.Equal(t, "INFO", rec["level"])
		assert.Equal(t, decisionLogLevel.String(), rec["level"])
		assert.Equal(t, "sink decision", rec["msg"])
		assert.Equal(t, "pipeline.output", rec["writer"])
		assert.Equal(t, "ds", rec["dataset"])
		assert.Equal(t, "pg", rec["sink"])
		assert.Equal(t, true, rec["clamped"])
		assert.Equal(t, "override", rec["source"])
		assert.Contains(t, rec["reason"], "clamped")
		assert.Equal(t, cached, rec["cached"])
	}
	assert.False(t, dec.More())
}

// Split pairs against real flags: both Iceberg, both Postgres, mixed.
func TestResolvePair(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, _ := newFlags(t, "split.matched", "split.unmatched")
	require.NoError(t, f.SetWriter(ctx, WriterFlags{WriterID: "pipeline.output", Default: Postgres, Max: Iceberg}))
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	r, err := NewResolver(f, &ResolverConfig{now: clock.Now})
	require.NoError(t, err)

	arms := RowSink[string]{
		Postgres: func(context.Context) (string, error) { return "combined statement", nil },
		Iceberg:  func(context.Context) (string, error) { return "two native writes", nil },
	}
	run := func() (string, error) {
		clock.Advance(DefaultTTL)
		p, err := r.ResolvePair(ctx, "pipeline.output", "split.matched", "split.unmatched")
		if err != nil {
			return "", err
		}
		return arms.RunPair(ctx, p)
	}

	got, err := run()
	require.NoError(t, err)
	assert.Equal(t, "combined statement", got)

	// Mixed: one flipped alone.
	require.NoError(t, f.SetOverride(ctx, "pipeline.output", Iceberg, "split.matched"))
	_, err = run()
	require.ErrorIs(t, err, ErrMixedPair)
	assert.Contains(t, err.Error(), `"split.matched" (iceberg_native) and "split.unmatched" (pg)`)
	assert.Contains(t, err.Error(), "flip the pair together")

	// Flipped together.
	require.NoError(t, f.SetOverride(ctx, "pipeline.output", Iceberg, "split.matched", "split.unmatched"))
	got, err = run()
	require.NoError(t, err)
	assert.Equal(t, "two native writes", got)

	_, err = r.ResolvePair(ctx, "pipeline.output", "split.matched", "split.matched")
	require.ErrorIs(t, err, errInvalidArgument)
}
