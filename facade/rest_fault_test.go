package facade_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/internal/contract"
	"github.com/lakewrite/lakewrite/internal/restcatalog"
)

// restState is what a fault may or may not have changed.
type restState struct {
	metaLoc   string
	snapshots int
	sum       facade.Checksum
}

func (e *restEnv) state(t *testing.T, ds string) restState {
	t.Helper()
	ctx := context.Background()
	tbl, err := e.f.LoadTable(ctx, ds)
	require.NoError(t, err)
	sum, err := e.f.Checksum(ctx, ds, 0)
	require.NoError(t, err)
	return restState{metaLoc: tbl.MetadataLocation(), snapshots: len(tbl.Metadata().Snapshots()), sum: sum}
}

func (e *restEnv) batches(t *testing.T, from, n int) []arrow.RecordBatch {
	t.Helper()
	bs := contract.Batches(e.mem, contract.Schema(), from, n, 50, 1<<30)
	t.Cleanup(func() {
		for _, b := range bs {
			b.Release()
		}
	})
	return bs
}

func (e *restEnv) write(ds string, mode facade.WriteMode, bs []arrow.RecordBatch, txn string) (facade.CommitResult, error) {
	return e.f.Write(context.Background(), facade.Target{DatasetID: ds, WriterID: "pipeline.output"},
		facade.WriteRequest{Mode: mode, Schema: contract.Schema(), Rows: contract.Seq(bs), TxnID: txn})
}

// TestRESTConflictRetried: a 409 from the catalog is a clean conflict; the
// facade retries it against the refreshed table (Config.CommitRetries) and
// commits exactly one snapshot.
func TestRESTConflictRetried(t *testing.T) {
	t.Parallel()
	e := newRESTEnv(t, restcatalog.Config{})
	bs := e.batches(t, 0, 100)
	_, err := e.write("c", facade.Replace, bs, "t0")
	require.NoError(t, err)
	for i, mode := range []facade.WriteMode{facade.Replace, facade.Append} {
		before := e.state(t, "c")
		calls := e.srv.Count(restcatalog.OpCommitTable)
		e.srv.Inject(restcatalog.Fault{Op: restcatalog.OpCommitTable, Table: e.tableName(t, "c"), Status: http.StatusConflict, Times: 2})
		res, err := e.write("c", mode, bs, fmt.Sprintf("t%d", i+1))
		require.NoError(t, err, mode)
		require.Equal(t, 3, e.srv.Count(restcatalog.OpCommitTable)-calls, "two refused, one landed")
		after := e.state(t, "c")
		require.Equal(t, before.snapshots+1, after.snapshots, "exactly one snapshot")
		require.EqualValues(t, 100, res.Rows)
	}
	require.EqualValues(t, 200, e.state(t, "c").sum.Rows)
}

// TestRESTErrorAfterCommitReconciled: the catalog applied the commit, then
// the client got a 5xx or lost the connection. The facade finds its
// snapshot (by write id) and reports the write committed: one snapshot,
// no duplicate rows, FindTxn sees it, and a retried append with the same
// txn id is a replay, not a second snapshot.
func TestRESTErrorAfterCommitReconciled(t *testing.T) {
	t.Parallel()
	faults := []restcatalog.Fault{
		{Status: http.StatusInternalServerError, After: true},
		{Status: http.StatusBadGateway, After: true},
		{Status: http.StatusServiceUnavailable, After: true},
		{Status: http.StatusGatewayTimeout, After: true},
		{Drop: true, After: true},
	}
	for _, mode := range []facade.WriteMode{facade.Replace, facade.Append} {
		for _, f := range faults {
			t.Run(fmt.Sprintf("%s/%d/drop=%v", mode, f.Status, f.Drop), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				e := newRESTEnv(t, restcatalog.Config{})
				bs := e.batches(t, 0, 100)
				_, err := e.write("d", facade.Replace, bs, "t0")
				require.NoError(t, err)
				before := e.state(t, "d")
				calls := e.srv.Count(restcatalog.OpCommitTable)

				f.Op, f.Table = restcatalog.OpCommitTable, e.tableName(t, "d")
				e.srv.Inject(f)
				res, err := e.write("d", mode, bs, "t1")
				require.NoError(t, err, "reconciled to the landed snapshot")
				require.Equal(t, 1, e.srv.Count(restcatalog.OpCommitTable)-calls, "never re-sent")
				after := e.state(t, "d")
				require.Equal(t, before.snapshots+1, after.snapshots, "exactly one new snapshot")
				tbl, err := e.f.LoadTable(ctx, "d")
				require.NoError(t, err)
				require.Equal(t, tbl.CurrentSnapshot().SnapshotID, res.SnapshotID)
				require.EqualValues(t, 100, res.Rows)
				wantRows := int64(100)
				if mode == facade.Append {
					wantRows = 200
				}
				require.Equal(t, wantRows, after.sum.Rows, "no duplicate rows")
				if mode == facade.Replace {
					require.Equal(t, before.sum, after.sum, "a replace with the same rows is the same table")
				}

				found, ok, err := e.f.FindTxn(ctx, "d", "t1")
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, res.SnapshotID, found.SnapshotID)
				require.Equal(t, res.CommittedAt, found.CommittedAt)
				if mode == facade.Append {
					again, err := e.write("d", facade.Append, bs, "t1")
					require.NoError(t, err)
					require.True(t, again.Replayed)
					require.Equal(t, res.SnapshotID, again.SnapshotID)
					require.Equal(t, after, e.state(t, "d"), "a replay writes nothing")
				}
			})
		}
	}
}

