package facade

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakewrite/lakewrite/facade/internal/identity"
	"github.com/lakewrite/lakewrite/facade/internal/keycache"
	"github.com/lakewrite/lakewrite/internal/icechanges"
)

// ChangeReader reads the rows of a dataset that changed between two of its
// snapshots. *Facade implements it.
type ChangeReader interface {
	// Changes yields the rows of dataset datasetID that changed after
	// snapshot from (an ancestor of to; 0: before the table's first
	// snapshot) up to snapshot to (0: the current one): old images
	// (Removed: rows deleted by position deletes, deletion vectors and
	// removed data files) and new images (rows of added data files), of
	// the named columns only, in that order (nil: every column). Snapshots
	// that change no row (compaction, a rewrite keeping each row and its
	// __row_id) contribute nothing. A history it cannot read (from expired
	// or not an ancestor, a file gone, equality deletes) is an error
	// matching ErrChangesUnknown.
	Changes(ctx context.Context, datasetID string, from, to int64, columns []string) iter.Seq2[Change, error]
}

// Change is a batch of changed rows: old images when Removed, else new
// images. The consumer releases Rows.
type Change struct {
	Removed bool
	Rows    arrow.RecordBatch
}

// ErrChangesUnknown: Changes cannot tell what changed between the two
// snapshots (see ChangeReader); a caller then reads the table whole.
var ErrChangesUnknown = icechanges.ErrUnknown

var _ ChangeReader = (*Facade)(nil)

// Changes implements ChangeReader. Each snapshot is read through the
// manifests it wrote; see "Changes" in the package documentation for what
// it reads and the memory it holds.
func (f *Facade) Changes(ctx context.Context, datasetID string, from, to int64, columns []string) iter.Seq2[Change, error] {
	return func(yield func(Change, error) bool) {
		tbl, err := f.loadWithin(ctx, datasetID)
		if errors.Is(err, ErrTableNotFound) {
			err = fmt.Errorf("%w: %w", ErrChangesUnknown, err)
		}
		if err != nil {
			yield(Change{}, err)
			return
		}
		snap := tbl.CurrentSnapshot()
		if to != 0 {
			snap = tbl.SnapshotByID(to)
		}
		if snap == nil {
			if to != 0 || from != 0 {
				yield(Change{}, fmt.Errorf("%w: %w: %d in dataset %q", ErrChangesUnknown, ErrSnapshotNotFound, to, datasetID))
			}
			return
		}
		isc := tbl.Schema()
		if snap.SchemaID != nil {
			if s, ok := tbl.Schemas()[*snap.SchemaID]; ok {
				isc = s
			}
		}
		if columns == nil {
			for _, fld := range isc.Fields() {
				columns = append(columns, fld.Name)
			}
		}
		for i, c := range columns {
			if _, ok := isc.FindFieldByName(c); !ok || slices.Contains(columns[:i], c) {
				yield(Change{}, fmt.Errorf("%w: changes: no column %q (or named twice) in dataset %q", ErrInvalidRequest, c, datasetID))
				return
			}
		}
		fs, err := tbl.FS(ctx)
		if err != nil {
			yield(Change{}, fmt.Errorf("facade: changes of %q: %w", datasetID, err))
			return
		}
		var net []string
		for _, fld := range isc.Fields() {
			if !identity.IsIdentity(fld.Name) || fld.Name == ColRowID {
				net = append(net, fld.Name)
			}
		}
		r := &icechanges.Reader{Table: tbl, FS: fs, Mem: f.s.Allocator, Deleted: f.deletedPositions, NetColumns: net,
			RowID: ColRowID, RowHashes: identity.RowHashes,
			Relabel: func(sc *arrow.Schema) *arrow.Schema { return identity.WithPgMetadata(sc, isc) }}
		if f.keys.Enabled() {
			r.Cache = changeCache{f.keys}
		}
		for c, err := range r.Read(ctx, from, snap, columns) {
			if !yield(Change{Removed: c.Removed, Rows: c.Rows}, err) {
				return
			}
		}
	}
}

// changeCache keeps the old-image columns icechanges reads in the
// facade's scope index cache, under the same budget.
type changeCache struct{ c *keycache.Cache }

func (c changeCache) Get(id string) *icechanges.Columns {
	x, _ := c.c.Get(id).(*icechanges.Columns)
	return x
}

func (c changeCache) Put(id string, x *icechanges.Columns) { c.c.Put(id, x) }

func (c changeCache) MaxBytes() int64 { return c.c.MaxBytes() }
