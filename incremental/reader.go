package incremental

import (
	"context"
	"fmt"
	"time"

	"github.com/lakewrite/lakewrite/ledger"
)

// defaultClockSkew is the clock-skew allowance NewReader uses for a zero
// clockSkew.
const defaultClockSkew = time.Second

// Reader windows one upstream dataset's committed ledger transactions for a
// delta reader so that no committed transaction is ever skipped: the union
// of successive windows is exactly the committed set, without duplicates.
// It holds no state between calls (the caller stores its watermark) and is
// safe for concurrent use.
type Reader struct {
	l    *ledger.Ledger
	skew time.Duration
}

// NewReader returns a Reader over l. clockSkew is how far a writer's clock
// (which stamps committed_at, the Iceberg snapshot time) may be behind the
// database clock, plus the precision committed_at loses (1 ms for Iceberg):
// windows stop this far below the database clock and below the oldest open
// intent. 0 means the default, 1 s; negative is refused.
func NewReader(l *ledger.Ledger, clockSkew time.Duration) (*Reader, error) {
	if l == nil {
		return nil, fmt.Errorf("incremental: NewReader: %w: ledger is nil; pass a *ledger.Ledger", errInvalidArgument)
	}
	switch {
	case clockSkew == 0:
		clockSkew = defaultClockSkew
	case clockSkew < 0:
		return nil, fmt.Errorf("incremental: NewReader: %w: clock skew %v; use 0 (default %v) or a positive allowance",
			errInvalidArgument, clockSkew, defaultClockSkew)
	}
	return &Reader{l: l, skew: clockSkew}, nil
}

// high returns the highest safe window upper bound for datasetID now:
// safeHigh of the database clock and the oldest open intent. The database
// clock is read before the open intents: read the other way round, an
// intent opened between the two reads would be missed by both.
func (r *Reader) high(ctx context.Context, datasetID string) (time.Time, error) {
	now, err := r.l.Now(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("incremental: window high of %q: %w", datasetID, err)
	}
	oldest, open, err := r.l.OldestOpen(ctx, datasetID)
	if err != nil {
		return time.Time{}, fmt.Errorf("incremental: window high of %q: %w", datasetID, err)
	}
	return safeHigh(now, oldest, open, r.skew), nil
}

// Next returns the next window of a reader whose watermark is low (the High
// of the window it consumed last; zero for a reader without one, which
// is read as a snapshot) and the committed transactions in it, ordered by
// committed_at, id. The window's High is the highest bound that cannot
// skip a transaction still in flight (see the package doc), read from the
// database clock before the open intents, but never below low: when nothing is safe to read yet the
// window is empty. Store the returned High as the reader's new watermark
// once the build that consumed the window has committed — in the same
// transaction as its output when the output is in Postgres. The watermark
// must be that High, on the ledger's commit clock — never the reader's own
// commit time, its build start or a local wall clock: any of those can be
// later than a transaction still in flight, which would then be skipped.
//
// For a snapshot (full) read, call Next first and store its High: the
// snapshot may also include transactions committed above High, which the
// next delta window then reads again. That is harmless for replace
// upstreams; for append upstreams restrict the snapshot read to the
// window's transactions (for the row store, the rows whose txn_id is one
// of their ids) to keep it exact.
func (r *Reader) Next(ctx context.Context, datasetID string, low time.Time) (Window, []ledger.Txn, error) {
	high, err := r.high(ctx, datasetID)
	if err != nil {
		return Window{}, nil, err
	}
	w := Window{Low: low, High: laterOf(low, high)}
	txns, err := r.l.Committed(ctx, datasetID, w.Low, w.High)
	if err != nil {
		return Window{}, nil, fmt.Errorf("incremental: window %s of %q: %w", w, datasetID, err)
	}
	return w, txns, nil
}
