package writestrategy

import (
	"context"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/sink"
)

// incrementalMode is how a Tier B deploy reads its native target.
type incrementalMode int

const (
	// incrementalNone: the whole target is hydrated (the target is a row
	// store, the output is moving to another sink, or its columns differ
	// from the source's).
	incrementalNone incrementalMode = iota
	// incrementalMerge: a snapshot_replace written as a merge by key; the
	// facade probes the target itself and writes only what changed.
	incrementalMerge
	// incrementalKeys: an append_new that reads only the target's key
	// columns, within the source's key range when the key is one integer
	// column, and drops the source rows whose key the target holds (in the
	// client, keyprobe.go, or in SQL).
	incrementalKeys
)

// incremental decides how deploy dep reads its target.
func (e *Env) incremental(dep Deploy, ds map[string]datasetRow, flip bool) incrementalMode {
	t, src := ds[dep.Target], ds[dep.Source]
	if flip || t.sink != sink.Iceberg || len(t.schema) == 0 || e.Lakehouse == nil {
		return incrementalNone
	}
	ts, err := ParseSchema(t.schema)
	if err != nil {
		return incrementalNone
	}
	ss, err := ParseSchema(src.schema)
	if err != nil {
		return incrementalNone
	}
	key := dep.Key
	if len(key) == 0 {
		key = ss.names()
	}
	for _, k := range key {
		if !ts.has(k) || !ss.has(k) {
			return incrementalNone
		}
	}
	switch dep.Mode {
	case KindSnapshotReplace:
		// The facade compares rows by the hash of their columns: the
		// output must have exactly the target's columns and types.
		if mergesByKey(e.Lakehouse) && sameColumns(ts, ss) {
			return incrementalMerge
		}
	case KindAppendNew:
		return incrementalKeys
	}
	return incrementalNone
}

// mergesByKey reports whether lh writes a merge by key (see mergeBatch):
// the Iceberg facade itself. Any other lakehouse (a wrapper, the in-memory
// double) gets the whole target hydrated, as before.
func mergesByKey(lh nativeReader) bool {
	_, ok := lh.(*facade.Facade)
	return ok
}

// sameColumns reports whether a and b declare the same columns (in any
// order) with the same types.
func sameColumns(a, b Schema) bool {
	if len(a.Columns) != len(b.Columns) {
		return false
	}
	types := map[string]string{}
	for _, c := range a.Columns {
		types[c.Name] = strings.ToLower(strings.TrimSpace(c.Type))
	}
	for _, c := range b.Columns {
		if t, ok := types[c.Name]; !ok || t != strings.ToLower(strings.TrimSpace(c.Type)) {
			return false
		}
	}
	return true
}

// hydrateKeys hydrates only the key columns of dep's native target (an
// append_new whose key the client probe does not compare; see
// keyprobe.go). A key of one integer column is read within the source's
// key range, so only the data files that can hold a source key are read.
func (e *Env) hydrateKeys(ctx context.Context, tx pgx.Tx, dep Deploy, ds map[string]datasetRow, pc *planContext, n int) (*relation, error) {
	ts, err := datasetSchema(dep.Target, ds[dep.Target].schema)
	if err != nil {
		return nil, err
	}
	src, err := pc.source(dep.Source)
	if err != nil {
		return nil, err
	}
	key := dep.Key
	if len(key) == 0 {
		key = src.schema.names()
	}
	ks := keyColumns(ts, key)
	_, filter, err := keyRange(ctx, tx, dep, src, ks)
	if err != nil {
		return nil, err
	}
	return e.hydrate(ctx, tx, dep.Target, ks, n, e.scan(ctx, dep.Target, ks, filter))
}

// mergeBatch is a batch of a merge's output: it tells the facade the key
// to merge by, and receives how many rows the merge left in place (the
// write's Preserved count).
type mergeBatch struct {
	arrow.RecordBatch
	c *Computed
}

// MergeKey names the key columns the rows are merged by.
func (b *mergeBatch) MergeKey() []string { return b.c.mergeKey }

// MergeDone records the rows the merge left in place.
func (b *mergeBatch) MergeDone(preserved int64) { b.c.preserved = preserved }
