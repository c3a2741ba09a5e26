package writestrategy

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/refresh"
	"github.com/lakewrite/lakewrite/sink"
)

// icebergSnapshots reads, in tx, the snapshot of the last committed write
// of each of ids on Iceberg.
func (e *Env) icebergSnapshots(ctx context.Context, tx pgx.Tx, ids []string) (map[string]int64, error) {
	out := map[string]int64{}
	rows, err := tx.Query(ctx, refresh.SnapshotsSQL(e.ctlSchema()), ids, string(sink.Iceberg))
	if err != nil {
		return nil, queryError("read source snapshots", err)
	}
	var id string
	var snap int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &snap}, func() error { out[id] = snap; return nil }); err != nil {
		return nil, queryError("read source snapshots", err)
	}
	return out, nil
}

// icebergChanges reads the changes of the Iceberg sources of run whose
// snapshot moved since its last run (refresh.Run.Iceberg): their images'
// key columns are copied into a temporary table the run's affected keys
// are read from. A Lakehouse that cannot read changes, or a history it
// cannot read, makes the run full.
func (e *Env) icebergChanges(ctx context.Context, tx pgx.Tx, run *refresh.Run, ds map[string]datasetRow) error {
	cr, ok := e.Lakehouse.(facade.ChangeReader)
	for i, id := range slices.Sorted(maps.Keys(run.Iceberg)) {
		w := run.Iceberg[id]
		if !ok {
			run.IcebergUnknown(id, fmt.Sprintf("the Lakehouse (%T) does not read Iceberg changes", e.Lakehouse))
			continue
		}
		sc, err := datasetSchema(id, ds[id].schema)
		if err != nil {
			return err
		}
		var sub Schema
		for _, c := range run.Cols[id] {
			sub.Columns = append(sub.Columns, Column{Name: c.Name, Type: c.Type})
		}
		if sub.Columns == nil { // unmapped: whether a row changed is all that matters
			sub.Columns = sc.Columns[:1]
		}
		var n int64
		changes := changeRows(cr.Changes(ctx, id, w.From, w.To, sub.names()), &n)
		// In a savepoint: a history the Lakehouse cannot read fails the
		// copy, which leaves the run's transaction usable.
		sp, err := tx.Begin(ctx)
		if err != nil {
			return queryError("read source changes", err)
		}
		r, err := e.hydrateChanges(ctx, sp, id, sub, 1000+i, changes)
		if errors.Is(err, facade.ErrChangesUnknown) {
			if rerr := sp.Rollback(ctx); rerr != nil {
				return queryError("read source changes", rerr)
			}
			run.IcebergUnknown(id, err.Error())
			continue
		}
		if err == nil {
			err = sp.Commit(ctx)
		}
		if err != nil {
			return err
		}
		names := make([]string, len(run.Cols[id]))
		for j, c := range run.Cols[id] {
			names[j] = `x.` + quoteIdents([]string{c.Name})[0]
		}
		run.SetIcebergChanges(id, n, "SELECT DISTINCT "+strings.Join(names, ", ")+" FROM "+r.render(newBuilder(nil))+" x")
	}
	return nil
}

// keyedIceberg reads Iceberg source id (schema sc) for the affected keys
// only: the rows whose mapped columns each hold one of the keys' values
// (ScanOptions.In), hydrated, then restricted to the keys exactly (cond).
// since, when not 0, is the snapshot after which every affected key
// changed in the source (ScanOptions.ChangedSince).
func (e *Env) keyedIceberg(ctx context.Context, tx pgx.Tx, id string, sc Schema, cols []refresh.Col, n int, filter []facade.Range, hasNull bool, since int64) (*relation, error) {
	var in []facade.In
	for i, c := range cols {
		rows, err := tx.Query(ctx, "SELECT DISTINCT k"+strconv.Itoa(i)+" FROM "+refresh.Table)
		if err != nil {
			return nil, queryError("read affected keys", err)
		}
		vals, err := pgx.CollectRows(rows, pgx.RowTo[any])
		if err != nil {
			return nil, queryError("read affected keys", err)
		}
		if inValues(vals) { // else read the column unpruned; cond restricts it
			in = append(in, facade.In{Column: c.Name, Values: vals})
		}
	}
	rows := e.Lakehouse.Scan(ctx, id, facade.ScanOptions{Columns: nativeColumns(sc), Filter: filter, In: in, ChangedSince: since})
	r, err := e.hydrate(ctx, tx, id, sc, n, rows)
	if err != nil {
		return nil, err
	}
	exprs := make([]string, len(cols))
	for i, c := range cols {
		exprs[i] = "r." + quoteIdents([]string{c.Name})[0]
	}
	out := *r
	out.scanOrder, out.only, out.unique = false, nil, nil
	out.render = func(b *builder) string {
		return "(SELECT * FROM " + r.render(b) + " r WHERE " + refresh.Cond(exprs, hasNull) + ")"
	}
	return filteredRelation(&out, filter), nil
}

// changedSince is the snapshot after which every affected key of the run
// changed in Iceberg source id (the start of its window), when no other
// source changed: 0 otherwise.
func (rr *refreshRun) changedSince(id string) int64 {
	w, ok := rr.Iceberg[id]
	if !ok || !rr.KeysOnlyFrom(id) {
		return 0
	}
	return w.From
}

// inValues converts, in place, key values read by pgx to those a scan's
// facade.In takes; false when one of them has another type.
func inValues(vals []any) bool {
	for j, v := range vals {
		switch x := v.(type) {
		case nil, int64, float64, string, time.Time:
		case int32:
			vals[j] = int64(x)
		case int16:
			vals[j] = int64(x)
		default:
			return false
		}
	}
	return true
}

// mapped returns the key columns of source id when it is an Iceberg source
// the output's declaration maps (nil otherwise).
func (rr *refreshRun) mapped(id string) []refresh.Col {
	if rr == nil || rr.Kinds[id] != sink.Iceberg {
		return nil
	}
	return rr.Cols[id]
}

// changeRows is the rows of an Iceberg source's changes, each batch
// released once read, counted into n when not nil.
func changeRows(changes iter.Seq2[facade.Change, error], n *int64) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for c, err := range changes {
			if err != nil {
				yield(nil, err)
				return
			}
			if n != nil {
				*n += c.Rows.NumRows()
			}
			more := yield(c.Rows, nil)
			c.Rows.Release()
			if !more {
				return
			}
		}
	}
}