// TestRESTErrorBeforeCommitUnchanged: the catalog refused the commit with a
// 5xx before applying it (or the connection broke before it arrived). The
// client cannot tell, so the write is ErrCommitStateUnknown, never
// re-sent; the table is unchanged and FindTxn reports the txn absent (what
// the ledger's Recover uses to abort the intent). A later write works.
func TestRESTErrorBeforeCommitUnchanged(t *testing.T) {
	t.Parallel()
	faults := []restcatalog.Fault{
		{Status: http.StatusInternalServerError},
		{Status: http.StatusServiceUnavailable},
		{Status: http.StatusGatewayTimeout},
		{Drop: true},
	}
	for _, mode := range []facade.WriteMode{facade.Replace, facade.Append} {
		for _, f := range faults {
			t.Run(fmt.Sprintf("%s/%d/drop=%v", mode, f.Status, f.Drop), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				e := newRESTEnv(t, restcatalog.Config{})
				bs := e.batches(t, 0, 100)
				_, err := e.write("u", facade.Replace, bs, "t0")
				require.NoError(t, err)
				before := e.state(t, "u")
				calls := e.srv.Count(restcatalog.OpCommitTable)

				f.Op, f.Table = restcatalog.OpCommitTable, e.tableName(t, "u")
				e.srv.Inject(f)
				_, err = e.write("u", mode, e.batches(t, 100, 100), "t1")
				require.ErrorIs(t, err, facade.ErrCommitStateUnknown)
				require.NotErrorIs(t, err, facade.ErrCommitConflict)
				require.ErrorContains(t, err, `dataset "u"`)
				require.Equal(t, 1, e.srv.Count(restcatalog.OpCommitTable)-calls, "never retried blindly")
				require.Equal(t, before, e.state(t, "u"), "table unchanged")
				_, ok, err := e.f.FindTxn(ctx, "u", "t1")
				require.NoError(t, err)
				require.False(t, ok, "provably absent")

				res, err := e.write("u", mode, e.batches(t, 100, 100), "t2")
				require.NoError(t, err)
				require.Equal(t, before.snapshots+1, e.state(t, "u").snapshots)
				require.EqualValues(t, 100, res.Rows)
			})
		}
	}
}

// TestRESTUnknownThenFound: the commit landed, the client got a 502, and
// the reconciling load failed too (503): the outcome stays unknown. A
// later FindTxn (what the ledger's Recover asks) finds the landed
// snapshot, so the intent is rolled forward, never written twice.
func TestRESTUnknownThenFound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newRESTEnv(t, restcatalog.Config{})
	bs := e.batches(t, 0, 100)
	name := e.tableName(t, "k")
	_, err := e.write("k", facade.Replace, bs, "t0")
	require.NoError(t, err)
	before := e.state(t, "k")
	st, err := e.f.Stage(ctx, facade.Target{DatasetID: "k"}, facade.WriteRequest{Mode: facade.Append, Schema: contract.Schema(), Rows: contract.Seq(bs), TxnID: "t1"})
	require.NoError(t, err)
	// The commit lands but answers 502; the reconciling load answers 503.
	e.srv.Inject(restcatalog.Fault{Op: restcatalog.OpCommitTable, Table: name, Status: http.StatusBadGateway, After: true})
	e.srv.Inject(restcatalog.Fault{Op: restcatalog.OpLoadTable, Table: name, Status: http.StatusServiceUnavailable})
	_, err = st.Commit(ctx)
	require.ErrorIs(t, err, facade.ErrCommitStateUnknown)
	found, ok, err := e.f.FindTxn(ctx, "k", "t1")
	require.NoError(t, err)
	require.True(t, ok, "landed")
	after := e.state(t, "k")
	require.Equal(t, before.snapshots+1, after.snapshots)
	require.Equal(t, after.sum.Rows, int64(200))
	tbl, err := e.f.LoadTable(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, tbl.CurrentSnapshot().SnapshotID, found.SnapshotID)
}

