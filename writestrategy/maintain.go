package writestrategy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"

	"github.com/lakewrite/lakewrite/sink"
)

// Maintain runs the table lifecycle of one Iceberg dataset now (see
// facade.Lifecycle: metadata bounded, snapshots expired, files of expired
// snapshots deleted after their grace, orphans removed, small files
// compacted), for services that schedule maintenance themselves. It runs
// under a maintenance intent of the dataset, opened as writerID: it waits
// for a writer of the dataset like any write (Config.WaitTimeout of the
// ledger), never races a writer or a recovery, and leaves the dataset's
// watermark, row count and schema as they are. The report is recorded on
// the dataset (ledger.Dataset's MaintainedAt and Maintenance).
//
// The Dispatcher also runs it by itself after an Iceberg write whose commit
// says maintenance is due (facade.CommitResult.MaintenanceDue), without
// waiting: when another writer holds the dataset, it is left for a later
// write. Turn it off or tune it with facade.Config.Lifecycle.
func (d *Dispatcher) Maintain(ctx context.Context, writerID, datasetID string) (facade.MaintenanceReport, error) {
	if writerID == "" {
		return facade.MaintenanceReport{}, fmt.Errorf("%w: Maintain needs a writer id", ErrInvalid)
	}
	if err := checkDatasetID("maintained", datasetID); err != nil {
		return facade.MaintenanceReport{}, err
	}
	return d.maintain(ctx, writerID, datasetID, false)
}

func (d *Dispatcher) maintainer() (facade.Maintainer, bool) {
	if d.cfg.Lakehouse == nil {
		return nil, false
	}
	m, ok := d.cfg.Lakehouse.(facade.Maintainer)
	return m, ok
}

func (d *Dispatcher) maintain(ctx context.Context, writerID, datasetID string, noWait bool) (facade.MaintenanceReport, error) {
	m, ok := d.maintainer()
	if !ok {
		return facade.MaintenanceReport{}, fmt.Errorf("%w: the Lakehouse does not implement facade.Maintainer", ErrInvalid)
	}
	in, err := d.cfg.Ledger.Open(ctx, ledger.OpenParams{DatasetID: datasetID, WriterID: writerID, Sink: sink.Iceberg,
		WriteMode: ledger.Maintenance, NoWait: noWait, Lookup: d.Lookup, RecoverAfter: d.cfg.RecoverAfter})
	if err != nil {
		return facade.MaintenanceReport{}, err
	}
	defer in.Release()
	defer d.cfg.Ledger.KeepAlive(ctx, in)()
	rep, err := m.Maintain(ctx, datasetID)
	if err != nil {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		if aerr := d.cfg.Ledger.Abort(cctx, in, err); aerr != nil {
			err = errors.Join(err, aerr)
		}
		return rep, err
	}
	js, err := json.Marshal(rep)
	if err != nil {
		return rep, err
	}
	at := rep.StartedAt.Add(rep.Duration)
	if at.IsZero() {
		at = time.Now()
	}
	if err := d.cfg.Ledger.Commit(ctx, in, ledger.Outcome{CommittedAt: at, Report: js}); err != nil {
		return rep, err
	}
	return rep, nil
}

// maintainAfterWrite runs the lifecycle of the outputs whose commit said
// it is due. The write has committed: a maintenance failure is logged and
// left for a later write, never returned.
func (d *Dispatcher) maintainAfterWrite(ctx context.Context, w *writeInfo, results []WriteResult, due map[string]bool) {
	if len(due) == 0 {
		return
	}
	if _, ok := d.maintainer(); !ok {
		return
	}
	for i := range results {
		r := &results[i]
		if !due[r.DatasetID] {
			continue
		}
		mctx, ph := d.observe(ctx, w, phaseMaintain, []string{r.DatasetID})
		rep, err := d.maintain(mctx, w.writerID, r.DatasetID, true)
		ph.end(0, err)
		if err != nil {
			d.log.WarnContext(ctx, "lakewrite maintenance skipped", "dataset_id", r.DatasetID, "err", err)
			continue
		}
		r.Maintenance = &rep
	}
}
