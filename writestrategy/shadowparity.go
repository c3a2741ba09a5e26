package writestrategy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
)

// ShadowRun is one shadow write of a dataset as the control plane records
// it (table shadow_runs).
type ShadowRun struct {
	// TxnID is the ledger transaction of the write of record, also
	// recorded in the summary of the snapshot the shadow committed.
	TxnID string
	// Status: "running" (in flight, or its writer died: the next shadow
	// write of the dataset records it "aborted"), "matched", "mismatch",
	// "failed", "aborted", or "superseded" (a later write of record took
	// the dataset first; nothing was written).
	Status string
	// Postgres is the checksum of the row store at TxnID, Iceberg the one
	// of the snapshot the shadow committed: the checksum of Verify,
	// numerics rounded as the Iceberg write rounds them.
	Postgres, Iceberg facade.Checksum
	// Rounded counts the numeric values the Iceberg write rounded.
	Rounded int64
	// Columns are the columns whose values differ on a mismatch.
	Columns []string
	// Examples are a few rows of a mismatch found on one side only (up to
	// three per side), as "postgres: <first column>=<value>" or
	// "iceberg: ...": for outputs of at most 100,000 rows, none for larger
	// ones.
	Examples []string
	// Error says why a failed or aborted run failed.
	Error string
	// StartedAt is when the run began, by the database's clock.
	StartedAt time.Time

	// snapshotID is the Iceberg snapshot the shadow committed (0 when it
	// committed none); finishedAt is when the run ended (zero while
	// running).
	snapshotID int64
	finishedAt time.Time
}

// ShadowStatus sums up the shadow runs of a dataset: how long its two
// sinks have agreed.
type ShadowStatus struct {
	// Runs counts every recorded run; Failed those failed or aborted.
	Runs, Failed int64
	// Matching counts the matched runs since the last mismatch, failure or
	// abort; Since is when the first of them started (zero when none).
	Matching int64
	Since    time.Time
	// First and Last are the first and last runs; LastMismatch the last
	// run that mismatched, failed or was aborted. Nil when there is none.
	First, Last, LastMismatch *ShadowRun
}

const shadowRunCols = `txn_id::text, status, coalesce(pg_rows, 0), coalesce(pg_sum, 0), coalesce(pg_sum2, 0),
	coalesce(iceberg_rows, 0), coalesce(iceberg_sum, 0), coalesce(iceberg_sum2, 0), coalesce(snapshot_id, 0),
	coalesce(rounded, 0), mismatch, coalesce(error, ''), started_at, finished_at`

func scanShadowRun(row pgx.CollectableRow) (*ShadowRun, error) {
	var r ShadowRun
	var ps, ps2, is, is2 int64
	var cols []byte
	var fin *time.Time
	if err := row.Scan(&r.TxnID, &r.Status, &r.Postgres.Rows, &ps, &ps2, &r.Iceberg.Rows, &is, &is2,
		&r.snapshotID, &r.Rounded, &cols, &r.Error, &r.StartedAt, &fin); err != nil {
		return nil, err
	}
	r.Postgres.Sum, r.Postgres.Sum2, r.Iceberg.Sum, r.Iceberg.Sum2 = uint64(ps), uint64(ps2), uint64(is), uint64(is2)
	if fin != nil {
		r.finishedAt = *fin
	}
	if cols != nil {
		var m mismatchDetail
		if err := json.Unmarshal(cols, &m); err != nil {
			return nil, err
		}
		r.Columns, r.Examples = m.Columns, m.Examples
	}
	return &r, nil
}

