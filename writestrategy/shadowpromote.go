package writestrategy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
)

// ErrNotPromoted refuses a promotion: the dataset's Iceberg table does not
// hold its latest write of record, or the dataset is not in shadow on
// Postgres. The error names the dataset and says why, in words for
// operators. Nothing was changed.
var ErrNotPromoted = errors.New("not promoted")

// Promote makes Iceberg the sink of record of datasets written in shadow
// (writer flag sink.Shadow), in one Postgres transaction (pass both
// outputs of a split, which flip together): writerID's override for each
// dataset becomes sink.Iceberg and the ledger records
// the dataset on Iceberg, so that readers resolving it through the ledger
// read its table from that commit on, with no re-deploy and no moment on
// neither sink. It holds the dataset (a maintenance intent, waiting for a
// write in flight as any write does) and promotes only when the table
// already holds the latest write of record: the last shadow run of the
// dataset's latest committed write matched, and the table's current
// snapshot still has that run's checksum. When that write's own shadow
// has not run yet (under continuous writes it waits behind the next
// writer and Promote) and the dataset's previous shadow run matched,
// Promote runs that shadow write itself, under its hold, and decides on
// its outcome: a dataset written without pause is promoted all the same.
// That catch-up write carries no Request.Metadata and reads numerics as
// DispatchConfig.Cursor.Numeric says: when the writer's requests set
// another Request.Numeric, it may mismatch, and Promote refuses (write
// once more in shadow, then promote). It does not run the table's
// maintenance; the next Iceberg write that finds it due does.
// Otherwise it returns an error matching ErrNotPromoted and changes
// nothing; one matching sink.ErrAboveCeiling when the writer's max sink is
// below Iceberg.
//
// Writers still resolving from a cached decision keep writing Postgres
// (and the shadow) until their resolver's TTL passes: such a write
// rebuilds the row store in full and becomes the sink of record again
// until the next write on Iceberg, which rebuilds the table in full; no
// write is lost either way. A write that read the dataset's storage just
// before the promotion and opened its intent just after fails with
// ErrSinkChanged, having written nothing: retry it. To revert, clear the override (or set it back
// to sink.Shadow or sink.Postgres): from the first write after the TTL the
// dataset is on Postgres again, rebuilt in full, and readers read the
// Iceberg table until that write commits.
func (d *Dispatcher) Promote(ctx context.Context, writerID string, datasetIDs ...string) error {
	if writerID == "" || len(datasetIDs) == 0 {
		return fmt.Errorf("%w: Promote needs a writer id and a dataset", ErrInvalid)
	}
	ids := slices.Clone(datasetIDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	for _, id := range ids {
		if err := checkDatasetID("promoted", id); err != nil {
			return err
		}
	}
	if d.cfg.Lakehouse == nil {
		return fmt.Errorf("%w: Promote needs DispatchConfig.Lakehouse", ErrInvalid)
	}
	// Held in dataset id order, as a write of a split pair holds them.
	var held []*ledger.Intent
	defer func() {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		for _, in := range held {
			if werr := d.cfg.Ledger.Withdraw(cctx, in); werr != nil {
				// Its hold is released: the next writer aborts it.
				d.log.WarnContext(ctx, "lakewrite promote: intent not withdrawn", "dataset_id", in.DatasetID, "err", werr)
			}
		}
	}()
	for _, id := range ids {
		in, err := d.cfg.Ledger.Open(ctx, ledger.OpenParams{DatasetID: id, WriterID: writerID, Sink: sink.Iceberg,
			WriteMode: ledger.Maintenance, Lookup: d.Lookup, RecoverAfter: d.cfg.RecoverAfter})
		if err != nil {
			return err
		}
		held = append(held, in)
	}
	for i, id := range ids {
		if err := d.catchUpShadow(ctx, held[i], writerID, id); err != nil {
			return err
		}
	}
	if err := d.promoteHeld(ctx, writerID, ids); err != nil {
		return err
	}
	if inv, ok := d.cfg.Resolver.(interface{ Invalidate() }); ok {
		inv.Invalidate()
	}
	d.log.InfoContext(ctx, "lakewrite promoted to Iceberg", "writer_id", writerID, "datasets", ids)
	return nil
}

// promoteHeld is Promote once the datasets are held: one transaction.
func (d *Dispatcher) promoteHeld(ctx context.Context, writerID string, ids []string) error {
	tx, err := poolBegin(ctx, d.db, "")
	if err != nil {
		return queryError("begin promote", err)
	}
	defer func() {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		_ = tx.Rollback(cctx)
	}()
	for _, id := range ids {
		if err := d.checkPromotable(ctx, tx, id); err != nil {
			return err
		}
	}
	flags, err := sink.NewFlags(tx, &sink.FlagsConfig{Schema: d.cfg.Ledger.Schema()})
	if err != nil {
		return err
	}
	if err := flags.SetOverride(ctx, writerID, sink.Iceberg, ids...); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE `+d.env().ctlSchema()+`.datasets SET sink = $2, updated_at = now() WHERE id = ANY($1::pg_catalog.text[])`,
		ids, string(sink.Iceberg)); err != nil {
		return queryError("promote", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return queryError("promote: commit", err)
	}
	return nil
}

// checkPromotable refuses, with ErrNotPromoted, a dataset whose Iceberg
// table does not hold its latest write of record; it locks its datasets
// row in tx.
func (d *Dispatcher) checkPromotable(ctx context.Context, tx pgx.Tx, datasetID string) error {
	s := d.env().ctlSchema()
	var lives string
	var latest *string
	err := tx.QueryRow(ctx, `SELECT coalesce(d.sink, ''), (`+latestWriteSQL(s)+`)::text
		FROM `+s+`.datasets d WHERE d.id = $1 FOR UPDATE OF d`, datasetID).Scan(&lives, &latest)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %q", ledger.ErrDatasetNotFound, datasetID)
	}
	if err != nil {
		return queryError("promote: read the dataset", err)
	}
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("writestrategy: dataset %q %w: %s", datasetID, ErrNotPromoted, fmt.Sprintf(format, args...))
	}
	if lives != string(sink.Postgres) || latest == nil {
		return refuse("it lives on %q, not on Postgres with a committed write", lives)
	}
	rows, err := tx.Query(ctx, `SELECT `+shadowRunCols+` FROM `+s+`.shadow_runs
		WHERE dataset_id = $1 AND txn_id = $2 AND status <> 'superseded' ORDER BY id DESC LIMIT 1`, datasetID, *latest)
	if err != nil {
		return queryError("promote: read the shadow runs", err)
	}
	runs, err := pgx.CollectRows(rows, scanShadowRun)
	if err != nil {
		return queryError("promote: read the shadow runs", err)
	}
	if len(runs) == 0 {
		return refuse("its latest write of record (transaction %s) has no shadow run: write it in shadow first", *latest)
	}
	if run := runs[0]; run.Status != "matched" {
		return refuse("the shadow run of its latest write of record (transaction %s) is %s (%s)", *latest, run.Status, runDetail(run))
	}
	cur, err := d.cfg.Lakehouse.Checksum(ctx, datasetID, 0)
	if err != nil {
		return fmt.Errorf("promote %q: checksum of the Iceberg table: %w", datasetID, err)
	}
	if cur != runs[0].Postgres {
		return refuse("the Iceberg table's current snapshot (%s) is not the latest write of record (%s)", cur, runs[0].Postgres)
	}
	return nil
}

func runDetail(r *ShadowRun) string {
	switch {
	case r.Error != "":
		return r.Error
	case len(r.Columns) > 0:
		return fmt.Sprintf("columns %v differ; Postgres %s, Iceberg %s", r.Columns, r.Postgres, r.Iceberg)
	}
	return fmt.Sprintf("Postgres %s, Iceberg %s", r.Postgres, r.Iceberg)
}

// autoPromote promotes a dataset after a matched shadow run when
// ShadowConfig's policy says so. Failures are logged.
func (d *Dispatcher) autoPromote(ctx context.Context, writerID, datasetID string) {
	pol := d.cfg.Shadow
	if pol.PromoteAfterRuns <= 0 {
		return
	}
	st, err := d.ShadowStatus(ctx, datasetID)
	if err != nil {
		d.log.WarnContext(ctx, "lakewrite auto-promotion skipped", "dataset_id", datasetID, "err", err)
		return
	}
	if st.Matching < int64(pol.PromoteAfterRuns) || time.Since(st.Since) < pol.PromoteAfter {
		return
	}
	if err := d.Promote(ctx, writerID, datasetID); err != nil {
		d.log.WarnContext(ctx, "lakewrite auto-promotion failed", "dataset_id", datasetID, "err", err)
	}
}

// catchUpShadow runs, under Promote's hold in, the shadow write of the
// dataset's latest write of record when that write has no shadow run yet
// and the dataset's previous finished shadow run matched. A failed or
// mismatched catch-up is recorded as any shadow run is, and Promote then
// refuses on it. The table's lifecycle is left to the next shadow write.
func (d *Dispatcher) catchUpShadow(ctx context.Context, in *ledger.Intent, writerID, datasetID string) error {
	held := map[string]*ledger.Intent{datasetID: in}
	tx, _, err := d.beginTx(ctx, held, "")
	if err != nil {
		return queryError("promote: read the shadow runs", err)
	}
	s := d.env().ctlSchema()
	var latest *string
	var prev string
	err = tx.QueryRow(ctx, `WITH l AS (SELECT (`+latestWriteSQL(s)+`) AS txn
		FROM `+s+`.datasets d WHERE d.id = $1 AND d.sink = $2)
		SELECT l.txn::text, coalesce((SELECT r.status FROM `+s+`.shadow_runs r
			WHERE r.dataset_id = $1 AND r.status NOT IN ('superseded', 'running') ORDER BY r.id DESC LIMIT 1), '')
		FROM l WHERE l.txn IS NOT NULL AND NOT EXISTS (SELECT 1 FROM `+s+`.shadow_runs r
			WHERE r.dataset_id = $1 AND r.txn_id = l.txn AND r.status <> 'superseded')`,
		datasetID, string(sink.Postgres)).Scan(&latest, &prev)
	cctx, cancel := cleanupContext(ctx)
	_ = tx.Rollback(cctx)
	cancel()
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && (latest == nil || prev != "matched")) {
		return nil // nothing to catch up: checkPromotable decides
	}
	if err != nil {
		return queryError("promote: read the shadow runs", err)
	}
	r := WriteResult{DatasetID: datasetID, TxnID: *latest}
	runID, err := d.startShadowRun(ctx, held, datasetID, *latest, writerID)
	out := shadowOutcome{status: "failed", err: err}
	if err == nil {
		out, _ = d.shadowStream(ctx, held, in, Request{WriterID: writerID}, r, false)
	}
	if out.err != nil && !errors.Is(out.err, errSuperseded) {
		d.log.WarnContext(ctx, "lakewrite promote: shadow catch-up failed", "dataset_id", datasetID, "txn_id", *latest, "err", out.err)
	}
	return d.recordShadow(ctx, held, datasetID, *latest, writerID, runID, out)
}
