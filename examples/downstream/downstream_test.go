package downstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/examples/downstream"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/facadetest"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/ledger/ledgertest"
)

// lakewrite's tests get a Postgres from internal/pgtest. A downstream team
// passes its own test database instead, e.g.
//
//	pool, err := pgxpool.New(ctx, os.Getenv("TEST_DATABASE_URL"))
//
// and keeps the rest of this file as it is.
func TestMain(m *testing.M) { pgtest.MainWithDatabase(m, "DATABASE_URL") }

const dataset = downstream.DefaultDatasetID

type fixture struct {
	pool *pgxpool.Pool
	l    *ledger.Ledger
	mem  memory.Allocator
	lake *facadetest.Lakehouse
	p    *downstream.Publisher
}

// newFixture wires the pipeline on the in-memory lakehouse and a ledger in
// a schema of its own, so the tests can run in parallel on one database.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	pool := pgtest.Pool(t)
	l := ledgertest.NewLedger(t, pool, &ledger.Config{Schema: ledgertest.NewSchema(t, pool)})
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	lake := facadetest.New(&facadetest.Config{Allocator: mem})
	t.Cleanup(lake.Close)
	f := &fixture{pool: pool, l: l, mem: mem, lake: lake}
	f.p = f.publisher(t)
	return f
}

// publisher returns a Publisher on the fixture's lakehouse and ledger whose
// writes go through facadetest.Wrap with faults: the way to make a write
// fail where the test wants it to.
func (f *fixture) publisher(t *testing.T, faults ...facadetest.Fault) *downstream.Publisher {
	t.Helper()
	p, err := downstream.New(downstream.Config{Lakehouse: facadetest.Wrap(f.lake, faults...), Ledger: f.l, Allocator: f.mem})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var orders = []downstream.Order{
	{Customer: "acme", AmountCents: 1250},
	{Customer: "globex", AmountCents: 99},
	{Customer: "acme", AmountCents: 750},
}

func TestPublish(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	res, err := f.p.Publish(context.Background(), orders)
	if err != nil {
		t.Fatal(err)
	}

	// What landed in the lakehouse...
	facadetest.RequireRows(t, f.lake, dataset, []facadetest.Row{
		{"customer": "acme", "orders": "2", "total_cents": "2000"},
		{"customer": "globex", "orders": "1", "total_cents": "99"},
	})
	facadetest.RequireSnapshotCount(t, f.lake, dataset, 1)
	facadetest.RequireTxnLanded(t, f.lake, dataset, res.TxnID)

	// ...and what the ledger says about it.
	txn := ledgertest.RequireCommitted(t, f.l, res.TxnID)
	if txn.RowCount != 2 || txn.SnapshotID != res.SnapshotID {
		t.Fatalf("ledger recorded %d rows, snapshot %d; the commit said %d, %d", txn.RowCount, txn.SnapshotID, res.Rows, res.SnapshotID)
	}
	ledgertest.RequireWatermark(t, f.l, dataset, res.CommittedAt)
	ledgertest.RequireRowCount(t, f.l, dataset, 2)
	ledgertest.RequireSink(t, f.l, dataset, "iceberg_native")
	ledgertest.RequireNoOpen(t, f.l, dataset)

	// A second publish replaces the table.
	res2, err := f.p.Publish(context.Background(), orders[:1])
	if err != nil {
		t.Fatal(err)
	}
	facadetest.RequireRows(t, f.lake, dataset, []facadetest.Row{{"customer": "acme", "orders": "1", "total_cents": "1250"}})
	facadetest.RequireSnapshotCount(t, f.lake, dataset, 2)
	ledgertest.RequireWatermark(t, f.l, dataset, res2.CommittedAt)
	ledgertest.RequireRowCount(t, f.l, dataset, 1)
}

// Fault injection: the commit's outcome is unknown. The intent must stay
// open (never aborted: the snapshot may have landed), and Recover with the
// pipeline's Lookup settles it either way.
func TestPublishCommitStateUnknown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	first, err := f.p.Publish(ctx, orders)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("not landed", func(t *testing.T) {
		// The commit request is lost: nothing lands.
		p := f.publisher(t, facadetest.Fault{Point: facadetest.BeforeCommit, Err: facade.ErrCommitStateUnknown})
		_, err := p.Publish(ctx, orders[:1])
		if !errors.Is(err, facade.ErrCommitStateUnknown) || !errors.Is(err, ledger.ErrOutcomeUnknown) {
			t.Fatalf("want an unknown outcome, got %v", err)
		}
		open := ledgertest.LastTxn(t, f.pool, f.l, dataset)
		ledgertest.RequireOpen(t, f.l, open.ID)
		facadetest.RequireTxnAbsent(t, f.lake, dataset, open.ID)
		facadetest.RequireSnapshotCount(t, f.lake, dataset, 1)
		ledgertest.RequireWatermark(t, f.l, dataset, first.CommittedAt) // unchanged

		rep, err := f.l.Recover(ctx, dataset, time.Nanosecond, f.p.Lookup)
		if err != nil || len(rep.Aborted) != 1 {
			t.Fatalf("Recover: %+v, %v", rep, err)
		}
		ledgertest.RequireAborted(t, f.l, open.ID)
		ledgertest.RequireRowCount(t, f.l, dataset, 2)
	})

	t.Run("landed", func(t *testing.T) {
		// The commit's response is lost: the snapshot lands, the caller
		// hears facade.ErrCommitStateUnknown.
		p := f.publisher(t, facadetest.Fault{Point: facadetest.AfterCommit})
		_, err := p.Publish(ctx, orders[:1])
		if !errors.Is(err, ledger.ErrOutcomeUnknown) {
			t.Fatalf("want an unknown outcome, got %v", err)
		}
		open := ledgertest.LastTxn(t, f.pool, f.l, dataset)
		ledgertest.RequireOpen(t, f.l, open.ID)
		landed := facadetest.RequireTxnLanded(t, f.lake, dataset, open.ID)

		rep, err := f.l.Recover(ctx, dataset, time.Nanosecond, f.p.Lookup)
		if err != nil || len(rep.RolledForward) != 1 {
			t.Fatalf("Recover: %+v, %v", rep, err)
		}
		ledgertest.RequireCommitted(t, f.l, open.ID)
		ledgertest.RequireWatermark(t, f.l, dataset, landed.CommittedAt)
		ledgertest.RequireRowCount(t, f.l, dataset, 1)
		facadetest.RequireRowCount(t, f.lake, dataset, 1)
	})
}

