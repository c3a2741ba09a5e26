package writestrategy

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
)

// ShadowConfig configures the shadow writes of the datasets whose writer
// flag says sink.Shadow (see DispatchConfig.Shadow).
//
// A write in shadow is a Postgres write, the write of record, exactly as
// without shadow. Once it has committed, the Dispatcher writes the rows it
// committed to the dataset's Iceberg table (a replace carrying the write's
// ledger transaction id), records in the control plane whether the two
// sinks agree (Dispatcher.ShadowStatus), and only then returns. The shadow
// runs under a maintenance intent of the dataset, so no other write of it
// runs meanwhile; it reads the row store in one repeatable-read snapshot
// in which the write of record is the dataset's latest, so the rows are
// the ones just written, never a second read of the sources. Readers
// resolve the dataset through the ledger, which still says Postgres: the
// Iceberg table is theirs only after Dispatcher.Promote.
type ShadowConfig struct {
	// Timeout bounds one shadow write: its wait for the dataset, its
	// stream, its commit and its parity check. Zero means twice the
	// duration of the write of record, plus 10 s. A shadow write that
	// fails or runs out of time is aborted (nothing becomes visible in the
	// table), logged at Warn and recorded as failed.
	Timeout time.Duration
	// Fatal makes a failed shadow write fail the Write: it returns the
	// committed results of the write of record together with a
	// *ShadowError. Without it, the failure is only logged and recorded.
	Fatal bool
	// PromoteAfterRuns, when positive, promotes a dataset by itself (as
	// Dispatcher.Promote) after a shadow write once its last
	// PromoteAfterRuns shadow runs matched, the first of them started at
	// least PromoteAfter ago. A mismatch or a failure starts the count
	// again.
	PromoteAfterRuns int
	// PromoteAfter: see PromoteAfterRuns.
	PromoteAfter time.Duration
}

// shadowSlack is added to twice the write of record's duration to bound a
// shadow write (ShadowConfig.Timeout zero).
const shadowSlack = 10 * time.Second

// ShadowError is a shadow write that failed while its write of record
// committed, returned by Write only with ShadowConfig.Fatal.
type ShadowError struct {
	// DatasetID is the output whose shadow failed.
	DatasetID string
	// TxnID is the ledger transaction of the committed write of record.
	TxnID string
	// Err is why the shadow failed (also recorded in its ShadowRun).
	Err error
}

func (e *ShadowError) Error() string {
	return fmt.Sprintf("writestrategy: shadow write of %q (transaction %s, committed on Postgres) failed: %v", e.DatasetID, e.TxnID, e.Err)
}

// Unwrap returns the cause.
func (e *ShadowError) Unwrap() error { return e.Err }

// shadowAfter runs the shadow writes of a committed Postgres write: one per
// output whose decision said shadow (w.shadow). took is how long the write
// of record took.
func (d *Dispatcher) shadowAfter(ctx context.Context, w *writeInfo, req Request, took time.Duration, results []WriteResult, err error) ([]WriteResult, error) {
	if err != nil || len(w.shadow) == 0 {
		return results, err
	}
	var errs []error
	for _, r := range results {
		if !w.shadow[r.DatasetID] || r.replayed || r.TxnID == "" {
			continue
		}
		if serr := d.shadowWrite(ctx, req, r, took); serr != nil {
			d.log.WarnContext(ctx, "lakewrite shadow write failed", "writer_id", req.WriterID, "dataset_id", r.DatasetID,
				"txn_id", r.TxnID, "err", serr)
			if d.cfg.Shadow.Fatal {
				errs = append(errs, &ShadowError{DatasetID: r.DatasetID, TxnID: r.TxnID, Err: serr})
			}
		}
	}
	return results, errors.Join(errs...)
}

// shadowOutcome is what one shadow write found.
type shadowOutcome struct {
	status     string
	pg, lake   facade.Checksum
	snapshotID int64
	rounded    int64
	columns    []string
	examples   []string
	err        error
}

// errSuperseded: a later write of record of the dataset committed before
// the shadow write could take the dataset; that write's own shadow covers
// it.
var errSuperseded = errors.New("a later write of record came first")

func (d *Dispatcher) shadowBound(took time.Duration) time.Duration {
	if t := d.cfg.Shadow.Timeout; t > 0 {
		return t
	}
	return 2*took + shadowSlack
}

