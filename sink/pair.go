package sink

import "fmt"

// PairDecision is the resolution of the two outputs of a split, which flip
// together: both on Postgres (the combined statement) or both on Iceberg (two
// native writes). Obtain it from [Resolver.ResolvePair]: both outputs'
// Decision.Sink is then the sink of the pair.
type PairDecision struct {
	First, Second Decision

	sink Sink // the sink both outputs resolved to
}

// pair combines the decisions of a split's two outputs. Both Postgres or
// both Iceberg give a PairDecision on that sink; mixed sinks give an error
// matching [ErrMixedPair] telling the operator to flip the pair together.
func pair(first, second Decision) (PairDecision, error) {
	if err := first.check(); err != nil {
		return PairDecision{}, err
	}
	if err := second.check(); err != nil {
		return PairDecision{}, err
	}
	if first.Sink != second.Sink {
		return PairDecision{}, fmt.Errorf("sink: %w: writer %q: split outputs %q (%s) and %q (%s); flip the pair together: set (or clear) the same override on both datasets in one call",
			ErrMixedPair, first.writerID, first.DatasetID, first.Sink, second.DatasetID, second.Sink)
	}
	return PairDecision{First: first, Second: second, sink: first.Sink}, nil
}