// ShadowStatus returns the shadow record of a dataset: its consecutive
// matching runs, first and last run, and last mismatch. A dataset never
// written in shadow has a zero status (Runs 0).
func (d *Dispatcher) ShadowStatus(ctx context.Context, datasetID string) (ShadowStatus, error) {
	if err := checkDatasetID("shadowed", datasetID); err != nil {
		return ShadowStatus{}, err
	}
	var st ShadowStatus
	err := d.readTx(ctx, func(tx pgx.Tx) error {
		t := d.env().ctlSchema() + ".shadow_runs"
		var since *time.Time
		if err := tx.QueryRow(ctx, `WITH bad AS (SELECT coalesce(max(id), 0) AS id FROM `+t+`
				WHERE dataset_id = $1 AND status IN ('mismatch', 'failed', 'aborted'))
			SELECT count(*), count(*) FILTER (WHERE status IN ('failed', 'aborted')),
				count(*) FILTER (WHERE status = 'matched' AND id > (SELECT id FROM bad)),
				min(started_at) FILTER (WHERE status = 'matched' AND id > (SELECT id FROM bad))
			FROM `+t+` WHERE dataset_id = $1`, datasetID).Scan(&st.Runs, &st.Failed, &st.Matching, &since); err != nil {
			return queryError("shadow status", err)
		}
		if since != nil {
			st.Since = *since
		}
		for _, q := range []struct {
			into  **ShadowRun
			where string
		}{
			{&st.First, `ORDER BY id LIMIT 1`},
			{&st.Last, `ORDER BY id DESC LIMIT 1`},
			{&st.LastMismatch, `AND status IN ('mismatch', 'failed', 'aborted') ORDER BY id DESC LIMIT 1`},
		} {
			rows, err := tx.Query(ctx, `SELECT `+shadowRunCols+` FROM `+t+` WHERE dataset_id = $1 `+q.where, datasetID)
			if err != nil {
				return queryError("shadow status", err)
			}
			rs, err := pgx.CollectRows(rows, scanShadowRun)
			if err != nil {
				return queryError("shadow status", err)
			}
			if len(rs) == 1 {
				*q.into = rs[0]
			}
		}
		return nil
	})
	return st, err
}