// shadowWrite is the shadow write of one committed output r.
func (d *Dispatcher) shadowWrite(ctx context.Context, req Request, r WriteResult, took time.Duration) error {
	if d.cfg.Lakehouse == nil {
		return fmt.Errorf("%w: dataset %q is in shadow but DispatchConfig.Lakehouse is nil", ErrInvalid, r.DatasetID)
	}
	sctx, cancel := context.WithTimeout(ctx, d.shadowBound(took))
	defer cancel()
	in, err := d.cfg.Ledger.Open(sctx, ledger.OpenParams{DatasetID: r.DatasetID, WriterID: req.WriterID, Sink: sink.Iceberg,
		WriteMode: ledger.Maintenance, Lookup: d.Lookup, RecoverAfter: d.cfg.RecoverAfter})
	if err != nil {
		rerr := d.recordShadow(ctx, nil, r.DatasetID, r.TxnID, req.WriterID, 0, shadowOutcome{status: "failed", err: err})
		return errors.Join(err, rerr)
	}
	defer in.Release()
	stop := d.cfg.Ledger.KeepAlive(sctx, in)
	defer stop()
	held := map[string]*ledger.Intent{r.DatasetID: in}
	runID, err := d.startShadowRun(sctx, held, r.DatasetID, r.TxnID, req.WriterID)
	var out shadowOutcome
	var maintained bool
	if err == nil {
		out, maintained = d.shadowStream(sctx, held, in, req, r, true)
	} else {
		out = shadowOutcome{status: "failed", err: err}
	}
	if out.err != nil && sctx.Err() != nil && ctx.Err() == nil {
		out.err = fmt.Errorf("shadow write bound (%s) exceeded: %w", d.shadowBound(took), out.err)
	}
	stop()
	rerr := d.recordShadow(ctx, held, r.DatasetID, r.TxnID, req.WriterID, runID, out)
	cctx, ccancel := cleanupContext(ctx)
	defer ccancel()
	var eerr error
	if maintained {
		eerr = d.cfg.Ledger.Commit(cctx, in, ledger.Outcome{CommittedAt: time.Now()})
	} else {
		eerr = d.cfg.Ledger.Withdraw(cctx, in)
	}
	if errors.Is(out.err, errSuperseded) {
		out.err = nil
	}
	if out.err == nil && rerr == nil && out.status == "matched" {
		d.autoPromote(ctx, req.WriterID, r.DatasetID)
	}
	if out.status == "mismatch" {
		d.log.WarnContext(ctx, "lakewrite shadow mismatch", "writer_id", req.WriterID, "dataset_id", r.DatasetID,
			"txn_id", r.TxnID, "postgres", out.pg.String(), "iceberg", out.lake.String(), "columns", out.columns, "examples", out.examples)
	}
	return errors.Join(out.err, rerr, eerr)
}

