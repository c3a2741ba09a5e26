package sink_test

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

	"github.com/lakewrite/lakewrite/sink"
)

// countingLookuper counts lookups and answers from a fixed table.
type countingLookuper struct {
	n        atomic.Int64
	settings map[string]sink.Setting // by dataset
}

func (c *countingLookuper) Lookup(_ context.Context, writerID string, ids ...string) ([]sink.Setting, error) {
	c.n.Add(1)
	out := make([]sink.Setting, len(ids))
	for i, id := range ids {
		s, ok := c.settings[id]
		if !ok {
			s = sink.Setting{WriterKnown: true, Default: sink.Postgres, Max: sink.Iceberg}
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
	require.NoError(t, f.SetWriter(ctx, sink.WriterFlags{WriterID: "pipeline.output", Default: sink.Postgres, Max: sink.Iceberg}))
	require.NoError(t, f.SetOverride(ctx, "pipeline.output", sink.Iceberg, "ds.canary"))

	clock := &fakeClock{t: time.Date(2026, 7, 4, 12, 0, 0, 0, time.UTC)}
	r, err := sink.NewResolver(f, &sink.ResolverConfig{Now: clock.Now}) // default TTL
	require.NoError(t, err)

	d, err := r.Resolve(ctx, "pipeline.output", "ds.canary")
	require.NoError(t, err)
	require.Equal(t, sink.Iceberg, d.Sink)

	// Revert.
	n, err := f.ClearOverride(ctx, "pipeline.output", "ds.canary")
	require.NoError(t, err)
	require.Equal(t, 1, n)

	clock.Advance(sink.DefaultTTL - time.Nanosecond)
	d, err = r.Resolve(ctx, "pipeline.output", "ds.canary")
	require.NoError(t, err)
	assert.Equal(t, sink.Iceberg, d.Sink, "still cached just before the TTL")

	clock.Advance(time.Nanosecond)
	d, err = r.Resolve(ctx, "pipeline.output", "ds.canary")
	require.NoError(t, err)
	assert.Equal(t, sink.Postgres, d.Sink, "the revert is observed at the TTL")
	assert.Equal(t, sink.SourceDefault, d.Source)
	assert.LessOrEqual(t, sink.DefaultTTL, sink.MaxTTL)
	assert.LessOrEqual(t, sink.MaxTTL, 10*time.Second)
}

func TestResolverCachesAndExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := &countingLookuper{}
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	r, err := sink.NewResolver(src, &sink.ResolverConfig{TTL: 2 * time.Second, Now: clock.Now})
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
	assert.Equal(t, 0, sink.ResolverLen(r))
	_, err = r.Resolve(ctx, "w", "ds")
	require.NoError(t, err)
	assert.EqualValues(t, 4, src.n.Load())
}

func TestResolverCacheBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := &countingLookuper{}
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	r, err := sink.NewResolver(src, &sink.ResolverConfig{MaxEntries: 8, Now: clock.Now})
	require.NoError(t, err)
	for i := range 100 {
		clock.Advance(time.Millisecond)
		_, err := r.Resolve(ctx, "w", fmt.Sprint("ds", i))
		require.NoError(t, err)
		require.LessOrEqual(t, sink.ResolverLen(r), 8)
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
	r, err := sink.NewResolver(src, &sink.ResolverConfig{MaxEntries: 3, TTL: time.Second, Now: clock.Now})
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
	require.Equal(t, 3, sink.ResolverLen(r))
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
	src := &countingLookuper{settings: map[string]sink.Setting{"ds1": {WriterKnown: true, Default: sink.Postgres, Max: sink.Iceberg, Override: sink.Iceberg}}}
	var mu sync.Mutex
	now := time.Unix(0, 0)
	clockFn := func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Millisecond); return now }
	r, err := sink.NewResolver(src, &sink.ResolverConfig{MaxEntries: 4, Now: clockFn})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				id := fmt.Sprint("ds", (g+i)%6)
				d, err := r.Resolve(ctx, "w", id)
				assert.NoError(t, err)
				assert.Equal(t, id == "ds1", d.Sink == sink.Iceberg)
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, sink.ResolverLen(r), 4)
}

func TestResolverConfig(t *testing.T) {
	t.Parallel()
	src := &countingLookuper{}
	for _, c := range []*sink.ResolverConfig{{TTL: 11 * time.Second}, {TTL: -time.Second}, {MaxEntries: -1}} {
		_, err := sink.NewResolver(src, c)
		require.ErrorIs(t, err, sink.ErrInvalidArgument)
	}
	_, err := sink.NewResolver(nil, nil)
	require.ErrorIs(t, err, sink.ErrInvalidArgument)
	r, err := sink.NewResolver(src, &sink.ResolverConfig{TTL: sink.MaxTTL})
	require.NoError(t, err)
	_, err = r.Resolve(context.Background(), "", "ds")
	require.ErrorIs(t, err, sink.ErrInvalidArgument)
	_, err = r.Resolve(context.Background(), "w", "")
	require.ErrorIs(t, err, sink.ErrInvalidArgument)
}

// Every decision is logged once, at Info, with the documented attributes.
func TestResolverLogsDecisions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	src := &countingLookuper{settings: map[string]sink.Setting{"ds": {WriterKnown: true, Default: sink.Postgres, Max: sink.Postgres, Override: sink.Iceberg}}}
	r, err := sink.NewResolver(src, &sink.ResolverConfig{Logger: log})
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
		assert.Equal(t, sink.DecisionLogLevel.String(), rec["level"])
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
	require.NoError(t, f.SetWriter(ctx, sink.WriterFlags{WriterID: "pipeline.output", Default: sink.Postgres, Max: sink.Iceberg}))
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	r, err := sink.NewResolver(f, &sink.ResolverConfig{Now: clock.Now})
	require.NoError(t, err)

	arms := sink.RowSink[string]{
		Postgres: func(context.Context) (string, error) { return "combined statement", nil },
		Iceberg:  func(context.Context) (string, error) { return "two native writes", nil },
	}
	run := func() (string, error) {
		clock.Advance(sink.DefaultTTL)
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
	require.NoError(t, f.SetOverride(ctx, "pipeline.output", sink.Iceberg, "split.matched"))
	_, err = run()
	require.ErrorIs(t, err, sink.ErrMixedPair)
	var me *sink.MixedPairError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, sink.Iceberg, me.First.Sink)
	assert.Equal(t, sink.Postgres, me.Second.Sink)
	assert.Contains(t, err.Error(), "flip the pair together")

	// Flipped together.
	require.NoError(t, f.SetOverride(ctx, "pipeline.output", sink.Iceberg, "split.matched", "split.unmatched"))
	got, err = run()
	require.NoError(t, err)
	assert.Equal(t, "two native writes", got)

	_, err = r.ResolvePair(ctx, "pipeline.output", "split.matched", "split.matched")
	require.ErrorIs(t, err, sink.ErrInvalidArgument)
}
