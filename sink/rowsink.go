package sink

import (
	"context"
	"fmt"
)

// RowSink holds the arms of one write, one per sink, generic over the arm's
// result. An arm may be nil while its sink is not built yet: running a
// decision for that sink then fails with a [*MissingArmError] before any
// work, instead of writing somewhere unexpected.
type RowSink[T any] struct {
	// Postgres writes to the row store (for a split: the combined statement).
	Postgres func(ctx context.Context) (T, error)
	// Iceberg writes through the facade (for a split: two native writes).
	Iceberg func(ctx context.Context) (T, error)
}

// Run checks d and calls the arm of d.Sink, returning its result and error
// unchanged. Before any arm runs it fails with:
//   - [ErrUnresolved] when d is not a consistent resolved decision;
//   - a [*CeilingError] when d.Sink is above d.Max;
//   - a [*MissingArmError] when the arm of d.Sink is nil;
//   - ctx.Err() when ctx is already done.
//
// Pass the decision the build resolved once (the one that also chose the read
// mode, see package incremental), never a second resolution.
func (s RowSink[T]) Run(ctx context.Context, d Decision) (T, error) {
	var zero T
	if err := d.check(); err != nil {
		return zero, err
	}
	arm := s.arm(d.Sink)
	if arm == nil {
		return zero, &MissingArmError{WriterID: d.WriterID, DatasetID: d.DatasetID, Sink: d.Sink}
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	return arm(ctx)
}

// RunPair is Run for the two outputs of a split: it checks p (both outputs on
// one sink) and calls the arm of p.Sink once.
func (s RowSink[T]) RunPair(ctx context.Context, p PairDecision) (T, error) {
	var zero T
	q, err := Pair(p.First, p.Second)
	if err != nil {
		return zero, err
	}
	if q.Sink != p.Sink {
		return zero, fmt.Errorf("sink: %w: pair sink %q does not match its outputs (%s); obtain pairs from Resolver.ResolvePair or Pair", ErrUnresolved, p.Sink, q.Sink)
	}
	arm := s.arm(p.Sink)
	if arm == nil {
		return zero, &MissingArmError{WriterID: p.First.WriterID, DatasetID: p.First.DatasetID + "+" + p.Second.DatasetID, Sink: p.Sink}
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	return arm(ctx)
}

func (s RowSink[T]) arm(k Sink) func(context.Context) (T, error) {
	switch k {
	case Postgres:
		return s.Postgres
	case Iceberg:
		return s.Iceberg
	}
	return nil
}
