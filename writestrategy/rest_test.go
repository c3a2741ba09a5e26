package writestrategy_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/restcatalog"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// TestDispatchRESTFaults runs the dispatcher's Iceberg arm over a REST
// catalog (iceberg-go's REST client, OAuth2 client credentials, restcatalog
// server) and injects HTTP faults at the commit. The ledger always ends
// where the table is: committed (at once or rolled forward by Recover) when
// the snapshot landed, aborted when it did not; never a second snapshot.
func TestDispatchRESTFaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := restcatalog.Start(t, restcatalog.Config{
		Warehouse: "file://" + filepath.ToSlash(t.TempDir()), Prefix: "wh",
		Clients: map[string]string{"writer": "secret"},
	})
	cat, err := facade.OpenRESTCatalog(ctx, "lake", srv.URL(), rest.WithCredential("writer:secret"))
	require.NoError(t, err)
	t.Cleanup(func() { cat.Close() })
	f, err := facade.New(cat, &facade.Config{RetryMinWait: time.Millisecond, RetryMaxWait: 10 * time.Millisecond})
	require.NoError(t, err)
	w := newWorld(t, f)
	seedWorld(t, w, 100)
	ensureOutputs(t, w.pool, "out")
	w.iceberg("out")
	ident, err := f.TableIdentifier("out")
	require.NoError(t, err)
	name := ident[len(ident)-1]
	good := writestrategy.Transform{Output: "out", Source: "orders"}
	w.mustWrite(good)

	snapshots := func() int {
		tbl, err := f.LoadTable(ctx, "out")
		require.NoError(t, err)
		return len(tbl.Metadata().Snapshots())
	}
	head := func() int64 {
		tbl, err := f.LoadTable(ctx, "out")
		require.NoError(t, err)
		return tbl.CurrentSnapshot().SnapshotID
	}
	lastTxn := func() ledger.Txn {
		var id string
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT id::text FROM lakewrite.pipeline_build_transactions WHERE dataset_id = 'out' ORDER BY created_at DESC LIMIT 1`).Scan(&id))
		txn, err := w.ledger.Get(ctx, id)
		require.NoError(t, err)
		return txn
	}
	commitFault := func(f restcatalog.Fault) {
		f.Op, f.Table = restcatalog.OpCommitTable, name
		srv.Inject(f)
	}

	// 409 twice: retried, one snapshot, committed.
	n := snapshots()
	commitFault(restcatalog.Fault{Status: http.StatusConflict, Times: 2})
	res := w.mustWrite(good)[0]
	require.Equal(t, n+1, snapshots())
	txn := lastTxn()
	require.Equal(t, ledger.StatusCommitted, txn.Status)
	require.Equal(t, head(), txn.SnapshotID)
	require.Equal(t, res.SnapshotID, txn.SnapshotID)

	// Applied, then 503 / a dropped connection: reconciled in the write,
	// committed with the landed snapshot.
	for _, fault := range []restcatalog.Fault{{Status: http.StatusServiceUnavailable, After: true}, {Drop: true, After: true}} {
		n := snapshots()
		commitFault(fault)
		res := w.mustWrite(good)[0]
		require.Equal(t, n+1, snapshots(), "one snapshot")
		txn := lastTxn()
		require.Equal(t, ledger.StatusCommitted, txn.Status)
		require.Equal(t, head(), txn.SnapshotID)
		require.Equal(t, res.SnapshotID, txn.SnapshotID)
		require.EqualValues(t, 100, txn.RowCount)
	}

	// Refused before applying with a 500: unknown to the writer, the
	// intent is left open; Recover finds no snapshot and aborts it.
	n = snapshots()
	commitFault(restcatalog.Fault{Status: http.StatusInternalServerError})
	_, err = w.write(good)
	require.ErrorIs(t, err, ledger.ErrOutcomeUnknown)
	require.ErrorIs(t, err, facade.ErrCommitStateUnknown)
	require.Equal(t, ledger.StatusOpen, lastTxn().Status)
	require.Equal(t, n, snapshots())
	rep, err := w.ledger.Recover(ctx, "out", time.Nanosecond, w.d.Lookup)
	require.NoError(t, err)
	require.Len(t, rep.Aborted, 1)
	require.Equal(t, ledger.StatusAborted, lastTxn().Status)

	// Applied, then 502, and the writer's reconciling load fails too: left
	// open; Recover finds the snapshot and rolls the intent forward.
	n = snapshots()
	commitFault(restcatalog.Fault{Status: http.StatusBadGateway, After: true,
		Then: []restcatalog.Fault{{Op: restcatalog.OpLoadTable, Table: name, Status: http.StatusServiceUnavailable}}})
	_, err = w.write(good)
	require.ErrorIs(t, err, ledger.ErrOutcomeUnknown)
	open := lastTxn()
	require.Equal(t, ledger.StatusOpen, open.Status)
	require.Equal(t, n+1, snapshots(), "the snapshot landed")
	rep, err = w.ledger.Recover(ctx, "out", time.Nanosecond, w.d.Lookup)
	require.NoError(t, err)
	require.Len(t, rep.RolledForward, 1)
	rolled, err := w.ledger.Get(ctx, open.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusCommitted, rolled.Status)
	require.Equal(t, head(), rolled.SnapshotID)
	require.EqualValues(t, 100, rolled.RowCount)
	require.Equal(t, n+1, snapshots(), "never a second snapshot")
	ds, err := w.ledger.Dataset(ctx, "out")
	require.NoError(t, err)
	require.EqualValues(t, 100, ds.RowCount)

	// Credentials revoked: a typed error, the intent aborted, the table
	// unchanged.
	n = snapshots()
	srv.RevokeTokens()
	_, err = w.write(good)
	require.ErrorIs(t, err, facade.ErrCatalogAuth)
	require.ErrorIs(t, err, rest.ErrUnauthorized)
	require.Equal(t, ledger.StatusAborted, lastTxn().Status)
	fresh, err := facade.OpenRESTCatalog(ctx, "lake", srv.URL(), rest.WithCredential("writer:secret"))
	require.NoError(t, err)
	defer fresh.Close()
	ff, err := facade.New(fresh, nil)
	require.NoError(t, err)
	tbl, err := ff.LoadTable(ctx, "out")
	require.NoError(t, err)
	require.Len(t, tbl.Metadata().Snapshots(), n)
}

// TestDispatchRESTSplitAtomic: on a REST catalog with multi-table
// transactions, both outputs of a split land in one catalog request or
// neither does, whatever fails at the commit.
func TestDispatchRESTSplitAtomic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := restcatalog.Start(t, restcatalog.Config{
		Warehouse: "file://" + filepath.ToSlash(t.TempDir()), Prefix: "wh",
		Clients: map[string]string{"writer": "secret"},
	})
	cat, err := facade.OpenRESTCatalog(ctx, "lake", srv.URL(), rest.WithCredential("writer:secret"))
	require.NoError(t, err)
	t.Cleanup(func() { cat.Close() })
	f, err := facade.New(cat, &facade.Config{RetryMinWait: time.Millisecond, RetryMaxWait: 10 * time.Millisecond})
	require.NoError(t, err)
	require.True(t, f.SupportsAtomicCommit())
	w := newWorld(t, f)
	seedWorld(t, w, 100)
	ensureOutputs(t, w.pool, "big", "small")
	w.iceberg("big", "small")
	split := writestrategy.Split{Source: "orders", Predicate: "amount > $1", Args: []any{50}, Matched: "big", Unmatched: "small"}

	snapshots := func(id string) int {
		tbl, err := f.LoadTable(ctx, id)
		if errors.Is(err, facade.ErrTableNotFound) {
			return 0
		}
		require.NoError(t, err)
		return len(tbl.Metadata().Snapshots())
	}
	lastTxn := func(id string) ledger.Txn {
		var txn string
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT id::text FROM lakewrite.pipeline_build_transactions WHERE dataset_id = $1 ORDER BY created_at DESC LIMIT 1`, id).Scan(&txn))
		got, err := w.ledger.Get(ctx, txn)
		require.NoError(t, err)
		return got
	}
	// agree checks that both tables hold n snapshots and the ledger's last
	// intent of each is committed with the table's head.
	agree := func(n int) {
		t.Helper()
		for _, id := range []string{"big", "small"} {
			require.Equal(t, n, snapshots(id), id)
			tbl, err := f.LoadTable(ctx, id)
			require.NoError(t, err)
			txn := lastTxn(id)
			require.Equal(t, ledger.StatusCommitted, txn.Status, id)
			require.Equal(t, tbl.CurrentSnapshot().SnapshotID, txn.SnapshotID, id)
		}
		// The checksum is a sum over rows: the two outputs add up to the source.
		b, sm := w.checksum("big"), w.checksum("small")
		require.Equal(t, w.checksum("orders"), facade.Checksum{Rows: b.Rows + sm.Rows, Sum: b.Sum + sm.Sum, Sum2: b.Sum2 + sm.Sum2})
	}

	// The first write creates both tables (each its own request), then
	// commits both snapshots in one transaction.
	res := w.mustWrite(split)
	require.Len(t, res, 2)
	require.Equal(t, 1, srv.Count(restcatalog.OpCommitTransaction))
	agree(1)
	tables := srv.Count(restcatalog.OpCommitTable)

	// Conflicts: retried as one.
	srv.Inject(restcatalog.Fault{Op: restcatalog.OpCommitTransaction, Status: http.StatusConflict, Times: 2})
	w.mustWrite(split)
	agree(2)

	// Applied, then a 503 or a dropped connection: reconciled, both
	// committed, one snapshot each.
	for _, fault := range []restcatalog.Fault{{Status: http.StatusServiceUnavailable, After: true}, {Drop: true, After: true}} {
		fault.Op = restcatalog.OpCommitTransaction
		srv.Inject(fault)
		w.mustWrite(split)
	}
	agree(4)

	// Refused before applying: neither table moves; both intents stay open
	// (the outcome is unknown to the writer) and Recover aborts both.
	srv.Inject(restcatalog.Fault{Op: restcatalog.OpCommitTransaction, Status: http.StatusInternalServerError})
	_, err = w.write(split)
	require.ErrorIs(t, err, ledger.ErrOutcomeUnknown)
	for _, id := range []string{"big", "small"} {
		require.Equal(t, 4, snapshots(id))
		require.Equal(t, ledger.StatusOpen, lastTxn(id).Status)
		rep, err := w.ledger.Recover(ctx, id, time.Nanosecond, w.d.Lookup)
		require.NoError(t, err)
		require.Len(t, rep.Aborted, 1)
	}

	// Conflicts past the retry budget: nothing lands, both intents aborted.
	srv.Inject(restcatalog.Fault{Op: restcatalog.OpCommitTransaction, Status: http.StatusConflict, Times: 100})
	_, err = w.write(split)
	require.ErrorIs(t, err, facade.ErrCommitConflict)
	srv.ClearFaults(restcatalog.OpCommitTransaction, "")
	for _, id := range []string{"big", "small"} {
		require.Equal(t, 4, snapshots(id))
		require.Equal(t, ledger.StatusAborted, lastTxn(id).Status)
	}

	w.mustWrite(split)
	agree(5)
	require.Equal(t, tables, srv.Count(restcatalog.OpCommitTable), "every later pair went through one transaction")
}
