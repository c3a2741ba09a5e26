package incremental

import "time"

// The names below are unexported; the external tests reach them here.
var (
	ClampReadMode      = clampReadMode
	DeltaPredicate     = deltaPredicate
	TxnPredicate       = txnPredicate
	SafeHigh           = safeHigh
	WindowAllowsDelta  = windowAllowsDelta
	ErrNoDelta         = errNoDelta
	ErrInvalidArgument = errInvalidArgument
)

func (w Window) Contains(t time.Time) bool { return w.contains(t) }

func (w Window) Empty() bool { return w.empty() }

func (w Window) Next(high time.Time) Window { return w.next(high) }
