package facadetest

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakewrite/lakewrite/facade"
)

// faulty wraps a facade.Lakehouse and fires the armed faults at their
// points. Everything else is forwarded unchanged.
type faulty struct {
	lh     facade.Lakehouse
	faults []Fault

	mu    sync.Mutex
	fired []int // per fault
	hits  map[Point]int
}

var _ facade.Lakehouse = (*faulty)(nil)

// Wrap returns lh (the in-memory Lakehouse of New, a *facade.Facade, or
// any other) with faults armed, for the code under test to write through;
// everything else is forwarded unchanged. When several faults match a call at the same point, the first
// one in the list that has not used up its Times fires (at MidStream: the
// one with the lowest AfterRows). Wrap panics on a fault with an unknown
// Point or a negative Times or AfterRows: that is a mistake in the test,
// not a condition to handle.
//
// The wrapper is safe for concurrent use and starts no goroutine. Its
// staged writes implement facade.TxStaged whenever the wrapped ones do, so
// a caller keeps the one-transaction commit, and it implements
// facade.Maintainer (errors.ErrUnsupported when the wrapped lakehouse has
// none). Any other interface of the wrapped value is not found through it.
func Wrap(lh facade.Lakehouse, faults ...Fault) facade.Lakehouse {
	if lh == nil {
		panic("facadetest: Wrap(nil)")
	}
	for _, f := range faults {
		if err := f.validate(); err != nil {
			panic(err)
		}
	}
	return &faulty{
		lh: lh, faults: append([]Fault(nil), faults...),
		fired: make([]int, len(faults)), hits: map[Point]int{},
	}
}

// hitsAt returns how many times a fault fired at p so far. A fault counts
// as fired when it starts, so a Do that never returns is counted too.
func (l *faulty) hitsAt(p Point) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hits[p]
}

func (f Fault) matches(p Point, dataset string) bool {
	return f.Point == p && (f.Dataset == "" || f.Dataset == dataset)
}

// take claims fault i if it still has a firing left.
func (l *faulty) take(i int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.faults[i].Times; t > 0 && l.fired[i] >= t {
		return false
	}
	l.fired[i]++
	l.hits[l.faults[i].Point]++
	return true
}

// available reports whether fault i has a firing left (without claiming).
func (l *faulty) available(i int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.faults[i].Times
	return t == 0 || l.fired[i] < t
}

// fire runs the first matching fault at p that has a firing left; nil when
// none fired or its action let the call go on.
func (l *faulty) fire(ctx context.Context, p Point, dataset string) error {
	for i, f := range l.faults {
		if f.matches(p, dataset) && l.take(i) {
			return f.run(ctx)
		}
	}
	return nil
}

// Stage fires BeforeStage, arms MidStream on the rows and stages through
// the wrapped lakehouse. The staged write fires BeforeCommit, AfterCommit
// and BeforeAbort.
func (l *faulty) Stage(ctx context.Context, target facade.Target, req facade.WriteRequest) (facade.Staged, error) {
	if err := l.fire(ctx, BeforeStage, target.DatasetID); err != nil {
		return nil, err
	}
	if req.Rows != nil {
		req.Rows = l.stream(ctx, target.DatasetID, req.Rows)
	}
	st, err := l.lh.Stage(ctx, target, req)
	if err != nil {
		return nil, err
	}
	w := &faultStaged{l: l, inner: st, dataset: target.DatasetID}
	if tx, ok := st.(facade.TxStaged); ok {
		return &faultTxStaged{faultStaged: w, inner: tx}, nil
	}
	return w, nil
}

// Write is Stage followed by Commit, both through the wrapper, so every
// point fires as it does for a caller that stages itself.
func (l *faulty) Write(ctx context.Context, target facade.Target, req facade.WriteRequest) (facade.CommitResult, error) {
	st, err := l.Stage(ctx, target, req)
	if err != nil {
		return facade.CommitResult{}, err
	}
	return st.Commit(ctx)
}

// FindTxn is forwarded.
func (l *faulty) FindTxn(ctx context.Context, datasetID, txnID string) (facade.CommitResult, bool, error) {
	return l.lh.FindTxn(ctx, datasetID, txnID)
}

// Scan is forwarded.
func (l *faulty) Scan(ctx context.Context, datasetID string, opts facade.ScanOptions) iter.Seq2[arrow.RecordBatch, error] {
	return l.lh.Scan(ctx, datasetID, opts)
}

// Checksum is forwarded.
func (l *faulty) Checksum(ctx context.Context, datasetID string, snapshotID int64) (facade.Checksum, error) {
	return l.lh.Checksum(ctx, datasetID, snapshotID)
}

// Unchanged is forwarded; a wrapped lakehouse that cannot tell reports
// every table unchanged.
func (l *faulty) Unchanged(ctx context.Context, datasetID string, snapshotID int64) (string, error) {
	u, ok := l.lh.(interface {
		Unchanged(ctx context.Context, datasetID string, snapshotID int64) (string, error)
	})
	if !ok {
		return "", nil
	}
	return u.Unchanged(ctx, datasetID, snapshotID)
}

// Maintain forwards to the wrapped lakehouse's table lifecycle
// (facade.Maintainer) with no fault; a wrapped lakehouse without one
// reports errors.ErrUnsupported.
func (l *faulty) Maintain(ctx context.Context, datasetID string) (facade.MaintenanceReport, error) {
	m, ok := l.lh.(facade.Maintainer)
	if !ok {
		return facade.MaintenanceReport{}, fmt.Errorf("facadetest: %T has no Maintain: %w", l.lh, errors.ErrUnsupported)
	}
	return m.Maintain(ctx, datasetID)
}
