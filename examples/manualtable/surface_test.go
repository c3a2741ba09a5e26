package manualtable_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/examples/manualtable"
	"github.com/lakewrite/lakewrite/facade"
)

// An upload with no rows never empties a table by accident: a replace
// with an empty body (NDJSON with no lines, CSV with only its header) is
// refused and the table keeps its rows; with ?allow_empty=true it empties
// the table; an empty append is a no-op that is allowed.
func TestEmptyUploadRefused(t *testing.T) {
	t.Parallel()
	for _, double := range []bool{false, true} {
		t.Run(fmt.Sprintf("double=%v", double), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{double: double})
			require.Equal(t, http.StatusCreated, e.declare("d", "id bigint", "name text").status)
			e.uploadCSV("d", "", "id,name\n1,a\n2,b\n").result(t)
			snap := e.currentSnapshot("d")

			e.uploadNDJSON("d", "", "").error(t, http.StatusBadRequest, manualtable.CodeEmptyUpload)
			e.uploadNDJSON("d", "", "\n\n").error(t, http.StatusBadRequest, manualtable.CodeEmptyUpload)
			e.uploadCSV("d", "", "id,name\n").error(t, http.StatusBadRequest, manualtable.CodeEmptyUpload)
			e.uploadCSV("d", "?mode=replace&allow_empty=false", "id,name\n").error(t, http.StatusBadRequest, manualtable.CodeEmptyUpload)
			e.uploadCSV("d", "?allow_empty=maybe", "id,name\n").error(t, http.StatusBadRequest, manualtable.CodeBadRequest)
			require.Len(t, e.rows("d"), 2)
			require.Equal(t, snap, e.currentSnapshot("d"), "no snapshot from a refused upload")
			require.Equal(t, int64(2), e.dataset("d").RowCount)

			require.Zero(t, e.uploadNDJSON("d", "?mode=append", "").result(t).Rows)
			require.Len(t, e.rows("d"), 2)

			res := e.uploadCSV("d", "?allow_empty=true", "id,name\n").result(t)
			require.Zero(t, res.Rows)
			require.Empty(t, e.rows("d"))
			require.Zero(t, e.dataset("d").RowCount)
		})
	}
}

// Every error answer, including unknown routes and wrong methods, is an
// RFC 9457 problem document.
func TestProblemDetails(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{double: true})
	p := e.do(http.MethodGet, "/nope", "", nil).error(t, http.StatusNotFound, manualtable.CodeNotFound)
	require.Equal(t, "/nope", p.Instance)
	r := e.do(http.MethodDelete, "/datasets/d", "", nil)
	r.error(t, http.StatusMethodNotAllowed, manualtable.CodeMethod)
	require.Equal(t, "GET, PUT", r.header.Get("Allow"))
	r = e.do(http.MethodGet, "/datasets/d/rows", "", nil)
	r.error(t, http.StatusMethodNotAllowed, manualtable.CodeMethod)
	require.Equal(t, "POST", r.header.Get("Allow"))
	p = e.uploadCSV("nope", "", "id\n1\n").error(t, http.StatusNotFound, manualtable.CodeUnknownDataset)
	require.Equal(t, "/datasets/nope/rows", p.Instance)
}

// The authorizer decides per dataset and action; a refusal reads and
// writes nothing; the principal of an upload is recorded on its ledger
// intent (actor) and in its snapshot summary.
func TestAuthorizerAndUploaderIdentity(t *testing.T) {
	t.Parallel()
	auth := func(r *http.Request, id string, action manualtable.Action) (string, error) {
		user, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		switch {
		case user == "":
			return "", fmt.Errorf("%w: no bearer token", manualtable.ErrUnauthenticated)
		case user == "reader" && action != manualtable.ActionRead:
			return "", errors.New("reader may only read")
		case user == "bob" && id == "secret":
			return "", errors.New("bob may not touch secret")
		}
		return user, nil
	}
	for _, double := range []bool{false, true} {
		t.Run(fmt.Sprintf("double=%v", double), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{double: double, authorize: auth})
			as := func(user, method, path, ct, body string) response {
				req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
				require.NoError(t, err)
				if ct != "" {
					req.Header.Set("Content-Type", ct)
				}
				if user != "" {
					req.Header.Set("Authorization", "Bearer "+user)
				}
				resp, err := e.srv.Client().Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				return response{status: resp.StatusCode, header: resp.Header, body: b}
			}
			decl := `{"name":"D","columns":[{"name":"id","type":"bigint"}]}`
			as("", http.MethodPut, "/datasets/d", "application/json", decl).error(t, http.StatusUnauthorized, manualtable.CodeUnauthorized)
			as("reader", http.MethodPut, "/datasets/d", "application/json", decl).error(t, http.StatusForbidden, manualtable.CodeForbidden)
			_, err := e.ledger.Dataset(context.Background(), "d")
			require.Error(t, err, "a refused declaration records nothing")
			require.Equal(t, http.StatusCreated, as("alice", http.MethodPut, "/datasets/d", "application/json", decl).status)
			require.Equal(t, http.StatusCreated, as("alice", http.MethodPut, "/datasets/secret", "application/json", decl).status)

			as("reader", http.MethodPost, "/datasets/d/rows", "text/csv", "id\n1\n").error(t, http.StatusForbidden, manualtable.CodeForbidden)
			as("bob", http.MethodPost, "/datasets/secret/rows", "text/csv", "id\n1\n").error(t, http.StatusForbidden, manualtable.CodeForbidden)
			as("", http.MethodGet, "/datasets/d", "", "").error(t, http.StatusUnauthorized, manualtable.CodeUnauthorized)
			require.Zero(t, e.currentSnapshot("d"))
			require.Zero(t, e.currentSnapshot("secret"))

			res := as("bob", http.MethodPost, "/datasets/d/rows", "text/csv", "id\n1\n2\n").result(t)
			require.Equal(t, "bob", e.txn(res.TxnID).Actor)
			require.Equal(t, "bob", summaryOf(t, e, "d")[facade.SummaryMetaPrefix+"uploaded-by"])
			require.Equal(t, http.StatusOK, as("reader", http.MethodGet, "/datasets/d", "", "").status)
			res = as("alice", http.MethodPost, "/datasets/d/rows?mode=append", "text/csv", "id\n3\n").result(t)
			require.Equal(t, "alice", e.txn(res.TxnID).Actor)
			require.Equal(t, "alice", summaryOf(t, e, "d")[facade.SummaryMetaPrefix+"uploaded-by"])
		})
	}
}

// summaryOf returns the current snapshot summary of a table.
func summaryOf(t *testing.T, e *env, id string) map[string]string {
	t.Helper()
	if e.double != nil {
		snaps := e.double.Snapshots(id)
		require.NotEmpty(t, snaps)
		return snaps[len(snaps)-1].Summary
	}
	tbl, err := e.facade.LoadTable(context.Background(), id)
	require.NoError(t, err)
	return tbl.CurrentSnapshot().Summary.Properties
}