// shadowStream writes the dataset's rows at the write of record r to its
// Iceberg table and compares both sinks. With maintain, a commit that
// leaves maintenance due runs the table's lifecycle under in, and
// maintained reports that it did.
func (d *Dispatcher) shadowStream(ctx context.Context, held map[string]*ledger.Intent, in *ledger.Intent, req Request, r WriteResult, maintain bool) (out shadowOutcome, maintained bool) {
	fail := func(err error) (shadowOutcome, bool) {
		out.status, out.err = "failed", err
		return out, false
	}
	tx, _, err := d.beginTx(ctx, held, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; `+computeSettings)
	if err != nil {
		return fail(queryError("begin shadow", err))
	}
	defer func() {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		_ = tx.Rollback(cctx)
	}()
	if err := d.checkLatest(ctx, tx, r.DatasetID, r.TxnID); err != nil {
		if errors.Is(err, errSuperseded) {
			out.status, out.err = "superseded", err
			return out, false
		}
		return fail(err)
	}
	env := d.env()
	if err := d.writeOrder(ctx, env, map[string]*ledger.Intent{r.DatasetID: in}); err != nil {
		return fail(err)
	}
	// The dataset read as its own source: the rows of record.
	self := Transform{Output: r.DatasetID, Source: r.DatasetID}
	computed, err := ComputeRows(ctx, tx, env, self, d.cursorOptions(req))
	if err != nil {
		return fail(err)
	}
	c := &computed[0]
	meta := map[string]string{"lakewrite-shadow": "true"}
	for k, v := range req.Metadata {
		meta[k] = v
	}
	var refs []string
	if req.Strategy != nil {
		refs = req.Strategy.Sources()
	}
	st, err := d.cfg.Lakehouse.Stage(ctx, facade.Target{DatasetID: r.DatasetID, WriterID: req.WriterID, Workspace: d.cfg.Workspace},
		facade.WriteRequest{
			Mode:       facade.Replace,
			Schema:     c.stream.Schema(),
			Rows:       summing(c.Batches(), &out.pg),
			SourceRefs: refs,
			Metadata:   withDeclaredSchema(meta, c.Columns),
			TxnID:      r.TxnID,
			Rounded:    c.stream.Rounded,
		})
	if err != nil {
		return fail(err)
	}
	out.rounded = c.stream.Rounded()
	res, err := st.Commit(ctx)
	if err != nil {
		// An unknown outcome is harmless here: the table is not the sink
		// of record, and Promote compares its current contents.
		return fail(err)
	}
	out.snapshotID = res.SnapshotID
	if out.lake, err = d.cfg.Lakehouse.Checksum(ctx, r.DatasetID, res.SnapshotID); err != nil {
		return fail(fmt.Errorf("checksum of snapshot %d: %w", res.SnapshotID, err))
	}
	out.status = "matched"
	if out.lake != out.pg {
		out.status = "mismatch"
		// Which columns: per-column checksums of both sides, the row
		// store read again in the same snapshot.
		out.columns, out.examples, err = d.mismatchedColumns(ctx, tx, env, self, req, r.DatasetID, res.SnapshotID, out.pg.Rows)
		if err != nil {
			out.columns = []string{"(detail unavailable: " + err.Error() + ")"}
		}
	}
	if res.MaintenanceDue && maintain {
		if m, ok := d.maintainer(); ok {
			if _, merr := m.Maintain(ctx, r.DatasetID); merr != nil {
				d.log.WarnContext(ctx, "lakewrite maintenance skipped", "dataset_id", r.DatasetID, "err", merr)
			} else {
				maintained = true
			}
		}
	}
	return out, maintained
}

// checkLatest returns errSuperseded unless txnID is the dataset's latest
// committed write (latestWriteSQL) and the dataset still lives on
// Postgres.
func (d *Dispatcher) checkLatest(ctx context.Context, tx pgx.Tx, datasetID, txnID string) error {
	s := d.env().ctlSchema()
	var lives string
	var latest *string
	err := tx.QueryRow(ctx, `SELECT coalesce(d.sink, ''), (`+latestWriteSQL(s)+`)::text
		FROM `+s+`.datasets d WHERE d.id = $1`, datasetID).Scan(&lives, &latest)
	if err != nil {
		return queryError("shadow: read the dataset", err)
	}
	if lives != string(sink.Postgres) || latest == nil || *latest != txnID {
		return errSuperseded
	}
	return nil
}

// summing passes batches through, adding each one's checksum to sum (the
// checksum is a sum over rows, so the batches' checksums add up to the
// stream's).
func summing(batches iter.Seq2[arrow.RecordBatch, error], sum *facade.Checksum) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for rec, err := range batches {
			if err == nil {
				c, herr := facade.ChecksumBatches(one(rec))
				if herr != nil {
					yield(nil, herr)
					return
				}
				addChecksum(sum, c)
			}
			if !yield(rec, err) {
				return
			}
		}
	}
}

func one(rec arrow.RecordBatch) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
}

func addChecksum(sum *facade.Checksum, c facade.Checksum) {
	sum.Rows += c.Rows
	sum.Sum += c.Sum
	sum.Sum2 += c.Sum2
}

// shadowed returns the outputs a resolution puts in shadow: those of the
// pair when it is one, else the one of decision.
func shadowed(decision sink.Decision, pair sink.PairDecision) map[string]bool {
	ds := []sink.Decision{decision}
	if pair.First.DatasetID != "" {
		ds = []sink.Decision{pair.First, pair.Second}
	}
	var out map[string]bool
	for _, dec := range ds {
		if dec.Shadow {
			if out == nil {
				out = map[string]bool{}
			}
			out[dec.DatasetID] = true
		}
	}
	return out
}

// latestWriteSQL is a scalar subquery over the ledger in schema s (quoted):
// the id of the latest committed write of record (not a maintenance) of
// the dataset row d. Latest is by ended_at, stamped by the database's
// clock at each commit (committed_at of an Iceberg write is its snapshot's
// timestamp, from the writer's clock), and the writes of a dataset end one
// after the other.
func latestWriteSQL(s string) string {
	return `SELECT t.id FROM ` + s + `.pipeline_build_transactions t
		WHERE t.dataset_id = d.id AND t.status = 'committed' AND t.write_mode <> 'maintenance'
		ORDER BY t.ended_at DESC, t.committed_at DESC LIMIT 1`
}
