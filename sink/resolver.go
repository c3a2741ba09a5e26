package sink

import (
	"container/list"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Defaults and limits of [ResolverConfig].
const (
	// DefaultTTL is how long a resolution is cached when ResolverConfig.TTL
	// is zero.
	DefaultTTL = 5 * time.Second
	// MaxTTL is the longest TTL accepted: a revert (clearing an override)
	// takes effect within 10 s.
	MaxTTL = 10 * time.Second
	// defaultMaxEntries bounds the cache when ResolverConfig.maxEntries is
	// zero.
	defaultMaxEntries = 1024
	// decisionLogLevel is the level of the one log record written for every
	// decision a Resolver returns.
	decisionLogLevel = slog.LevelInfo
)

// Lookuper reads flag settings; [*Flags] implements it. All settings of one
// call must come from one consistent read.
type Lookuper interface {
	Lookup(ctx context.Context, writerID string, datasetIDs ...string) ([]Setting, error)
}

// ResolverConfig configures [NewResolver]. Every zero field means its
// documented default; nil means all defaults.
type ResolverConfig struct {
	// TTL is how long a resolution stays cached: 0 means DefaultTTL (5 s);
	// it must be at most MaxTTL (10 s). A flag change, a revert included,
	// is observed at most TTL after it commits.
	TTL time.Duration
	// Logger receives one record per decision returned, at
	// level Info, with message "sink decision". nil discards.
	Logger *slog.Logger

	// maxEntries bounds the cache: 0 means 1024 entries. When full,
	// expired entries are dropped, then the entry closest to expiry.
	maxEntries int
	// now is the clock of the cache; nil means time.Now.
	now func() time.Time
}

// Resolver resolves (writer, dataset) to a [Decision] through a [Lookuper],
// caching each resolution for a TTL. Expiry is lazy (checked on access); it
// starts no goroutine. Safe for concurrent use. Errors are not cached.
type Resolver struct {
	src        Lookuper
	ttl        time.Duration
	maxEntries int
	log        *slog.Logger
	now        func() time.Time

	mu    sync.Mutex
	cache map[string]*list.Element // of *cacheEntry, in order
	// order holds the entries oldest first: every entry lives for the same
	// TTL, so the front is the first to expire (and the one evicted when
	// the cache is full).
	order list.List
}

type cacheEntry struct {
	key       string
	decisions []Decision
	expires   time.Time
	// prefetched: read by Prefetch and not returned yet (its first
	// Resolve logs it as read, not cached).
	prefetched bool
}

// NewResolver returns a Resolver reading flags from src (usually a *Flags).
func NewResolver(src Lookuper, cfg *ResolverConfig) (*Resolver, error) {
	if src == nil {
		return nil, fmt.Errorf("sink: NewResolver: %w: src is nil; pass a *sink.Flags", errInvalidArgument)
	}
	var c ResolverConfig
	if cfg != nil {
		c = *cfg
	}
	switch {
	case c.TTL == 0:
		c.TTL = DefaultTTL
	case c.TTL < 0 || c.TTL > MaxTTL:
		return nil, fmt.Errorf("sink: NewResolver: %w: TTL %v; use 0 (default %v) or a duration up to %v so a revert takes effect within %v",
			errInvalidArgument, c.TTL, DefaultTTL, MaxTTL, MaxTTL)
	}
	switch {
	case c.maxEntries == 0:
		c.maxEntries = defaultMaxEntries
	case c.maxEntries < 0:
		return nil, fmt.Errorf("sink: NewResolver: %w: MaxEntries %d; use 0 (default %d) or a positive bound", errInvalidArgument, c.maxEntries, defaultMaxEntries)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.now == nil {
		c.now = time.Now
	}
	return &Resolver{src: src, ttl: c.TTL, maxEntries: c.maxEntries, log: c.Logger, now: c.now, cache: map[string]*list.Element{}}, nil
}

// Resolve returns where a write of datasetID by writerID goes: the override
// wins over the writer default, both capped by the writer's max sink
// (reported as Clamped); an unknown writer resolves to Postgres with
// Source SourceUnknownWriter. The decision is logged.
//
// Resolve once per build, before the delta block, and use that one decision
// for both the read mode (incremental.ChooseReadMode) and RowSink.Run.
func (r *Resolver) Resolve(ctx context.Context, writerID, datasetID string) (Decision, error) {
	ds, err := r.resolve(ctx, writerID, datasetID)
	if err != nil {
		return Decision{}, err
	}
	return ds[0], nil
}

// ResolvePair resolves the two outputs of a split together, from one
// consistent read of the flags (cached as a pair), and combines them: both
// on Postgres or both on Iceberg give a PairDecision on that sink; mixed
// sinks give an error matching [ErrMixedPair] telling the operator to flip
// the pair together.
func (r *Resolver) ResolvePair(ctx context.Context, writerID, firstDatasetID, secondDatasetID string) (PairDecision, error) {
	if firstDatasetID == secondDatasetID {
		return PairDecision{}, fmt.Errorf("sink: ResolvePair: %w: both outputs are dataset %q", errInvalidArgument, firstDatasetID)
	}
	ds, err := r.resolve(ctx, writerID, firstDatasetID, secondDatasetID)
	if err != nil {
		return PairDecision{}, err
	}
	return pair(ds[0], ds[1])
}

// Invalidate empties the cache, so the next resolution reads the flags.
func (r *Resolver) Invalidate() {
	r.mu.Lock()
	clear(r.cache)
	r.order.Init()
	r.mu.Unlock()
}

func (r *Resolver) resolve(ctx context.Context, writerID string, datasetIDs ...string) ([]Decision, error) {
	if err := nonEmpty("writer id", writerID); err != nil {
		return nil, err
	}
	for _, id := range datasetIDs {
		if err := nonEmpty("dataset id", id); err != nil {
			return nil, err
		}
	}
	key := resolutionKey(writerID, datasetIDs)
	r.mu.Lock()
	e := r.get(key)
	// A prefetched resolution is logged as read the first time it is used.
	var ds []Decision
	var read bool
	if e != nil {
		ds, read = e.decisions, e.prefetched
		e.prefetched = false
	}
	r.mu.Unlock()
	if e != nil {
		r.logDecisions(ctx, ds, !read)
		return ds, nil
	}

	ss, err := r.src.Lookup(ctx, writerID, datasetIDs...)
	if err != nil {
		return nil, err
	}
	if len(ss) != len(datasetIDs) {
		return nil, fmt.Errorf("sink: flag lookup returned %d settings for %d datasets", len(ss), len(datasetIDs))
	}
	ds = decideAll(ss)
	r.mu.Lock()
	r.put(key, ds, false)
	r.mu.Unlock()
	r.logDecisions(ctx, ds, false)
	return ds, nil
}

// Prefetch lets a caller read the flags of a resolution together with
// queries of its own, in one round trip: when the resolution of writerID
// and datasetIDs (in the order Resolve or ResolvePair will be given them)
// is not cached and the Resolver reads a *Flags, it returns a function
// that queues the flag read in a pgx.Batch and returns the reader of its
// result, which caches the resolution; the next Resolve or ResolvePair is
// then answered from the cache (and logged as read, not cached). It
// returns nil when there is nothing to read. A failed read caches nothing
// and is not reported: the resolution reads the flags itself then. Queue
// it last, so that its failure cannot affect the batch's other queries.
func (r *Resolver) Prefetch(writerID string, datasetIDs ...string) func(b *pgx.Batch) func(pgx.BatchResults) error {
	f, ok := r.src.(*Flags)
	if !ok || writerID == "" || len(datasetIDs) == 0 {
		return nil
	}
	for _, id := range datasetIDs {
		if id == "" {
			return nil
		}
	}
	key := resolutionKey(writerID, datasetIDs)
	r.mu.Lock()
	cached := r.get(key) != nil
	r.mu.Unlock()
	if cached {
		return nil
	}
	ids := append([]string(nil), datasetIDs...)
	return func(b *pgx.Batch) func(pgx.BatchResults) error {
		b.Queue(f.lookupSQL(), writerID, ids)
		return func(br pgx.BatchResults) error {
			rows, err := br.Query()
			if err != nil {
				return nil
			}
			ss, err := f.collectLookup(rows, writerID)
			if err != nil || len(ss) != len(ids) {
				return nil
			}
			ds := decideAll(ss)
			r.mu.Lock()
			r.put(key, ds, true)
			r.mu.Unlock()
			return nil
		}
	}
}

// resolutionKey is the cache key of one resolution.
func resolutionKey(writerID string, datasetIDs []string) string {
	return writerID + "\x00" + strings.Join(datasetIDs, "\x00")
}

// decideAll decides each setting.
func decideAll(ss []Setting) []Decision {
	ds := make([]Decision, len(ss))
	for i, s := range ss {
		ds[i] = Decide(s)
	}
	return ds
}

// get returns the live entry of key (nil when none; an expired one is
// dropped); r.mu is held.
func (r *Resolver) get(key string) *cacheEntry {
	el, ok := r.cache[key]
	if !ok {
		return nil
	}
	e := el.Value.(*cacheEntry)
	if !r.now().Before(e.expires) {
		r.order.Remove(el)
		delete(r.cache, key)
		return nil
	}
	return e
}

// put stores ds under key; r.mu is held. When the cache is full, the
// expired entries go, then the oldest ones: each in constant time.
func (r *Resolver) put(key string, ds []Decision, prefetched bool) {
	now := r.now()
	e := &cacheEntry{key: key, decisions: ds, expires: now.Add(r.ttl), prefetched: prefetched}
	if el, ok := r.cache[key]; ok {
		el.Value = e
		r.order.MoveToBack(el)
		return
	}
	for front := r.order.Front(); front != nil && !now.Before(front.Value.(*cacheEntry).expires); front = r.order.Front() {
		r.evict(front)
	}
	for len(r.cache) >= r.maxEntries {
		r.evict(r.order.Front())
	}
	r.cache[key] = r.order.PushBack(e)
}

func (r *Resolver) evict(el *list.Element) {
	r.order.Remove(el)
	delete(r.cache, el.Value.(*cacheEntry).key)
}

// Len returns the number of cached resolutions, expired ones not yet dropped
// included.
func (r *Resolver) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.cache)
}

func (r *Resolver) logDecisions(ctx context.Context, ds []Decision, cached bool) {
	if !r.log.Enabled(ctx, decisionLogLevel) {
		return
	}
	for _, d := range ds {
		r.log.LogAttrs(ctx, decisionLogLevel, "sink decision", append(d.logAttrs(), slog.Bool("cached", cached))...)
	}
}