// Clean failures abort the intent and leave table and ledger as they were.
func TestPublishFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	first, err := f.p.Publish(ctx, orders)
	if err != nil {
		t.Fatal(err)
	}
	for name, fault := range map[string]facadetest.Fault{
		"commit conflict": {Point: facadetest.BeforeCommit, Err: facade.ErrCommitConflict},
		"input failure":   {Point: facadetest.MidStream},
	} {
		if _, err := f.publisher(t, fault).Publish(ctx, orders[:1]); err == nil {
			t.Fatalf("%s: no error", name)
		}
		ledgertest.RequireAborted(t, f.l, ledgertest.LastTxn(t, f.pool, f.l, dataset).ID)
		facadetest.RequireSnapshotCount(t, f.lake, dataset, 1)
		facadetest.RequireTxnLanded(t, f.lake, dataset, first.TxnID)
		ledgertest.RequireWatermark(t, f.l, dataset, first.CommittedAt)
		ledgertest.RequireRowCount(t, f.l, dataset, 2)
	}

	// Bad input: refused before any intent is opened.
	before := len(ledgertest.Txns(t, f.pool, f.l, dataset))
	if _, err := f.p.Publish(ctx, []downstream.Order{{Customer: "", AmountCents: 1}}); !errors.Is(err, downstream.ErrInvalid) {
		t.Fatalf("want ErrInvalid, got %v", err)
	}
	if after := len(ledgertest.Txns(t, f.pool, f.l, dataset)); after != before {
		t.Fatalf("an intent was opened for bad input")
	}
}
