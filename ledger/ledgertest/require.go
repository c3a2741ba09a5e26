package ledgertest

import (
	"testing"
	"time"

	"github.com/lakewrite/lakewrite/ledger"

	"github.com/lakewrite/lakewrite/sink"
)

// RequireCommitted checks that the intent txnID is committed and returns it
// (its RowCount, SnapshotID and CommittedAt are the write's outcome).
func RequireCommitted(t testing.TB, l *ledger.Ledger, txnID string) ledger.Txn {
	t.Helper()
	return requireStatus(t, l, txnID, ledger.StatusCommitted)
}

// RequireAborted checks that the intent txnID is aborted and returns it (its
// Error holds the cause).
func RequireAborted(t testing.TB, l *ledger.Ledger, txnID string) ledger.Txn {
	t.Helper()
	return requireStatus(t, l, txnID, ledger.StatusAborted)
}

// RequireOpen checks that the intent txnID is still open: its write's
// outcome is unknown and left for ledger.Sweep or Recover.
func RequireOpen(t testing.TB, l *ledger.Ledger, txnID string) ledger.Txn {
	t.Helper()
	return requireStatus(t, l, txnID, ledger.StatusOpen)
}

func requireStatus(t testing.TB, l *ledger.Ledger, txnID string, want ledger.Status) ledger.Txn {
	t.Helper()
	ctx, cancel := bounded()
	defer cancel()
	txn, err := l.Get(ctx, txnID)
	switch {
	case err != nil:
		t.Fatalf("ledgertest: intent %s: %v", txnID, err)
	case txn.Status != want:
		msg := ""
		if txn.Error != "" {
			msg = " (error: " + txn.Error + ")"
		}
		t.Fatalf("ledgertest: intent %s of %q: want %s, got %s%s", txnID, txn.DatasetID, want, txn.Status, msg)
	}
	return txn
}

// RequireNoOpen checks that the dataset has no open intent (an open
// maintenance intent, which carries no data, is not counted).
func RequireNoOpen(t testing.TB, l *ledger.Ledger, datasetID string) {
	t.Helper()
	ctx, cancel := bounded()
	defer cancel()
	since, open, err := l.OldestOpen(ctx, datasetID)
	switch {
	case err != nil:
		t.Fatalf("ledgertest: open intents of %q: %v", datasetID, err)
	case open:
		t.Fatalf("ledgertest: dataset %q has an intent open since %s", datasetID, since.Format(time.RFC3339Nano))
	}
}

// RequireWatermark checks the dataset's source watermark: the commit time of
// its last committed write (for Iceberg, the snapshot's timestamp). A zero
// want checks that the dataset was never committed.
func RequireWatermark(t testing.TB, l *ledger.Ledger, datasetID string, want time.Time) {
	t.Helper()
	ds := dataset(t, l, datasetID)
	if !ds.SourceWatermark.Equal(want) {
		t.Fatalf("ledgertest: dataset %q: want watermark %s, got %s", datasetID, fmtTime(want), fmtTime(ds.SourceWatermark))
	}
}

// RequireRowCount checks the dataset's recorded row count (the sum of its
// committed writes' counts since the last replace).
func RequireRowCount(t testing.TB, l *ledger.Ledger, datasetID string, want int64) {
	t.Helper()
	if got := dataset(t, l, datasetID).RowCount; got != want {
		t.Fatalf("ledgertest: dataset %q: want row count %d, got %d", datasetID, want, got)
	}
}

// RequireSink checks where the dataset's contents live: the sink of its last
// committed write (sink.Postgres, sink.Iceberg; "" before the first commit).
func RequireSink(t testing.TB, l *ledger.Ledger, datasetID string, want sink.Sink) {
	t.Helper()
	if got := dataset(t, l, datasetID).Sink; got != want {
		t.Fatalf("ledgertest: dataset %q: want sink %q, got %q", datasetID, want, got)
	}
}

func dataset(t testing.TB, l *ledger.Ledger, datasetID string) ledger.Dataset {
	t.Helper()
	ctx, cancel := bounded()
	defer cancel()
	ds, err := l.Dataset(ctx, datasetID)
	if err != nil {
		t.Fatalf("ledgertest: dataset %q: %v", datasetID, err)
	}
	return ds
}

func fmtTime(ts time.Time) string {
	if ts.IsZero() {
		return "(none)"
	}
	return ts.UTC().Format(time.RFC3339Nano)
}
