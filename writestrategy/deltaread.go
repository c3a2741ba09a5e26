package writestrategy

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
)

// appendedScanner is a nativeReader that can read only the rows a window
// of append snapshots added (*facade.Facade).
type appendedScanner interface {
	ScanAppended(ctx context.Context, datasetID string, txnIDs []string, opts facade.ScanOptions) (iter.Seq2[arrow.RecordBatch, error], bool, error)
}

// deltaRequest is a write's request to read sources in delta mode: the
// requested mode and the outputs' states, which incremental.ChooseReadMode
// weighs with each source's window.
type deltaRequest struct {
	outputs []incremental.Output
	// fullRead maps a source with a window that is read whole to
	// ChooseReadMode's reason (reported as WriteResult.FullRead).
	fullRead map[string]string
}

// fullRead is WriteResult.FullRead of the write env plans: each source
// with a window read whole and why, by source id; "" when none (and out of
// delta mode).
func (env *Env) fullRead() string {
	if env.deltaReq == nil || len(env.deltaReq.fullRead) == 0 {
		return ""
	}
	ids := slices.Sorted(maps.Keys(env.deltaReq.fullRead))
	for i, id := range ids {
		ids[i] = id + ": " + env.deltaReq.fullRead[id]
	}
	return strings.Join(ids, "; ")
}

// setDelta records req's read mode in env: in delta mode the windows of
// req.Delta, decided per source when the write's transaction plans them
// (sourceRead), against the outputs' resolved sink and the sink of their
// last committed write.
func (env *Env) setDelta(w *writeInfo, req Request, decision sink.Decision) {
	if req.ReadMode != incremental.ReadDelta {
		return
	}
	dr := &deltaRequest{fullRead: map[string]string{}}
	for _, o := range w.outs {
		dr.outputs = append(dr.outputs, incremental.Output{Decision: decision, Previous: w.datasets[o].Sink})
	}
	env.delta, env.deltaReq = req.Delta, dr
}

// sourceRead is how prepare reads one source: whole, through the row store
// limited to transactions (rowTxns not nil), or as the rows a window of
// append snapshots added (appended not nil).
type sourceRead struct {
	rowTxns  []string
	appended iter.Seq2[arrow.RecordBatch, error]
}

// windowTxns reads the ledger rows of the delta sources' window
// transactions, in the write's transaction.
func (env *Env) windowTxns(ctx context.Context, tx pgx.Tx) (map[string]ledger.Txn, error) {
	var ids []string
	for _, ts := range env.delta {
		ids = append(ids, ts...)
	}
	out := map[string]ledger.Txn{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, `SELECT id::pg_catalog.text, dataset_id, sink, write_mode, status FROM `+env.ctlSchema()+
		`.pipeline_build_transactions WHERE id = ANY($1::pg_catalog.uuid[])`, ids)
	if err != nil {
		return nil, queryError("read delta windows", err)
	}
	defer rows.Close()
	for rows.Next() {
		var t ledger.Txn
		var status string
		if err := rows.Scan(&t.ID, &t.DatasetID, &t.Sink, &t.WriteMode, &status); err != nil {
			return nil, queryError("read delta windows", err)
		}
		t.Status = ledger.Status(status)
		out[t.ID] = t
	}
	if err := rows.Err(); err != nil {
		return nil, queryError("read delta windows", err)
	}
	return out, nil
}

// sourceRead decides how source id (row d) is read: in delta mode, only
// when incremental.ChooseReadMode allows it for every output; a source on
// Iceberg is then read as the rows its window's append snapshots added.
// A window transaction the ledger does not know is refused.
func (env *Env) sourceRead(ctx context.Context, id string, d datasetRow, txns map[string]ledger.Txn, filter []facade.Range) (sourceRead, error) {
	ids, isDelta := env.delta[id]
	if !isDelta || env.deltaReq == nil {
		return sourceRead{}, nil
	}
	if d.sink == sink.Relation {
		return sourceRead{}, fmt.Errorf("%w: delta read of %q, a registered Postgres relation (it has no ledger transactions); read it as a snapshot", ErrInvalid, id)
	}
	src := incremental.Source{DatasetID: id, Lives: d.sink, AppendOnly: true}
	for _, tid := range ids {
		t, ok := txns[tid]
		if !ok {
			return sourceRead{}, fmt.Errorf("%w: delta read of %q: transaction %s is not in the ledger", ErrInvalid, id, tid)
		}
		src.Txns = append(src.Txns, t)
	}
	// choose records why the source is read whole, if it is (the last
	// decision of the write's planning stands).
	choose := func() incremental.ReadMode {
		delete(env.deltaReq.fullRead, id)
		for _, o := range env.deltaReq.outputs {
			if m, why := incremental.ChooseReadMode(o, incremental.ReadDelta, src); m != incremental.ReadDelta {
				env.deltaReq.fullRead[id] = why
				return m
			}
		}
		return incremental.ReadDelta
	}
	if choose() != incremental.ReadDelta {
		return sourceRead{}, nil
	}
	if d.sink != sink.Iceberg {
		return sourceRead{rowTxns: append([]string{}, ids...)}, nil
	}
	// Ask the lakehouse whether the table holds the window as appends
	// only, and plan the read of what they added.
	rows := iter.Seq2[arrow.RecordBatch, error](func(func(arrow.RecordBatch, error) bool) {})
	src.AppendOnly = len(ids) == 0
	if as, ok := env.Lakehouse.(appendedScanner); ok && len(ids) > 0 {
		sc, err := datasetSchema(id, d.schema)
		if err != nil {
			return sourceRead{}, err
		}
		opts := facade.ScanOptions{Columns: nativeColumns(sc), Filter: filter}
		if rows, src.AppendOnly, err = as.ScanAppended(ctx, id, ids, opts); err != nil {
			return sourceRead{}, err
		}
	}
	if choose() != incremental.ReadDelta {
		return sourceRead{}, nil
	}
	return sourceRead{appended: rows}, nil
}
