package writestrategy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/refresh"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
)

// DropReport is what Dispatcher.Drop removed.
type DropReport struct {
	// Resumed is true when the dataset was marked dropped already: an
	// earlier Drop was interrupted and this one completed it.
	Resumed bool
	// Table is what was removed of the dataset's Iceberg table (zero when
	// it had none).
	Table facade.DropReport
}

// tableDropper is a Lakehouse that can drop a dataset's table with its
// files (*facade.Facade).
type tableDropper interface {
	DropTable(ctx context.Context, datasetID string) (facade.DropReport, error)
}

// Drop decommissions a dataset: its Iceberg table and every file of it,
// its writer flag overrides, its row-store rows and its control-plane rows
// (datasets row, intents). The order is crash-safe:
//
//  1. open intents of gone writers are reconciled (ledger.Recover), then
//     the dataset is marked dropped (ledger.MarkDropped) with its row
//     locked: an open intent refuses the drop with an error matching
//     ledger.ErrBusy that names the intent, and from the mark on every write
//     is refused with ledger.ErrDatasetDropped;
//  2. the Iceberg table is purged and dropped (facade.Facade.DropTable);
//  3. the rows are deleted (ledger.DeleteDropped; the overrides, intents
//     and row-store rows go with the datasets row).
//
// Drop killed at any point leaves the dataset marked dropped (writes
// refused) or gone; Drop again completes it. Once it returned, registering
// the dataset again and writing it re-creates it from scratch. Dropping a
// dataset that is not registered returns an error matching
// ledger.ErrDatasetNotFound. A Lakehouse that cannot drop tables (not a
// *facade.Facade) is refused for a dataset that has lived on Iceberg.
func (d *Dispatcher) Drop(ctx context.Context, datasetID string) (DropReport, error) {
	var rep DropReport
	if err := checkDatasetID("dropped", datasetID); err != nil {
		return rep, err
	}
	if _, err := d.cfg.Ledger.Recover(ctx, datasetID, d.cfg.RecoverAfter, d.Lookup); err != nil {
		return rep, err
	}
	ds, err := d.cfg.Ledger.MarkDropped(ctx, datasetID)
	if err != nil {
		return rep, err
	}
	rep.Resumed = ds.Status == ledger.StatusDropped
	if d.cfg.Lakehouse != nil {
		td, ok := d.cfg.Lakehouse.(tableDropper)
		switch {
		case ok:
			if rep.Table, err = td.DropTable(ctx, datasetID); err != nil {
				return rep, fmt.Errorf("writestrategy: drop %q: the dataset stays marked dropped (Drop again to complete): %w", datasetID, err)
			}
		case ds.Sink == sink.Iceberg || rep.Resumed:
			return rep, fmt.Errorf("%w: drop %q: the Lakehouse %T cannot drop tables (use a *facade.Facade); the dataset stays marked dropped", ErrInvalid, datasetID, d.cfg.Lakehouse)
		}
	}
	// A change source's readers recompute in full after it is dropped.
	if _, err := d.db.Exec(ctx, refresh.FullSQL(pgx.Identifier{d.cfg.Ledger.Schema()}.Sanitize(), "$1::pg_catalog.text"), datasetID); err != nil {
		return rep, queryError("record the drop", err)
	}
	if err := d.cfg.Ledger.DeleteDropped(ctx, datasetID); err != nil {
		return rep, err
	}
	d.log.InfoContext(ctx, "lakewrite dataset dropped", "dataset_id", datasetID, "resumed", rep.Resumed,
		"table_dropped", rep.Table.Dropped, "files", rep.Table.Files, "bytes", rep.Table.Bytes)
	return rep, nil
}

// NextAction is what the next write of a dataset does with an open intent
// (Dispatcher.Intents): "wait" (its holder is alive), "roll_forward" (the
// holder is gone and its write landed), "abort" (the holder is gone and its
// write provably did not land) or "unknown" (whether it landed cannot be
// told now: IntentStatus.Reason says why, and the next write fails busy
// until it can).
type NextAction string

// The next actions.
const (
	// nextWait: the holder is alive (or, without liveness, the intent is
	// younger than RecoverAfter): the next write waits for it.
	nextWait NextAction = "wait"
	// nextRollForward: the holder is gone and its write landed: the next
	// write commits the intent with the landed outcome first.
	nextRollForward NextAction = "roll_forward"
	// nextAbort: the holder is gone and its write provably did not land:
	// the next write aborts it first.
	nextAbort NextAction = "abort"
	// nextUnknown: the holder is gone but whether its write landed cannot
	// be told now (Reason says why): the next write fails busy until it
	// can.
	nextUnknown NextAction = "unknown"
)

// IntentStatus is an open intent with what the next write would do with it.
type IntentStatus struct {
	ledger.OpenIntent
	Next   NextAction
	Reason string
}

// Intents lists every open intent, oldest first: its age, its holder's
// liveness, and what the next write of its dataset would do with it. It
// reads only (the landing of a gone holder's write is looked up, not
// recorded): the operator's view of open and stuck intents.
func (d *Dispatcher) Intents(ctx context.Context) ([]IntentStatus, error) {
	ois, err := d.cfg.Ledger.OpenIntents(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]IntentStatus, len(ois))
	for i, o := range ois {
		s := IntentStatus{OpenIntent: o}
		switch {
		case o.HolderAlive:
			s.Next, s.Reason = nextWait, "holder alive (its session lock is held, or its lease runs)"
		case !o.Liveness && o.Age < d.cfg.RecoverAfter:
			s.Next, s.Reason = nextWait, fmt.Sprintf("no liveness: reconciled once older than %s", d.cfg.RecoverAfter)
		default:
			why := "holder gone (its session lock is released, or its lease lapsed)"
			if !o.Liveness {
				why = fmt.Sprintf("no liveness, older than %s", d.cfg.RecoverAfter)
			}
			lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			landing, err := d.Lookup(lctx, ledger.Intent{ID: o.ID, DatasetID: o.DatasetID, WriterID: o.WriterID, Sink: o.Sink, WriteMode: o.WriteMode})
			cancel()
			switch {
			case err != nil && !errors.Is(err, facade.ErrTableNotFound):
				s.Next, s.Reason = nextUnknown, why+"; landing unknown: "+err.Error()
			case landing.Landed:
				s.Next, s.Reason = nextRollForward, fmt.Sprintf("%s; its write landed (snapshot %d)", why, landing.Outcome.SnapshotID)
			default:
				s.Next, s.Reason = nextAbort, why+"; its write did not land"
			}
		}
		out[i] = s
	}
	return out, nil
}
