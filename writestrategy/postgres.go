package writestrategy

import (
	"context"
	"time"

	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
)

// postgres is the Postgres arm of Dispatcher.Write: the intents open, then
// one transaction on the session of one of them runs Apply (prepare.go,
// apply.go) and the ledger commits, the last with the COMMIT.
func (d *Dispatcher) postgres(ctx context.Context, w *writeInfo, req Request, env *Env) ([]WriteResult, error) {
	intents, replay, err := d.openIntents(ctx, w, req, sink.Postgres, env)
	if err != nil || replay != nil {
		return replay, err
	}
	defer releaseAll(intents)
	defer d.keepAlive(ctx, intents)()
	env.txnIDs = map[string]string{}
	for o, in := range intents {
		env.txnIDs[o] = in.ID
	}
	var results []WriteResult
	// The ledger commit phase ends with the transaction's commit.
	actx, aph := d.observe(ctx, w, phaseApply, w.outs)
	var lph phase
	err = func() error {
		// The transaction begins with writeSettings; Apply then need not
		// read extra_float_digits.
		tx, owner, err := d.beginTx(actx, intents, refreshSettings(req.Strategy, writeSettings))
		if err != nil {
			return err
		}
		env.floatsExact = true
		defer func() { // a no-op once committed
			cctx, cancel := cleanupContext(ctx)
			defer cancel()
			_ = tx.Rollback(cctx)
		}()
		if results, err = applyStrategy(actx, tx, env, req.Strategy); err != nil {
			return err
		}
		if err := checkModes(results, intents); err != nil {
			return err
		}
		if env.refresh != nil {
			if in := intents[env.refresh.Output]; in != nil {
				env.refresh.SetTxn(in.ID)
			}
			if err := env.refresh.SavePositions(actx, tx); err != nil {
				return err
			}
		}
		aph.end(resultRows(results), nil)
		var lctx context.Context
		lctx, lph = d.observe(ctx, w, phaseLedgerCommit, w.outs)
		if len(results) == 0 {
			return tx.Commit(lctx)
		}
		// The ledger commits, the last one with the transaction's commit
		// (owner's last, so that its ledger commit and the COMMIT share a
		// round trip). The commit time is the database clock at the first
		// ledger commit (stamped by it, without a round trip of its own);
		// every output of the write shares it.
		order := make([]int, 0, len(results))
		for _, own := range []bool{false, true} {
			for i, r := range results {
				if (intents[r.DatasetID] == owner) == own {
					order = append(order, i)
				}
			}
		}
		var now time.Time
		for k, i := range order {
			r := &results[i]
			in := intents[r.DatasetID]
			o := ledger.Outcome{RowCount: r.Rows, CommittedAt: now, Schema: r.columns.JSON()}
			switch {
			case k == len(order)-1:
				now, err = d.cfg.Ledger.CommitTxEnd(lctx, tx, in, o)
			case now.IsZero():
				now, err = d.cfg.Ledger.CommitTxNow(lctx, tx, in, o)
			default:
				err = d.cfg.Ledger.CommitTx(lctx, tx, in, o)
			}
			if err != nil {
				return err
			}
			r.TxnID = in.ID
		}
		for i := range results {
			results[i].CommittedAt = now
		}
		return nil
	}()
	aph.end(0, err) // when Apply failed (a no-op otherwise)
	lph.end(resultRows(results), err)
	if err != nil {
		// The transaction rolled back: nothing landed, the intents abort.
		d.abortAll(ctx, intents, err)
		return nil, err
	}
	d.afterRefresh(ctx, env.refresh)
	d.logResults(ctx, req, results)
	return results, nil
}
