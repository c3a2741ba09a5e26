package ledgertest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/ledger/ledgertest"

	"github.com/lakewrite/lakewrite/facade"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// recorder is a testing.TB that records failures instead of stopping the
// test, to check the assertions' failure paths.
type recorder struct {
	testing.TB
	failed []string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
}

func (r *recorder) check(t *testing.T, want string) {
	t.Helper()
	switch {
	case want == "" && len(r.failed) != 0:
		t.Fatalf("want no failure, got %q", r.failed)
	case want != "" && (len(r.failed) != 1 || !strings.Contains(r.failed[0], want)):
		t.Fatalf("want one failure containing %q, got %q", want, r.failed)
	}
	r.failed = nil
}

func TestAssertions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	l := ledgertest.NewLedger(t, pool, nil)
	r := &recorder{TB: t}

	if _, err := l.EnsureDataset(ctx, "orders", "Orders", nil); err != nil {
		t.Fatal(err)
	}
	ledgertest.RequireWatermark(r, l, "orders", time.Time{})
	r.check(t, "")
	ledgertest.RequireSink(r, l, "orders", "")
	r.check(t, "")
	ledgertest.LastTxn(r, pool, l, "orders")
	r.check(t, `dataset "orders" has no intent`)

	in, err := l.Open(ctx, ledger.OpenParams{DatasetID: "orders", WriterID: "team.orders", Sink: "iceberg_native", WriteMode: facade.Replace})
	if err != nil {
		t.Fatal(err)
	}
	ledgertest.RequireOpen(r, l, in.ID)
	r.check(t, "")
	ledgertest.RequireCommitted(r, l, in.ID)
	r.check(t, "want committed, got open")
	ledgertest.RequireNoOpen(r, l, "orders")
	r.check(t, `dataset "orders" has an intent open since`)

	at := time.Date(2026, 3, 4, 5, 6, 7, 8000, time.UTC)
	if err := l.Commit(ctx, in, ledger.Outcome{RowCount: 42, SnapshotID: 7, CommittedAt: at}); err != nil {
		t.Fatal(err)
	}
	if txn := ledgertest.RequireCommitted(r, l, in.ID); txn.RowCount != 42 || txn.SnapshotID != 7 {
		t.Fatalf("RequireCommitted returned %+v", txn)
	}
	r.check(t, "")
	ledgertest.RequireNoOpen(r, l, "orders")
	r.check(t, "")
	ledgertest.RequireWatermark(r, l, "orders", at)
	r.check(t, "")
	ledgertest.RequireWatermark(r, l, "orders", at.Add(time.Millisecond))
	r.check(t, "want watermark 2026-03-04T05:06:07.001008Z, got 2026-03-04T05:06:07.000008Z")
	ledgertest.RequireRowCount(r, l, "orders", 42)
	r.check(t, "")
	ledgertest.RequireRowCount(r, l, "orders", 41)
	r.check(t, "want row count 41, got 42")
	ledgertest.RequireSink(r, l, "orders", "iceberg_native")
	r.check(t, "")
	ledgertest.RequireAborted(r, l, in.ID)
	r.check(t, "want aborted, got committed")

	in2, err := l.Open(ctx, ledger.OpenParams{DatasetID: "orders", WriterID: "team.orders", Sink: "iceberg_native", WriteMode: facade.Replace})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Abort(ctx, in2, errors.New("boom")); err != nil {
		t.Fatal(err)
	}
	if txn := ledgertest.RequireAborted(r, l, in2.ID); txn.Error != "boom" {
		t.Fatalf("RequireAborted returned %+v", txn)
	}
	r.check(t, "")
	ledgertest.RequireOpen(r, l, in2.ID)
	r.check(t, "want open, got aborted (error: boom)")
	ledgertest.RequireOpen(r, l, ledger.NewID())
	r.check(t, "not found")
	ledgertest.RequireRowCount(r, l, "nope", 0)
	r.check(t, "dataset not found")

	txns := ledgertest.Txns(t, pool, l, "orders")
	if len(txns) != 2 || txns[0].ID != in.ID || txns[1].ID != in2.ID {
		t.Fatalf("Txns: %+v", txns)
	}
	if last := ledgertest.LastTxn(t, pool, l, "orders"); last.ID != in2.ID {
		t.Fatalf("LastTxn: %+v", last)
	}
}

// NewSchema gives each test its own schema in a shared database and drops it
// at the end of the test.
func TestNewSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	var schema string
	t.Run("isolated", func(t *testing.T) {
		schema = ledgertest.NewSchema(t, pool)
		other := ledgertest.NewSchema(t, pool)
		if schema == other || !strings.HasPrefix(schema, "lwtest_") {
			t.Fatalf("schemas %q and %q", schema, other)
		}
		l := ledgertest.NewLedger(t, pool, &ledger.Config{Schema: schema})
		lo := ledgertest.NewLedger(t, pool, &ledger.Config{Schema: other})
		if _, err := l.EnsureDataset(ctx, "orders", "", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := lo.Dataset(ctx, "orders"); !errors.Is(err, ledger.ErrDatasetNotFound) {
			t.Fatalf("the other schema sees the dataset: %v", err)
		}
		ledgertest.Migrate(t, pool, "") // the default schema, idempotent
	})
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("schema %s not dropped at the end of the test", schema)
	}
}