// TestRESTAuthErrors: refused credentials are typed errors (ErrCatalogAuth,
// naming the refused call, and the REST client's own sentinel), and a write
// refused at commit leaves nothing behind.
func TestRESTAuthErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newRESTEnv(t, restcatalog.Config{Clients: map[string]string{restClientID: restClientSecret, "reader": "r"}})

	// A wrong secret: refused by the token endpoint when opening.
	_, err := facade.OpenRESTCatalog(ctx, "lake", e.srv.URL(), rest.WithCredential(restClientID+":wrong"))
	require.ErrorIs(t, err, facade.ErrCatalogAuth)
	require.ErrorIs(t, err, rest.ErrOAuthError)
	require.ErrorContains(t, err, facade.ErrCatalogAuth.Error()+": open REST catalog "+e.srv.URL())
	// No credentials, or a bad static token: 401 from the catalog.
	_, err = facade.OpenRESTCatalog(ctx, "lake", e.srv.URL(), rest.WithOAuthToken("forged"))
	require.ErrorIs(t, err, facade.ErrCatalogAuth)
	require.ErrorIs(t, err, rest.ErrUnauthorized)

	bs := e.batches(t, 0, 100)
	_, err = e.write("a", facade.Replace, bs, "t0")
	require.NoError(t, err)
	before := e.state(t, "a")

	// A forbidden client: 403 on its first call.
	rc, err := facade.OpenRESTCatalog(ctx, "lake", e.srv.URL(), rest.WithCredential("reader:r"))
	require.NoError(t, err)
	defer rc.Close()
	e.srv.Forbid("reader")
	rf, err := facade.New(rc, &facade.Config{Allocator: e.mem})
	require.NoError(t, err)
	_, err = rf.Write(ctx, facade.Target{DatasetID: "a"}, facade.WriteRequest{Mode: facade.Append, Schema: contract.Schema(), Rows: contract.Seq(bs)})
	require.ErrorIs(t, err, facade.ErrCatalogAuth)
	require.ErrorIs(t, err, rest.ErrForbidden)

	// The writer's token is revoked between staging and commit: the commit
	// is refused (401) before the catalog acts on it. Nothing committed,
	// not "unknown", and the staged data files are deleted.
	st, err := e.f.Stage(ctx, facade.Target{DatasetID: "a"}, facade.WriteRequest{Mode: facade.Append, Schema: contract.Schema(), Rows: contract.Seq(bs), TxnID: "t1"})
	require.NoError(t, err)
	files := st.Info().DataFiles
	require.NotEmpty(t, files)
	e.srv.RevokeTokens()
	_, err = st.Commit(ctx)
	require.ErrorIs(t, err, facade.ErrCatalogAuth)
	require.ErrorIs(t, err, rest.ErrUnauthorized)
	require.NotErrorIs(t, err, facade.ErrCommitStateUnknown)
	require.ErrorContains(t, err, facade.ErrCatalogAuth.Error()+": commit ")
	for _, df := range files {
		_, statErr := localStat(df.Path)
		require.Error(t, statErr, "staged file %s deleted", df.Path)
	}
	// Later writes of the same session are refused up front.
	_, err = e.write("a", facade.Append, bs, "t2")
	require.ErrorIs(t, err, facade.ErrCatalogAuth)

	// Unchanged, seen through a fresh session.
	fresh := newRESTEnvOn(t, e.srv)
	require.Equal(t, before, fresh.state(t, "a"))
}

func localStat(path string) (os.FileInfo, error) { return os.Stat(strings.TrimPrefix(path, "file://")) }
