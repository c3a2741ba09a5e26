package writestrategy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
)

// iceberg is the Iceberg arm of Dispatcher.Write: the intents open, then
// the compute (ComputeRows, in a transaction on the session of one of
// them), one facade write per output with the transaction id, and the
// ledger commit from the commit result: in the compute transaction on a
// catalog that commits into it (commitInTx, txcommit.go), in one catalog
// request for a split pair on a catalog that commits several tables
// atomically (commitAtomic), one output after the other otherwise.
func (d *Dispatcher) iceberg(ctx context.Context, w *writeInfo, req Request, env *Env) ([]WriteResult, error) {
	intents, replay, err := d.openIntents(ctx, w, req, sink.Iceberg, env)
	if err != nil || replay != nil {
		return replay, err
	}
	defer releaseAll(intents)
	defer d.keepAlive(ctx, intents)()
	pending := map[string]*ledger.Intent{}
	for k, v := range intents {
		pending[k] = v
	}
	endCompute := func() {} // the compute transaction's end, once begun
	fail := func(err error) ([]WriteResult, error) {
		endCompute() // first: the intents abort on the session it ran on
		d.abortAll(ctx, pending, err)
		return nil, err
	}
	cctx, cph := d.observe(ctx, w, phaseCompute, w.outs)
	// On a catalog in the ledger's database, the owner's ledger commit, its
	// unlock and the COMMIT share a round trip (commitInTx).
	tx, owner, err := d.beginTx(cctx, intents, refreshSettings(req.Strategy, computeSettings))
	if err != nil {
		err = queryError("begin compute", err)
		cph.end(0, err)
		return fail(err)
	}
	endCompute = func() {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		_ = tx.Rollback(cctx) // the compute transaction writes nothing; a no-op once ended
	}
	defer endCompute()
	err = d.writeOrder(cctx, env, intents)
	var computed []Computed
	if err == nil {
		computed, err = ComputeRows(cctx, tx, env, req.Strategy, d.cursorOptions(req))
	}
	results := make([]WriteResult, len(computed))
	for i, c := range computed {
		results[i] = WriteResult{DatasetID: c.DatasetID, Sink: sink.Iceberg, Mode: c.Mode, columns: c.Columns, FullRead: env.fullRead(),
			Refresh: env.refresh.reportFor(c.DatasetID)}
	}
	if err == nil {
		err = checkModes(results, intents)
	}
	cph.end(0, err)
	if err != nil {
		return fail(err)
	}
	// Stage every output (a split pair has two) and ask the ledger's
	// expectations about each before any snapshot is committed: a failing
	// stream, a staging error or a veto in either output leaves both tables
	// as they were.
	staged := make([]facade.Staged, 0, len(computed))
	due := map[string]bool{}
	abortFrom := func(i int) {
		for _, st := range staged[i:] {
			_ = abortStaged(ctx, st) // best effort: unreferenced files at worst
		}
	}
	for i := range computed {
		c := &computed[i]
		sctx, sph := d.observe(ctx, w, PhaseStream, []string{c.DatasetID})
		st, err := d.stageOutput(sctx, tx, req, c, facade.Target{DatasetID: c.DatasetID, WriterID: req.WriterID, Workspace: d.cfg.Workspace},
			facade.WriteRequest{
				Mode:       facade.WriteMode(c.Mode),
				Schema:     c.stream.Schema(),
				Rows:       d.progress(sctx, c.DatasetID, 0, c.Batches()),
				SourceRefs: req.Strategy.Sources(),
				Metadata:   withDeclaredSchema(req.Metadata, c.Columns),
				TxnID:      intents[c.DatasetID].ID,
				Rounded:    c.stream.Rounded,
				Scope:      c.scope,
			}, &results[i])
		if err != nil {
			sph.end(0, err)
			abortFrom(0)
			return fail(err)
		}
		info := st.Info()
		sph.end(info.Rows, nil)
		if info.Replay == nil {
			results[i].Merge = info.Merge
			for _, f := range info.DataFiles {
				results[i].Bytes += f.SizeBytes
			}
		}
		staged = append(staged, st)
	}
	if err := d.checkTxCommitKept(staged); err != nil { // see wrapcheck.go
		abortFrom(0)
		return fail(err)
	}
	if txs, ok := allTxStaged(staged); ok {
		return d.commitInTx(ctx, w, req, tx, owner, intents, computed, txs, results, env.refresh, fail)
	}
	// Every row is staged: the compute transaction is done. Ending it
	// frees the session it may run on (an intent's held session) for the
	// checks, Alive and the ledger commits below, which need it.
	endCompute()
	kctx, kph := d.observe(ctx, w, phaseCheck, w.outs)
	for i := range computed {
		c := &computed[i]
		if err := checkStaged(kctx, d.cfg.Ledger, intents[c.DatasetID], staged[i], c.Columns.JSON()); err != nil {
			kph.end(0, err)
			abortFrom(0)
			return fail(err)
		}
	}
	kph.end(0, nil)
	if ac, ok := d.cfg.Lakehouse.(atomicCommitter); ok && len(staged) > 1 && ac.SupportsAtomicCommit() {
		return d.commitAtomic(ctx, w, req, ac, intents, pending, computed, staged, results, fail)
	}
	for i := range computed {
		c := &computed[i]
		in := intents[c.DatasetID]
		ids := []string{c.DatasetID}
		kctx, kph := d.observe(ctx, w, phaseCatalogCommit, ids)
		// Still the holder of the dataset? A writer whose hold was lost
		// (its connection broke, so another process may have reconciled
		// the intent) must not make its snapshot visible.
		if err := in.Alive(kctx); err != nil {
			kph.end(0, err)
			abortFrom(i)
			return fail(err)
		}
		if env.refresh != nil && env.refresh.Output == c.DatasetID {
			// Saved before the snapshot, with the run's txn id: they hold
			// for the next run only if this write is the output's last
			// committed one (see refresh.Gather), so a commit that fails
			// leaves them unused, and one that lands before a crash, then
			// rolled forward by Recover, leaves them in use.
			env.refresh.SetTxn(in.ID)
			if err := d.savePositions(kctx, env.refresh); err != nil {
				d.log.WarnContext(ctx, "lakewrite refresh positions not saved: the next run is full", "dataset_id", c.DatasetID, "err", err)
			}
		}
		res, err := staged[i].Commit(kctx)
		kph.end(res.Rows, err)
		if err != nil {
			abortFrom(i + 1)
			if errors.Is(err, facade.ErrCommitStateUnknown) {
				// Never retried or aborted blindly: Recover reconciles it
				// (at once, once this writer no longer holds it).
				delete(pending, c.DatasetID)
				in.Release()
				return fail(fmt.Errorf("%w: %w", ledger.ErrOutcomeUnknown, err))
			}
			return fail(err)
		}
		if res.MaintenanceDue {
			due[c.DatasetID] = true
		}
		r := &results[i]
		r.Rows, r.Skipped, r.Preserved, r.Rounded = res.Rows, c.skipped(res.Rows), c.preserved, c.rounded()
		r.TxnID, r.SnapshotID, r.CommittedAt, r.replayed = in.ID, res.SnapshotID, res.CommittedAt, res.Replayed
		// The snapshot landed: from here on the intent is rolled forward,
		// never aborted.
		delete(pending, c.DatasetID)
		lctx, lph := d.observe(ctx, w, phaseLedgerCommit, ids)
		err = d.cfg.Ledger.Commit(lctx, in, ledger.Outcome{RowCount: res.Rows, SnapshotID: res.SnapshotID,
			CommittedAt: res.CommittedAt, Schema: c.Columns.JSON()})
		lph.end(res.Rows, err)
		if err != nil {
			abortFrom(i + 1)
			if errors.Is(err, ledger.ErrVetoed) {
				return fail(err)
			}
			// Left open: Recover finds the snapshot and rolls it forward.
			return fail(fmt.Errorf("%w: snapshot %d of %q landed but the ledger commit failed: %w", ledger.ErrOutcomeUnknown, res.SnapshotID, c.DatasetID, err))
		}
	}
	d.logResults(ctx, req, results)
	d.maintainAfterWrite(ctx, w, results, due)
	d.afterRefresh(ctx, env.refresh)
	return results, nil
}

