package main

import (
	"context"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// The refresh mode's glue to the refresh engine: the declaration of an
// output's dependency, what a write reports of its refresh, and change
// tracking.

// dependency is what an output declares of its rows' dependency on its
// sources.
type dependency = incremental.Dependency

// refreshFull is the mode of a run that recomputed the whole output.
const refreshFull = string(incremental.RefreshFull)

// declareTransform returns t with dep declared.
func declareTransform(t writestrategy.Transform, dep *dependency) writestrategy.WriteStrategy {
	t.Depends = dep
	return t
}

// declareJoin returns j with dep declared.
func declareJoin(j writestrategy.Join, dep *dependency) writestrategy.WriteStrategy {
	j.Depends = dep
	return j
}

// refreshOf is what a write reports of its refresh: its mode, why it
// went full, the affected key values, the sources it read without an
// index on their key.
func refreshOf(r writestrategy.WriteResult) (mode, reason string, keys int64, scanned []string) {
	return string(r.Refresh.Mode), r.Refresh.Reason, r.Refresh.Keys, r.Refresh.Scanned
}

// track installs change tracking on a registered relation
// (Dispatcher.Track).
func (e *armEnv) track(ctx context.Context, datasetID string, columns ...string) error {
	return e.disp.Track(ctx, datasetID, columns...)
}

// groupScan is a scan of cols of the rows whose g is among groups.
func groupScan(cols []string, groups []int64) facade.ScanOptions {
	vals := make([]any, len(groups))
	for i, g := range groups {
		vals[i] = g
	}
	return facade.ScanOptions{Columns: cols, In: []facade.In{{Column: "g", Values: vals}}}
}
