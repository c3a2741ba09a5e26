package sink

import (
	"context"
	"fmt"
)

// RowSink holds the arms of one write, one per sink, generic over the arm's
// result. An arm may be nil while its sink is not built yet: running a
// decision for that sink then fails with an error matching [ErrMissingArm]
// before any work, instead of writing somewhere unexpected.
type RowSink[T any] struct {
	// Postgres writes to the row store (for a split: the combined statement).
	Postgres func(ctx context.Context) (T, error)
	// Iceberg writes through the facade (for a split: two native writes).
	Iceberg func(ctx context.Context) (T, error)
}

// Run checks d and calls the arm of d.Sink, returning its result and error
// unchanged. Before any arm runs it fails with:
//   - an error saying d is not resolved when it is not a consistent
//     resolved decision (one that came from [Resolver.Resolve],
//     [Flags.Check] or [Decide], unedited);
//   - an error matching [ErrAboveCeiling] when d.Sink is above the
//     writer's max sink;
//   - an error matching [ErrMissingArm] when the arm of d.Sink is nil;
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
		return zero, missingArmError(d.writerID, d.DatasetID, d.Sink)
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
	q, err := pair(p.First, p.Second)
	if err != nil {
		return zero, err
	}
	if q.sink != p.sink {
		return zero, fmt.Errorf("sink: %w: pair sink %q does not match its outputs (%s); obtain pairs from Resolver.ResolvePair", errUnresolved, p.sink, q.sink)
	}
	arm := s.arm(p.sink)
	if arm == nil {
		return zero, missingArmError(p.First.writerID, p.First.DatasetID+"+"+p.Second.DatasetID, p.sink)
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	return arm(ctx)
}

// missingArmError reports that the decision of (writerID, datasetID)
// resolved to sink k, which has no arm. It matches [ErrMissingArm].
func missingArmError(writerID, datasetID string, k Sink) error {
	return fmt.Errorf("sink: %w: writer %q dataset %q resolved to sink %s but the RowSink has no %s arm; nothing was written (clear the override or lower the writer's max until the arm exists)",
		ErrMissingArm, writerID, datasetID, k, k)
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
