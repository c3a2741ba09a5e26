package writestrategy

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental/model"
)

// modelIce is a Model's Iceberg source, hydrated once the run knows
// whether it reads every row or the touched keys' only.
type modelIce struct {
	id   string
	sc   Schema
	fill func(iter.Seq2[arrow.RecordBatch, error]) error
}

// lazyModelSource creates the (empty) table of a Model's Iceberg source
// id; planSources fills it (modelIce.read).
func (e *Env) lazyModelSource(ctx context.Context, tx pgx.Tx, id string, sc Schema, n int) (*relation, error) {
	r, fill, err := e.hydrateTable(ctx, tx, id, sc, n, true)
	if err != nil {
		return nil, err
	}
	e.modelRun.ice = &modelIce{id: id, sc: sc, fill: fill}
	return r, nil
}

// changes reads the changes of the source between delta.Snapshots (their
// key columns, old and new images) into a temporary table and fills the
// run's touched keys from them. A Lakehouse that cannot read changes, or
// a history it cannot read, makes the run full.
func (mi *modelIce) changes(ctx context.Context, tx pgx.Tx, e *Env, spec *model.Spec, src model.Source, delta *model.Delta, sourceRows int64) error {
	cr, ok := e.Lakehouse.(facade.ChangeReader)
	if !ok {
		delta.Full(fmt.Sprintf("the Lakehouse (%T) does not read Iceberg changes", e.Lakehouse))
		return nil
	}
	var keys Schema
	for _, k := range spec.Key {
		for _, c := range mi.sc.Columns {
			if c.Name == k {
				keys.Columns = append(keys.Columns, c)
			}
		}
	}
	if len(keys.Columns) != len(spec.Key) {
		return fmt.Errorf("%w: model %q has a key column source %q does not have", ErrInvalid, spec.Output, mi.id)
	}
	changes := changeRows(cr.Changes(ctx, mi.id, delta.Snapshots.From, delta.Snapshots.To, keys.names()), nil)
	// In a savepoint: a history the Lakehouse cannot read fails the copy,
	// which leaves the run's transaction usable.
	sp, err := tx.Begin(ctx)
	if err != nil {
		return queryError("read source changes", err)
	}
	r, err := e.hydrateChanges(ctx, sp, mi.id, keys, 900, changes)
	if errors.Is(err, facade.ErrChangesUnknown) {
		if rerr := sp.Rollback(ctx); rerr != nil {
			return queryError("read source changes", rerr)
		}
		delta.Full(err.Error())
		return nil
	}
	if err == nil {
		err = sp.Commit(ctx)
	}
	if err != nil {
		return err
	}
	if err := delta.Touched(ctx, tx, spec, src, r.render(newBuilder(nil)), sourceRows); err != nil {
		return fmt.Errorf("writestrategy: %w", err)
	}
	return nil
}

// read fills the source's table: every row for a full run; for an
// incremental one the rows holding a touched key (ScanOptions.In on a
// key of one column; the whole source otherwise), which the run's key
// condition then restricts exactly.
func (mi *modelIce) read(ctx context.Context, tx pgx.Tx, e *Env, spec *model.Spec, delta *model.Delta) error {
	if !delta.Incremental {
		return mi.fill(e.scan(ctx, mi.id, mi.sc, nil))
	}
	if delta.Keys == 0 {
		return mi.fill(func(func(arrow.RecordBatch, error) bool) {})
	}
	vals, ok, err := delta.KeyValues(ctx, tx)
	if err != nil {
		return fmt.Errorf("writestrategy: %w", err)
	}
	if !ok || !inValues(vals) {
		return mi.fill(e.scan(ctx, mi.id, mi.sc, nil))
	}
	in := []facade.In{{Column: spec.Key[0], Values: vals}}
	return mi.fill(e.Lakehouse.Scan(ctx, mi.id, facade.ScanOptions{Columns: nativeColumns(mi.sc), In: in}))
}
