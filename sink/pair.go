package sink

// PairDecision is the resolution of the two outputs of a split, which flip
// together: both on Postgres (the combined statement) or both on Iceberg (two
// native writes).
type PairDecision struct {
	First, Second Decision
	// Sink is the sink both outputs resolved to.
	Sink Sink
}

// Pair combines the decisions of a split's two outputs. Both Postgres or
// both Iceberg give a PairDecision with that Sink; mixed sinks give a
// [*MixedPairError] telling the operator to flip the pair together.
func Pair(first, second Decision) (PairDecision, error) {
	if err := first.check(); err != nil {
		return PairDecision{}, err
	}
	if err := second.check(); err != nil {
		return PairDecision{}, err
	}
	if first.Sink != second.Sink {
		return PairDecision{}, &MixedPairError{First: first, Second: second}
	}
	return PairDecision{First: first, Second: second, Sink: first.Sink}, nil
}
