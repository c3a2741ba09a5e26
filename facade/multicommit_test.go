package facade_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/internal/contract"
	"github.com/lakewrite/lakewrite/internal/restcatalog"
)

// stagePair stages a write of 100 rows (from from) to "left" and "right".
func (e *restEnv) stagePair(t *testing.T, mode facade.WriteMode, from int, txn string) []facade.Staged {
	t.Helper()
	var out []facade.Staged
	for _, ds := range []string{"left", "right"} {
		st, err := e.f.Stage(context.Background(), facade.Target{DatasetID: ds}, facade.WriteRequest{
			Mode: mode, Schema: contract.Schema(), Rows: contract.Seq(e.batches(t, from, 100)), TxnID: txn + "-" + ds})
		require.NoError(t, err)
		out = append(out, st)
	}
	return out
}

func (e *restEnv) pairState(t *testing.T) [2]restState {
	return [2]restState{e.state(t, "left"), e.state(t, "right")}
}

// TestCommitAllREST: the two outputs of a split commit in one REST
// transaction (POST /v1/{prefix}/transactions/commit): both snapshots land
// or neither, through conflicts, faults before and after the catalog
// applied the transaction, and a retried append.
func TestCommitAllREST(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newRESTEnv(t, restcatalog.Config{})
	require.True(t, e.f.SupportsAtomicCommit())

	res, err := e.f.CommitAll(ctx, e.stagePair(t, facade.Replace, 0, "r0")...)
	require.NoError(t, err)
	require.Len(t, res, 2)
	require.Equal(t, 1, e.srv.Count(restcatalog.OpCommitTransaction))
	require.Zero(t, e.srv.Count(restcatalog.OpCommitTable), "no single-table commit")
	for i, ds := range []string{"left", "right"} {
		require.Equal(t, "r0-"+ds, res[i].TxnID, "results in the order of the staged writes")
		require.EqualValues(t, 100, res[i].Rows)
		found, ok, err := e.f.FindTxn(ctx, ds, "r0-"+ds)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, res[i].SnapshotID, found.SnapshotID)
	}

	// 409 twice: retried (re-planned on the fresh tables), one snapshot each.
	before := e.pairState(t)
	e.srv.Inject(restcatalog.Fault{Op: restcatalog.OpCommitTransaction, Status: http.StatusConflict, Times: 2})
	_, err = e.f.CommitAll(ctx, e.stagePair(t, facade.Append, 100, "a1")...)
	require.NoError(t, err)
	after := e.pairState(t)
	for i := range 2 {
		require.Equal(t, before[i].snapshots+1, after[i].snapshots)
		require.EqualValues(t, 200, after[i].sum.Rows)
	}

	// Refused before applying (500): unknown, neither table changed, both
	// txns absent.
	before = after
	e.srv.Inject(restcatalog.Fault{Op: restcatalog.OpCommitTransaction, Status: http.StatusInternalServerError})
	_, err = e.f.CommitAll(ctx, e.stagePair(t, facade.Append, 200, "u1")...)
	require.ErrorIs(t, err, facade.ErrCommitStateUnknown)
	require.Equal(t, before, e.pairState(t))
	for _, ds := range []string{"left", "right"} {
		_, ok, err := e.f.FindTxn(ctx, ds, "u1-"+ds)
		require.NoError(t, err)
		require.False(t, ok)
	}

	// Applied, then 503 or a dropped connection: reconciled, both landed
	// once.
	for _, f := range []restcatalog.Fault{{Status: http.StatusServiceUnavailable, After: true}, {Drop: true, After: true}} {
		before := e.pairState(t)
		f.Op = restcatalog.OpCommitTransaction
		e.srv.Inject(f)
		res, err := e.f.CommitAll(ctx, e.stagePair(t, facade.Replace, 300, "d")...)
		require.NoError(t, err)
		after := e.pairState(t)
		for i := range 2 {
			require.Equal(t, before[i].snapshots+1, after[i].snapshots)
			require.EqualValues(t, 100, after[i].sum.Rows)
			tbl, err := e.f.LoadTable(ctx, []string{"left", "right"}[i])
			require.NoError(t, err)
			require.Equal(t, tbl.CurrentSnapshot().SnapshotID, res[i].SnapshotID)
		}
	}

	// Conflicts beyond the retry budget: ErrCommitConflict, nothing landed,
	// staged files deleted.
	before = e.pairState(t)
	e.srv.Inject(restcatalog.Fault{Op: restcatalog.OpCommitTransaction, Status: http.StatusConflict, Times: 100})
	pair := e.stagePair(t, facade.Replace, 0, "c")
	_, err = e.f.CommitAll(ctx, pair...)
	require.ErrorIs(t, err, facade.ErrCommitConflict)
	e.srv.ClearFaults(restcatalog.OpCommitTransaction, "")
	require.Equal(t, before, e.pairState(t))
	for _, st := range pair {
		for _, df := range st.Info().DataFiles {
			_, statErr := localStat(df.Path)
			require.Error(t, statErr, "deleted: %s", df.Path)
		}
		require.ErrorIs(t, st.Abort(ctx), facade.ErrAlreadyFinished)
	}

	// An append of one side landed alone (say, a retry after an unknown
	// outcome of a single-table commit): the pair commits the other side
	// and reports the landed one as replayed.
	pair = e.stagePair(t, facade.Append, 400, "p")
	_, err = e.write("left", facade.Append, e.batches(t, 400, 100), "p-left")
	require.NoError(t, err)
	before = e.pairState(t)
	res, err = e.f.CommitAll(ctx, pair...)
	require.NoError(t, err)
	require.True(t, res[0].Replayed)
	require.False(t, res[1].Replayed)
	after = e.pairState(t)
	require.Equal(t, before[0], after[0], "left: nothing more")
	require.Equal(t, before[1].snapshots+1, after[1].snapshots)
}

// TestCommitAllNeedsTransactionalCatalog: the SQL catalog has no
// multi-table commit.
func TestCommitAllNeedsTransactionalCatalog(t *testing.T) {
	t.Parallel()
	e := newIcebergEnv(t)
	require.False(t, e.f.SupportsAtomicCommit())
	_, err := e.f.CommitAll(context.Background())
	require.ErrorIs(t, err, facade.ErrInvalidRequest)
}
