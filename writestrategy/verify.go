package writestrategy

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"

	"github.com/lakewrite/lakewrite/sink"
)

// Parity compares one output's current contents with a fresh compute of
// its strategy (see Dispatcher.Verify).
type Parity struct {
	DatasetID string
	// Sink holds the output's current contents: sink.Postgres (the row
	// store) or sink.Iceberg (its table's current snapshot), or
	// sink.Relation for a registered relation (read as it is now); empty when
	// the output has never been written (Stored is then zero).
	Sink sink.Sink
	// Stored is the checksum of the current contents.
	Stored facade.Checksum
	// Computed is the checksum of the output as the strategy computes it
	// now.
	Computed facade.Checksum
}

// OK reports whether the contents equal the fresh compute: same row count
// and checksum.
func (p Parity) OK() bool { return p.Stored == p.Computed }

// String renders the comparison for logs and command lines.
func (p Parity) String() string {
	verdict := "OK"
	if !p.OK() {
		verdict = "MISMATCH"
	}
	return fmt.Sprintf("%s %s: %s rows=%d checksum=%s, computed rows=%d checksum=%s",
		verdict, p.DatasetID, p.Sink, p.Stored.Rows, p.Stored, p.Computed.Rows, p.Computed)
}

// Verify checks the outputs of req.Strategy against a fresh compute: for
// each output (in Outputs order) the checksum of its current contents,
// wherever they live (Checksum), and of the rows the strategy computes
// now (a snapshot read of its sources through ComputeRows, in a
// transaction that is rolled back: nothing is written). Only
// req.Strategy, req.SourceFilter and req.Numeric are used. The checksums are order
// independent and cover the business columns (facade.ChecksumBatches);
// both sides read through the cursor with the dispatcher's options and
// round unconstrained numerics as an Iceberg write does, so an output
// written to either sink compares equal at the written scale.
//
// A mismatch is reported in the result (Parity.OK), not as an error. An
// append output (facade.Append) accumulates its writes, so its fresh
// compute (the rows one more write would add) is not expected to equal its
// contents. The
// compute and a row store read share one repeatable-read snapshot; an
// Iceberg table is read at its current snapshot, so verify while no writer
// of the sources or outputs runs.
func (d *Dispatcher) Verify(ctx context.Context, req Request) ([]Parity, error) {
	if req.Strategy == nil {
		return nil, fmt.Errorf("%w: Verify needs a Strategy", ErrInvalid)
	}
	outs := req.Strategy.Outputs()
	for _, o := range outs {
		if err := checkDatasetID("output", o); err != nil {
			return nil, err
		}
	}
	out := make([]Parity, len(outs))
	err := d.readTx(ctx, func(tx pgx.Tx) error {
		env := d.env()
		env.sourceFilter = req.SourceFilter
		computed, err := ComputeRows(ctx, tx, env, req.Strategy, d.checksumOptions(req))
		if err != nil {
			return err
		}
		// The streams share the transaction: each is consumed in turn.
		for i := range computed {
			c := &computed[i]
			sum, err := facade.ChecksumBatches(c.Batches())
			if err != nil {
				return fmt.Errorf("verify %s: compute: %w", c.DatasetID, whereError(err, []string{c.DatasetID}))
			}
			out[i] = Parity{DatasetID: c.DatasetID, Computed: sum}
		}
		for i := range out {
			p := &out[i]
			if p.Sink, p.Stored, err = d.checksum(ctx, tx, p.DatasetID, req); err != nil {
				return fmt.Errorf("verify %s: %w", p.DatasetID, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Checksum returns the checksum of a dataset's current contents: its
// Iceberg table's current snapshot, over the columns the ledger declares
// for the dataset, when the ledger records it on sink.Iceberg, otherwise its
// rows in the Postgres row store, read through the cursor with the
// dispatcher's options, unconstrained numerics rounded as an Iceberg write
// rounds them. Equal business rows on either sink give equal checksums.
// A dataset never written has the zero checksum.
func (d *Dispatcher) datasetChecksum(ctx context.Context, datasetID string) (facade.Checksum, error) {
	if err := checkDatasetID("checksummed", datasetID); err != nil {
		return facade.Checksum{}, err
	}
	var sum facade.Checksum
	err := d.readTx(ctx, func(tx pgx.Tx) (err error) {
		_, sum, err = d.checksum(ctx, tx, datasetID, Request{})
		return err
	})
	return sum, err
}

func (d *Dispatcher) checksum(ctx context.Context, tx pgx.Tx, datasetID string, req Request) (sink.Sink, facade.Checksum, error) {
	ds, err := d.cfg.Ledger.Dataset(ctx, datasetID)
	if err != nil {
		return "", facade.Checksum{}, err
	}
	if ds.Sink == "" {
		return "", facade.Checksum{}, nil // never written: no rows
	}
	if ds.Sink == sink.Iceberg {
		if d.cfg.Lakehouse == nil {
			return "", facade.Checksum{}, fmt.Errorf("%w: dataset %q lives in Iceberg but DispatchConfig.Lakehouse is nil", ErrInvalid, datasetID)
		}
		sum, err := d.icebergChecksum(ctx, datasetID, ds.Schema)
		return sink.Iceberg, sum, err
	}
	// The dataset read as a source: the same relation every strategy reads.
	computed, err := ComputeRows(ctx, tx, d.env(), Transform{Output: datasetID, Source: datasetID}, d.checksumOptions(req))
	if err != nil {
		return "", facade.Checksum{}, err
	}
	sum, err := facade.ChecksumBatches(computed[0].Batches())
	if ds.Sink == sink.Relation {
		return sink.Relation, sum, err
	}
	return sink.Postgres, sum, err
}

// icebergChecksum is the checksum of an Iceberg dataset's current snapshot
// over its declared columns (all business columns when it declares none).
// An append whose rows leave out a column of the table keeps that column
// (the earlier rows keep their values, the new ones read NULL), while the
// dataset declares only the write's columns: the row store, and every
// strategy reading the dataset as a source, no longer see it.
func (d *Dispatcher) icebergChecksum(ctx context.Context, datasetID string, declared json.RawMessage) (facade.Checksum, error) {
	if len(declared) == 0 {
		return d.cfg.Lakehouse.Checksum(ctx, datasetID, 0)
	}
	s, err := ParseSchema(declared)
	if err != nil {
		return facade.Checksum{}, fmt.Errorf("dataset %q: declared schema: %w", datasetID, err)
	}
	if len(s.Columns) == 0 {
		return d.cfg.Lakehouse.Checksum(ctx, datasetID, 0)
	}
	return facade.ChecksumBatches(d.cfg.Lakehouse.Scan(ctx, datasetID, facade.ScanOptions{Columns: s.names(), ExcludeIdentity: true}))
}

func (d *Dispatcher) env() *Env {
	return &Env{Schema: d.cfg.Ledger.Schema(), Lakehouse: d.cfg.Lakehouse, maxCrossJoinRows: d.cfg.MaxCrossJoinRows}
}

// checksumOptions are the cursor options of a checksum read: the
// dispatcher's (and the request's), numerics rounded whatever the policy,
// so that a row store holding more digits than an Iceberg table compares
// at the written scale.
func (d *Dispatcher) checksumOptions(req Request) *cursor.Options {
	var o cursor.Options
	if c := d.cursorOptions(req); c != nil {
		o = *c
	}
	o.Numeric = cursor.NumericRound
	return &o
}

// readTx runs f in a repeatable-read transaction that is rolled back (a
// native source is hydrated into a temporary table: it is not read only).
func (d *Dispatcher) readTx(ctx context.Context, f func(tx pgx.Tx) error) error {
	tx, err := d.db.Begin(ctx)
	if err != nil {
		return queryError("begin verify", err)
	}
	defer func() {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		_ = tx.Rollback(cctx)
	}()
	if _, err := tx.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`); err != nil {
		return queryError("begin verify", err)
	}
	if _, err := tx.Exec(ctx, computeSettings); err != nil {
		return queryError("configure compute transaction", err)
	}
	return f(tx)
}
