package writestrategy

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/lakewrite/lakewrite/incremental/changelog"
)

// trimEvery is how often a Dispatcher trims one change source's log.
const trimEvery = time.Minute

// logTrims paces a Dispatcher's trims of the change log: the last trim of
// each source.
type logTrims struct {
	every time.Duration // trimEvery; tests shorten it
	mu    sync.Mutex
	last  map[string]time.Time
}

// due returns those of sources this Dispatcher has not trimmed within
// t.every of now, and counts them as trimmed now.
func (t *logTrims) due(sources []string, now time.Time) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, s := range sources {
		if last, ok := t.last[s]; ok && now.Sub(last) < t.every {
			continue
		}
		t.last[s] = now
		out = append(out, s)
	}
	for s, last := range t.last {
		if now.Sub(last) >= t.every && !slices.Contains(out, s) {
			delete(t.last, s) // a source no longer read: forget it
		}
	}
	slices.Sort(out)
	return out
}

// trimConsumed deletes, after a run that read the Postgres change sources
// sources committed its position, the entries of their change log that
// every consumer has read (changelog.Log.Trim without an age or row
// bound: no consumer is ever put behind), at most once per trimEvery per
// source. The log then stays the size of what its slowest consumer has
// not read, without a scheduled Trim; a Trim with bounds (an age, a row
// count) is the embedding service's to schedule. A failure is logged.
func (d *Dispatcher) trimConsumed(ctx context.Context, sources []string) {
	due := d.trims.due(sources, time.Now())
	if len(due) == 0 {
		return
	}
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	rep, err := changelog.New(d.cfg.Ledger.Schema()).Trim(cctx, d.db, changelog.TrimOptions{MaxAge: -1, Sources: due})
	if err != nil {
		d.log.WarnContext(ctx, "lakewrite change log not trimmed", "sources", due, "err", err)
		return
	}
	if rep.Deleted > 0 {
		d.log.DebugContext(ctx, "lakewrite change log trimmed", "sources", due, "deleted", rep.Deleted)
	}
}