// startShadowRun records a running shadow run, on the session of the
// shadow's intent, after recording as aborted the runs of the dataset
// left running: the dataset is held, so their writers are gone.
func (d *Dispatcher) startShadowRun(ctx context.Context, held map[string]*ledger.Intent, datasetID, txnID, writerID string) (int64, error) {
	tx, _, err := d.beginTx(ctx, held, "")
	if err != nil {
		return 0, queryError("record shadow run", err)
	}
	defer func() {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		_ = tx.Rollback(cctx)
	}()
	t := d.env().ctlSchema() + ".shadow_runs"
	if _, err := tx.Exec(ctx, `UPDATE `+t+` SET status = 'aborted', finished_at = clock_timestamp(),
		error = 'the shadow writer ended before finishing (killed, or its session was lost); nothing became visible'
		WHERE dataset_id = $1 AND status = 'running'`, datasetID); err != nil {
		return 0, queryError("record shadow run", err)
	}
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO `+t+` (dataset_id, txn_id, writer_id, status) VALUES ($1, $2, $3, 'running') RETURNING id`,
		datasetID, txnID, writerID).Scan(&id); err != nil {
		return 0, queryError("record shadow run", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, queryError("record shadow run", err)
	}
	return id, nil
}

// recordShadow records the outcome of a shadow run (runID 0: a run that
// never started, inserted as finished), on the session of the shadow's
// intent when held has one that holds a session (beginTx), else on the
// pool, within the clean-up bound even when ctx has ended.
func (d *Dispatcher) recordShadow(ctx context.Context, held map[string]*ledger.Intent, datasetID, txnID, writerID string, runID int64, out shadowOutcome) error {
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	var cols any
	if len(out.columns) > 0 || len(out.examples) > 0 {
		b, _ := json.Marshal(mismatchDetail{Columns: out.columns, Examples: out.examples})
		cols = string(b)
	}
	var errText any
	if out.err != nil {
		errText = out.err.Error()
	}
	tx, _, err := d.beginTx(cctx, held, "")
	if err != nil {
		return queryError("record shadow run", err)
	}
	defer func() { _ = tx.Rollback(cctx) }()
	t := d.env().ctlSchema() + ".shadow_runs"
	args := []any{runID, datasetID, txnID, writerID, out.status, out.pg.Rows, int64(out.pg.Sum), int64(out.pg.Sum2),
		out.lake.Rows, int64(out.lake.Sum), int64(out.lake.Sum2), out.snapshotID, out.rounded, cols, errText}
	if runID == 0 {
		_, err = tx.Exec(cctx, `INSERT INTO `+t+` (dataset_id, txn_id, writer_id, status, pg_rows, pg_sum, pg_sum2,
			iceberg_rows, iceberg_sum, iceberg_sum2, snapshot_id, rounded, mismatch, error, finished_at)
			SELECT $2, $3::pg_catalog.uuid, $4, $5, $6::pg_catalog.int8, $7::pg_catalog.int8, $8::pg_catalog.int8, $9::pg_catalog.int8,
				$10::pg_catalog.int8, $11::pg_catalog.int8, nullif($12::pg_catalog.int8, 0), $13::pg_catalog.int8, $14::pg_catalog.jsonb, $15::pg_catalog.text,
				clock_timestamp() WHERE $1::pg_catalog.int8 = 0`, args...)
	} else {
		_, err = tx.Exec(cctx, `UPDATE `+t+` SET status = $5, pg_rows = $6, pg_sum = $7, pg_sum2 = $8,
			iceberg_rows = $9, iceberg_sum = $10, iceberg_sum2 = $11, snapshot_id = nullif($12::pg_catalog.int8, 0), rounded = $13,
			mismatch = $14::pg_catalog.jsonb, error = $15, finished_at = clock_timestamp()
			WHERE id = $1 AND dataset_id = $2 AND txn_id = $3 AND writer_id = $4`, args...)
	}
	if err != nil {
		return queryError("record shadow run", err)
	}
	if err := tx.Commit(cctx); err != nil {
		return queryError("record shadow run", err)
	}
	return nil
}

// mismatchDetail is the stored form of a mismatch's detail
// (shadow_runs.mismatch).
type mismatchDetail struct {
	Columns  []string `json:"columns,omitempty"`
	Examples []string `json:"examples,omitempty"`
}

// Bounds of a mismatch's example rows: found only for outputs of at most
// exampleRowsMax rows, at most maxExamples per side.
const (
	exampleRowsMax = 100_000
	maxExamples    = 3
)

// mismatchedColumns compares the per-column checksums of the rows of
// record (computed again in tx, the same snapshot) and of the Iceberg
// snapshot: the columns whose values differ, or are on one side only; and,
// for outputs of at most exampleRowsMax rows, a few rows found on one side
// only.
func (d *Dispatcher) mismatchedColumns(ctx context.Context, tx pgx.Tx, env *Env, self WriteStrategy, req Request, datasetID string, snapshotID int64, rows int64) ([]string, []string, error) {
	computed, err := ComputeRows(ctx, tx, env, self, d.cursorOptions(req))
	if err != nil {
		return nil, nil, err
	}
	examples := rows <= exampleRowsMax
	pg, pgRows, err := columnChecksums(computed[0].Batches(), examples)
	if err != nil {
		return nil, nil, err
	}
	lake, lakeRows, err := columnChecksums(d.cfg.Lakehouse.Scan(ctx, datasetID, facade.ScanOptions{SnapshotID: snapshotID, ExcludeIdentity: true}), examples)
	if err != nil {
		return nil, nil, err
	}
	var out []string
	for name, c := range pg {
		if lc, ok := lake[name]; !ok || lc != c {
			out = append(out, name)
		}
	}
	for name := range lake {
		if _, ok := pg[name]; !ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		out = []string{"(rows differ, no single column does)"}
	}
	var ex []string
	for _, side := range []struct {
		name        string
		rows, other map[uint64][]string
	}{{"postgres", pgRows, lakeRows}, {"iceberg", lakeRows, pgRows}} {
		var keys []string
		for h, ks := range side.rows {
			if n := len(ks) - len(side.other[h]); n > 0 {
				keys = append(keys, ks[:n]...)
			}
		}
		slices.Sort(keys)
		for _, k := range keys[:min(len(keys), maxExamples)] {
			ex = append(ex, side.name+": "+k)
		}
	}
	return out, ex, nil
}

// columnChecksums is the checksum of each business column of batches
// alone; with rows, also each row's hash, mapped to the rows' first
// column as "name=value".
func columnChecksums(batches func(func(arrow.RecordBatch, error) bool), rows bool) (map[string]facade.Checksum, map[uint64][]string, error) {
	out := map[string]facade.Checksum{}
	var byHash map[uint64][]string
	if rows {
		byHash = map[uint64][]string{}
	}
	for rec, err := range batches {
		if err != nil {
			return nil, nil, err
		}
		sc := rec.Schema()
		first := -1
		for i, f := range sc.Fields() {
			if len(f.Name) >= 2 && f.Name[:2] == "__" {
				continue
			}
			if first < 0 {
				first = i
			}
			col := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{f}, nil), []arrow.Array{rec.Column(i)}, rec.NumRows())
			c, err := facade.ChecksumBatches(one(col))
			col.Release()
			if err != nil {
				return nil, nil, fmt.Errorf("checksum of column %q: %w", f.Name, err)
			}
			sum := out[f.Name]
			addChecksum(&sum, c)
			out[f.Name] = sum
		}
		if !rows || first < 0 {
			continue
		}
		for i := range rec.NumRows() {
			row := rec.NewSlice(i, i+1)
			c, err := facade.ChecksumBatches(one(row))
			row.Release()
			if err != nil {
				return nil, nil, err
			}
			key := sc.Field(first).Name + "=" + rec.Column(first).ValueStr(int(i))
			byHash[c.Sum] = append(byHash[c.Sum], key)
		}
	}
	return out, byHash, nil
}
