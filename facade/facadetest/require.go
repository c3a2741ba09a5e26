package facadetest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lakewrite/lakewrite/facade"
)

// The assertions below take a testing.TB and fail the test with t.Fatalf
// when they do not hold. Those taking a facade.Lakehouse work on this double
// and on the Iceberg facade alike, so a team can run the same test against
// either.

// helperTimeout bounds each read an assertion makes.
const helperTimeout = time.Minute

// nullValue is how a null renders in a Row.
const nullValue = "NULL"

// Row is one row of business columns, each value rendered as text the way
// Arrow's ValueStr renders it: integers and decimals in plain notation
// without trailing zeros ("2.5" for numeric 2.50), timestamps as RFC 3339
// ("2026-01-02T03:04:05.000006Z"), booleans "true"/"false", and a null as
// "NULL". Identity columns (__row_index, __row_id, __created_at) are
// never included.
type Row map[string]string

// String renders the row with its columns sorted by name.
func (r Row) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range slices.Sorted(maps.Keys(r)) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %q", k, r[k])
	}
	b.WriteByte('}')
	return b.String()
}

func readRows(lake facade.Lakehouse, datasetID string) ([]Row, error) {
	ctx, cancel := context.WithTimeout(context.Background(), helperTimeout)
	defer cancel()
	var out []Row
	for rec, err := range lake.Scan(ctx, datasetID, facade.ScanOptions{ExcludeIdentity: true}) {
		if err != nil {
			return nil, err
		}
		sc := rec.Schema()
		for i := range int(rec.NumRows()) {
			r := make(Row, sc.NumFields())
			for j, f := range sc.Fields() {
				col := rec.Column(j)
				if col.IsNull(i) {
					r[f.Name] = nullValue
				} else {
					r[f.Name] = col.ValueStr(i)
				}
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// RequireRows checks that the dataset's current snapshot holds exactly the
// rows want, in any order (as a multiset: a row expected twice must be there
// twice), with exactly the columns of want's rows. The failure message lists
// the missing and the unexpected rows.
func RequireRows(t testing.TB, lake facade.Lakehouse, datasetID string, want []Row) {
	t.Helper()
	got, err := readRows(lake, datasetID)
	if err != nil {
		t.Fatalf("facadetest: RequireRows %q: %v", datasetID, err)
		return
	}
	if msg := diffRows(want, got); msg != "" {
		t.Fatalf("facadetest: RequireRows %q: rows differ (want %d, got %d):\n%s", datasetID, len(want), len(got), msg)
	}
}

// diffRows compares two multisets of rows and describes the difference, or
// returns "" when they are equal.
func diffRows(want, got []Row) string {
	count := map[string]int{}
	for _, r := range got {
		count[r.String()]++
	}
	var missing, unexpected []string
	for _, r := range want {
		k := r.String()
		if count[k] > 0 {
			count[k]--
			continue
		}
		missing = append(missing, k)
	}
	for _, r := range got {
		if k := r.String(); count[k] > 0 {
			count[k]--
			unexpected = append(unexpected, k)
		}
	}
	if len(missing) == 0 && len(unexpected) == 0 {
		return ""
	}
	var b strings.Builder
	for _, k := range missing {
		fmt.Fprintf(&b, "  missing:    %s\n", k)
	}
	for _, k := range unexpected {
		fmt.Fprintf(&b, "  unexpected: %s\n", k)
	}
	return b.String()
}

// RequireRowCount checks the row count of the dataset's current snapshot.
func RequireRowCount(t testing.TB, lake facade.Lakehouse, datasetID string, want int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), helperTimeout)
	defer cancel()
	sum, err := lake.Checksum(ctx, datasetID, 0)
	if err != nil {
		t.Fatalf("facadetest: RequireRowCount %q: %v", datasetID, err)
		return
	}
	if sum.Rows != want {
		t.Fatalf("facadetest: RequireRowCount %q: want %d rows, got %d", datasetID, want, sum.Rows)
	}
}

// RequireSnapshotCount checks how many snapshots the double holds for the
// dataset (0: nothing was ever committed, e.g. every write failed).
func RequireSnapshotCount(t testing.TB, lake *Lakehouse, datasetID string, want int) {
	t.Helper()
	if got := len(lake.Snapshots(datasetID)); got != want {
		t.Fatalf("facadetest: RequireSnapshotCount %q: want %d snapshots, got %d", datasetID, want, got)
	}
}

// RequireTxnLanded checks that a snapshot of the dataset carries the ledger
// transaction id txnID (the write landed) and returns its commit result.
func RequireTxnLanded(t testing.TB, lake facade.Lakehouse, datasetID, txnID string) facade.CommitResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), helperTimeout)
	defer cancel()
	res, found, err := lake.FindTxn(ctx, datasetID, txnID)
	switch {
	case err != nil:
		t.Fatalf("facadetest: RequireTxnLanded %q txn %s: %v", datasetID, txnID, err)
	case !found:
		t.Fatalf("facadetest: RequireTxnLanded %q: no snapshot carries txn %s", datasetID, txnID)
	}
	return res
}

// RequireTxnAbsent checks that no snapshot of the dataset carries txnID
// (the write provably did not land).
func RequireTxnAbsent(t testing.TB, lake facade.Lakehouse, datasetID, txnID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), helperTimeout)
	defer cancel()
	res, found, err := lake.FindTxn(ctx, datasetID, txnID)
	switch {
	case err != nil:
		t.Fatalf("facadetest: RequireTxnAbsent %q txn %s: %v", datasetID, txnID, err)
	case found:
		t.Fatalf("facadetest: RequireTxnAbsent %q: txn %s landed as snapshot %d", datasetID, txnID, res.SnapshotID)
	}
}
