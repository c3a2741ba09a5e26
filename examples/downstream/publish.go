package downstream

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/writestrategy"

	"github.com/lakewrite/lakewrite/sink"
)

// Defaults of Config.
const (
	DefaultDatasetID = "customer_totals"
	DefaultWriterID  = "team.customer_totals"
)

// ErrInvalid: a bad order or configuration. Nothing was written.
var ErrInvalid = errors.New("downstream: invalid input")

// Order is one input row.
type Order struct {
	Customer    string
	AmountCents int64
}

// Config configures New. Zero fields mean the documented defaults.
type Config struct {
	// Lakehouse receives the writes. Required.
	Lakehouse facade.Lakehouse
	// Ledger records the intents. Required.
	Ledger *ledger.Ledger
	// DatasetID of the output. Default DefaultDatasetID.
	DatasetID string
	// WriterID recorded with each write. Default DefaultWriterID.
	WriterID string
	// Allocator for the Arrow batch built per write. Default
	// memory.DefaultAllocator.
	Allocator memory.Allocator
}

// Publisher writes the customer totals.
type Publisher struct {
	cfg Config
}

// New returns a Publisher. It does not touch the database.
func New(cfg Config) (*Publisher, error) {
	if cfg.Lakehouse == nil || cfg.Ledger == nil {
		return nil, fmt.Errorf("%w: Config.Lakehouse and Config.Ledger are required", ErrInvalid)
	}
	if cfg.DatasetID == "" {
		cfg.DatasetID = DefaultDatasetID
	}
	if cfg.WriterID == "" {
		cfg.WriterID = DefaultWriterID
	}
	if cfg.Allocator == nil {
		cfg.Allocator = memory.DefaultAllocator
	}
	return &Publisher{cfg: cfg}, nil
}

// Schema of the output: one row per customer, sorted by customer.
var Schema = arrow.NewSchema([]arrow.Field{
	{Name: "customer", Type: arrow.BinaryTypes.String},
	{Name: "orders", Type: arrow.PrimitiveTypes.Int64},
	{Name: "total_cents", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// declared is Schema as the ledger's declared schema, so the output is
// readable as a source by writestrategy.
var declared = writestrategy.Schema{Columns: []writestrategy.Column{
	{Name: "customer", Type: "text"}, {Name: "orders", Type: "bigint"}, {Name: "total_cents", Type: "bigint"},
}}

// Publish aggregates orders per customer and replaces the output with the
// totals: one snapshot carrying the ledger transaction id, and the ledger
// intent committed with the commit result (row count, snapshot id, commit
// time as the dataset's watermark).
//
// A failed write aborts the intent. When the commit's outcome is unknown
// (facade.ErrCommitStateUnknown) the error also matches
// ledger.ErrOutcomeUnknown and the intent stays open: the next Publish
// reconciles it first with p.Lookup (as it does the intent of a publisher
// whose process died), so a retry never writes blindly.
func (p *Publisher) Publish(ctx context.Context, orders []Order) (facade.CommitResult, error) {
	for i, o := range orders {
		if o.Customer == "" || o.AmountCents < 0 {
			return facade.CommitResult{}, fmt.Errorf("%w: order %d: empty customer or negative amount", ErrInvalid, i)
		}
	}
	if _, err := p.cfg.Ledger.EnsureDataset(ctx, p.cfg.DatasetID, "Customer totals", nil); err != nil {
		return facade.CommitResult{}, err
	}
	var res facade.CommitResult
	_, err := p.cfg.Ledger.With(ctx, ledger.OpenParams{DatasetID: p.cfg.DatasetID, WriterID: p.cfg.WriterID,
		Sink: sink.Iceberg, WriteMode: facade.Replace, Lookup: p.Lookup},
		func(ctx context.Context, in *ledger.Intent) (ledger.Outcome, error) {
			b := p.totals(orders)
			defer b.Release()
			staged, err := p.cfg.Lakehouse.Stage(ctx, facade.Target{DatasetID: p.cfg.DatasetID, WriterID: p.cfg.WriterID},
				facade.WriteRequest{Mode: facade.Replace, Schema: Schema, Rows: single(b), TxnID: in.ID})
			if err != nil {
				return ledger.Outcome{}, err
			}
			// The ledger's expectations are asked before the snapshot
			// becomes visible.
			r, err := writestrategy.CommitStaged(ctx, p.cfg.Ledger, in, staged, declared.JSON())
			if errors.Is(err, facade.ErrCommitStateUnknown) {
				return ledger.Outcome{}, fmt.Errorf("%w: %w", ledger.ErrOutcomeUnknown, err)
			}
			if err != nil {
				return ledger.Outcome{}, err
			}
			res = r
			return ledger.Outcome{RowCount: r.Rows, SnapshotID: r.SnapshotID, CommittedAt: r.CommittedAt, Schema: declared.JSON()}, nil
		})
	if err != nil {
		return facade.CommitResult{}, fmt.Errorf("downstream: publish %s: %w", p.cfg.DatasetID, err)
	}
	return res, nil
}

// Lookup is the ledger.Lookup of the Publisher's writes: an intent landed
// when a snapshot of the output carries its transaction id.
func (p *Publisher) Lookup(ctx context.Context, in ledger.Intent) (ledger.Landing, error) {
	r, found, err := p.cfg.Lakehouse.FindTxn(ctx, in.DatasetID, in.ID)
	if err != nil || !found {
		return ledger.Landing{}, err
	}
	return ledger.Landing{Landed: true, Outcome: ledger.Outcome{RowCount: r.Rows, SnapshotID: r.SnapshotID,
		CommittedAt: r.CommittedAt, Schema: declared.JSON()}}, nil
}

// totals builds the output batch; the caller releases it.
func (p *Publisher) totals(orders []Order) arrow.RecordBatch {
	type total struct{ n, cents int64 }
	by := map[string]*total{}
	for _, o := range orders {
		t := by[o.Customer]
		if t == nil {
			t = &total{}
			by[o.Customer] = t
		}
		t.n++
		t.cents += o.AmountCents
	}
	customers := make([]string, 0, len(by))
	for c := range by {
		customers = append(customers, c)
	}
	slices.Sort(customers)
	b := array.NewRecordBuilder(p.cfg.Allocator, Schema)
	defer b.Release()
	for _, c := range customers {
		b.Field(0).(*array.StringBuilder).Append(c)
		b.Field(1).(*array.Int64Builder).Append(by[c].n)
		b.Field(2).(*array.Int64Builder).Append(by[c].cents)
	}
	return b.NewRecordBatch()
}

// single yields one batch, borrowed: the facade retains what it keeps.
func single(b arrow.RecordBatch) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) { yield(b, nil) }
}
