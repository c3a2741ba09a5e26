package writestrategy

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
)

// allTxStaged returns the staged writes as facade.TxStaged when every one
// of them can commit into a transaction (the facade's catalog is
// facade.NewPostgresCatalog's, in the database of the ledger).
func allTxStaged(staged []facade.Staged) ([]facade.TxStaged, bool) {
	out := make([]facade.TxStaged, len(staged))
	for i, st := range staged {
		tx, ok := st.(facade.TxStaged)
		if !ok {
			return nil, false
		}
		out[i] = tx
	}
	return out, true
}

// commitInTx is the Iceberg arm's commit on a catalog kept in the ledger's
// database: in tx (the compute transaction, whose reads are done), each
// output's metadata pointer is swapped and its intent committed (which
// also stamps the dataset row and runs the expectations), then tx commits.
// Every output's snapshot and ledger commit land together or not at all:
// there is no moment at which a snapshot is visible and its intent open,
// and a split pair is one commit.
//
// The writer's holds on the intents need no check here (the other arm asks
// Intent.Alive before each snapshot commit): each ledger commit is fenced
// by its intent's attempt, so an intent that a reconciler claimed or
// aborted meanwhile fails its CommitTx, and the swaps roll back with it.
//
// The last ledger commit is owner's when tx runs on owner's held session
// (beginTx; nil otherwise), and ends tx (ledger.CommitTxEnd): owner's
// ledger commit, its unlock and the COMMIT then share one round trip.
//
// Any error before tx commits rolls everything back; the staged files are
// deleted and the intents aborted (fail). When committing tx itself fails,
// the intents say what happened: aborting one succeeds only if tx rolled
// back (the abort waits for tx), and finds it committed otherwise.
func (d *Dispatcher) commitInTx(ctx context.Context, w *writeInfo, req Request, tx pgx.Tx, owner *ledger.Intent, intents map[string]*ledger.Intent,
	computed []Computed, staged []facade.TxStaged, results []WriteResult, rr *refreshRun, fail func(error) ([]WriteResult, error)) ([]WriteResult, error) {
	discard := func() {
		for _, st := range staged {
			_ = abortStaged(ctx, st) // the files of a rolled-back commit: unreferenced
		}
	}
	rollback := func(cause error) ([]WriteResult, error) {
		cctx, cancel := cleanupContext(ctx)
		_ = tx.Rollback(cctx)
		cancel()
		discard()
		return fail(cause)
	}
	due := map[string]bool{}
	// The pointer swaps first, then the ledger commits (which run the
	// expectations) and the transaction's commit: all or nothing lands.
	kctx, kph := d.observe(ctx, w, phaseCatalogCommit, w.outs)
	var rows int64
	for i := range computed {
		c := &computed[i]
		in := intents[c.DatasetID]
		res, err := staged[i].CommitTx(kctx, tx)
		if err != nil {
			kph.end(0, err)
			return rollback(err)
		}
		if res.MaintenanceDue {
			due[c.DatasetID] = true
		}
		rows += res.Rows
		r := &results[i]
		r.Rows, r.Skipped, r.Preserved, r.Rounded = res.Rows, c.skipped(res.Rows), c.preserved, c.rounded()
		r.TxnID, r.SnapshotID, r.CommittedAt, r.replayed = in.ID, res.SnapshotID, res.CommittedAt, res.Replayed
	}
	kph.end(rows, nil)
	lctx, lph := d.observe(ctx, w, phaseLedgerCommit, w.outs)
	// A declared output's positions land with its snapshot.
	if rr != nil {
		if in := intents[rr.Output]; in != nil {
			rr.SetTxn(in.ID)
		}
		if err := rr.SavePositions(lctx, tx); err != nil {
			lph.end(0, err)
			return rollback(err)
		}
	}
	// The owner's ledger commit goes last, with the COMMIT.
	order := make([]int, 0, len(computed))
	for _, own := range []bool{false, true} {
		for i := range computed {
			if (intents[results[i].DatasetID] == owner) == own {
				order = append(order, i)
			}
		}
	}
	for k, i := range order {
		r := &results[i]
		in := intents[r.DatasetID]
		o := ledger.Outcome{RowCount: r.Rows, SnapshotID: r.SnapshotID, CommittedAt: r.CommittedAt, Schema: computed[i].Columns.JSON()}
		if k < len(order)-1 {
			if err := d.cfg.Ledger.CommitTx(lctx, tx, in, o); err != nil {
				lph.end(0, err)
				return rollback(err)
			}
			continue
		}
		if _, err := d.cfg.Ledger.CommitTxEnd(lctx, tx, in, o); err != nil {
			// A ledger commit that failed leaves tx open: its rollback
			// then succeeds, and nothing landed. Otherwise the COMMIT was
			// sent (tx has ended, or its session is gone): the intents say
			// whether it landed.
			cctx, cancel := cleanupContext(ctx)
			rerr := tx.Rollback(cctx)
			cancel()
			if rerr == nil {
				lph.end(0, err)
				discard()
				return fail(err)
			}
			landed, known, rerr := d.resolveCommit(ctx, intents, err)
			switch {
			case !known:
				// Files kept: the snapshots may reference them. The intents,
				// if still open, are reconciled by the next writer.
				lph.end(0, err)
				return nil, fmt.Errorf("%w: committing the snapshot and ledger transaction failed: %w", ledger.ErrOutcomeUnknown, errors.Join(err, rerr))
			case !landed:
				discard()
				err = fmt.Errorf("writestrategy: commit: %w", err)
				lph.end(0, err)
				return nil, err
			}
			// It landed after all.
		}
	}
	lph.end(rows, nil)
	d.logResults(ctx, req, results)
	d.maintainAfterWrite(ctx, w, results, due)
	d.afterRefresh(ctx, rr)
	return results, nil
}

// resolveCommit learns whether a transaction whose COMMIT failed committed
// the intents: aborting an intent succeeds if and only if the transaction
// rolled back (the abort's update waits for the transaction's row lock, so
// it cannot pass a commit still in flight). known is false when the ledger
// could not be asked.
func (d *Dispatcher) resolveCommit(ctx context.Context, intents map[string]*ledger.Intent, cause error) (landed, known bool, err error) {
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	var aborted, committed int
	for _, in := range intents {
		aerr := d.cfg.Ledger.Abort(cctx, in, cause)
		switch {
		case aerr == nil:
			aborted++
		case errors.Is(aerr, ledger.ErrNotOpen):
			// Ended already: committed by the transaction, or aborted.
			txn, gerr := d.cfg.Ledger.Get(cctx, in.ID)
			switch {
			case gerr != nil:
				err = errors.Join(err, aerr, gerr)
			case txn.Status == ledger.StatusCommitted:
				committed++
			default:
				err = errors.Join(err, aerr)
			}
		default:
			err = errors.Join(err, aerr)
		}
	}
	switch {
	case err != nil:
		return false, false, err
	case committed > 0 && aborted > 0:
		// Cannot happen: the intents committed in one transaction.
		return false, false, fmt.Errorf("writestrategy: %d intents committed and %d aborted after one transaction", committed, aborted)
	}
	return committed > 0, true, nil
}