// atomicCommitter is a Lakehouse whose catalog commits several tables in
// one request (facade.Facade on a REST catalog with multi-table
// transactions).
type atomicCommitter interface {
	SupportsAtomicCommit() bool
	CommitAll(ctx context.Context, staged ...facade.Staged) ([]facade.CommitResult, error)
}

// commitAtomic commits the staged outputs of one write (a split pair) in
// one catalog transaction, then their intents: both snapshots land or
// neither does. An ambiguous catalog failure leaves every intent open for
// Recover, which finds all of them landed or none.
func (d *Dispatcher) commitAtomic(ctx context.Context, w *writeInfo, req Request, ac atomicCommitter, intents, pending map[string]*ledger.Intent,
	computed []Computed, staged []facade.Staged, results []WriteResult, fail func(error) ([]WriteResult, error)) ([]WriteResult, error) {
	kctx, kph := d.observe(ctx, w, phaseCatalogCommit, w.outs)
	for i := range computed {
		if err := intents[computed[i].DatasetID].Alive(kctx); err != nil {
			kph.end(0, err)
			for _, st := range staged {
				_ = abortStaged(ctx, st)
			}
			return fail(err)
		}
	}
	res, err := ac.CommitAll(kctx, staged...) // finishes every staged write
	var rows int64
	for _, r := range res {
		rows += r.Rows
	}
	kph.end(rows, err)
	if err != nil {
		if errors.Is(err, facade.ErrCommitStateUnknown) {
			for id, in := range pending {
				delete(pending, id)
				in.Release()
			}
			return fail(fmt.Errorf("%w: %w", ledger.ErrOutcomeUnknown, err))
		}
		return fail(err)
	}
	// Every snapshot landed: from here on the intents are rolled forward,
	// never aborted.
	for id := range pending {
		delete(pending, id)
	}
	due := map[string]bool{}
	lctx, lph := d.observe(ctx, w, phaseLedgerCommit, w.outs)
	for i := range computed {
		c := &computed[i]
		in := intents[c.DatasetID]
		if res[i].MaintenanceDue {
			due[c.DatasetID] = true
		}
		r := &results[i]
		r.Rows, r.Skipped, r.Preserved, r.Rounded = res[i].Rows, c.skipped(res[i].Rows), c.preserved, c.rounded()
		r.TxnID, r.SnapshotID, r.CommittedAt, r.replayed = in.ID, res[i].SnapshotID, res[i].CommittedAt, res[i].Replayed
		if err := d.cfg.Ledger.Commit(lctx, in, ledger.Outcome{RowCount: res[i].Rows, SnapshotID: res[i].SnapshotID,
			CommittedAt: res[i].CommittedAt, Schema: c.Columns.JSON()}); err != nil {
			lph.end(0, err)
			// Left open (the caller releases the holds): Recover finds the
			// snapshots and rolls them forward.
			return nil, fmt.Errorf("%w: the snapshots of %s landed but the ledger commit of %q failed: %w",
				ledger.ErrOutcomeUnknown, strings.Join(req.Strategy.Outputs(), ", "), c.DatasetID, err)
		}
	}
	lph.end(rows, nil)
	d.logResults(ctx, req, results)
	d.maintainAfterWrite(ctx, w, results, due)
	return results, nil
}
