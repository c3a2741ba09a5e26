package restcatalog_test

import (
	"context"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/restcatalog"
)

func start(t *testing.T, cfg restcatalog.Config, opts ...rest.Option) (*restcatalog.Server, *rest.Catalog, string) {
	t.Helper()
	dir := t.TempDir()
	if cfg.Warehouse == "" {
		cfg.Warehouse = "file://" + filepath.ToSlash(dir)
	}
	srv := restcatalog.Start(t, cfg)
	cat, err := rest.NewCatalog(context.Background(), "test", srv.URL(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { cat.Close() })
	return srv, cat, dir
}

func schema() *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "name", Type: iceberg.PrimitiveTypes.String})
}

func metadataFiles(t *testing.T, dir string) []string {
	var out []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".metadata.json") {
			out = append(out, p)
		}
		return err
	}))
	return out
}

func TestNamespaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, cat, _ := start(t, restcatalog.Config{})
	require.NoError(t, cat.CreateNamespace(ctx, table.Identifier{"a"}, iceberg.Properties{"owner": "me"}))
	require.NoError(t, cat.CreateNamespace(ctx, table.Identifier{"a", "b"}, nil))
	require.NoError(t, cat.CreateNamespace(ctx, table.Identifier{"c"}, nil))
	require.ErrorIs(t, cat.CreateNamespace(ctx, table.Identifier{"a"}, nil), catalog.ErrNamespaceAlreadyExists)

	top, err := cat.ListNamespaces(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, []table.Identifier{{"a"}, {"c"}}, top)
	sub, err := cat.ListNamespaces(ctx, table.Identifier{"a"})
	require.NoError(t, err)
	require.Equal(t, []table.Identifier{{"a", "b"}}, sub)
	// pagination: one per page
	paged, err := cat.ListNamespaces(cat.SetPageSize(ctx, 1), nil)
	require.NoError(t, err)
	require.Equal(t, top, paged)

	props, err := cat.LoadNamespaceProperties(ctx, table.Identifier{"a"})
	require.NoError(t, err)
	require.Equal(t, "me", props["owner"])
	sum, err := cat.UpdateNamespaceProperties(ctx, table.Identifier{"a"}, []string{"owner", "nope"}, iceberg.Properties{"k": "v"})
	require.NoError(t, err)
	require.Equal(t, []string{"owner"}, sum.Removed)
	require.Equal(t, []string{"nope"}, sum.Missing)
	require.Equal(t, []string{"k"}, sum.Updated)

	ok, err := cat.CheckNamespaceExists(ctx, table.Identifier{"a", "b"})
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = cat.CheckNamespaceExists(ctx, table.Identifier{"zz"})
	require.NoError(t, err)
	require.False(t, ok)
	_, err = cat.LoadNamespaceProperties(ctx, table.Identifier{"zz"})
	require.ErrorIs(t, err, catalog.ErrNoSuchNamespace)

	_, err = cat.CreateTable(ctx, table.Identifier{"c", "t"}, schema())
	require.NoError(t, err)
	require.ErrorIs(t, cat.DropNamespace(ctx, table.Identifier{"c"}), catalog.ErrNamespaceNotEmpty)
	require.NoError(t, cat.DropTable(ctx, table.Identifier{"c", "t"}))
	require.NoError(t, cat.DropNamespace(ctx, table.Identifier{"c"}))
	require.ErrorIs(t, cat.DropNamespace(ctx, table.Identifier{"c"}), catalog.ErrNoSuchNamespace)
}

func TestTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, cat, dir := start(t, restcatalog.Config{Prefix: "p1"})
	_, err := cat.CreateTable(ctx, table.Identifier{"ns", "t1"}, schema())
	require.ErrorIs(t, err, catalog.ErrNoSuchNamespace)
	require.NoError(t, cat.CreateNamespace(ctx, table.Identifier{"ns"}, nil))
	t1, err := cat.CreateTable(ctx, table.Identifier{"ns", "t1"}, schema(), catalog.WithProperties(iceberg.Properties{"p": "1"}))
	require.NoError(t, err)
	require.Equal(t, "1", t1.Properties()["p"])
	require.True(t, strings.HasPrefix(t1.Location(), "file://"+filepath.ToSlash(dir)+"/ns.db/t1"), t1.Location())
	require.Len(t, metadataFiles(t, dir), 1, "the server writes the metadata file")
	_, err = cat.CreateTable(ctx, table.Identifier{"ns", "t1"}, schema())
	require.ErrorIs(t, err, catalog.ErrTableAlreadyExists)

	// A commit: requirements checked, updates applied, a new metadata file.
	t1b, err := t1.NewTransaction().Commit(ctx) // no change: no new file
	require.NoError(t, err)
	require.Equal(t, t1.MetadataLocation(), t1b.MetadataLocation())
	txn := t1.NewTransaction()
	require.NoError(t, txn.SetProperties(iceberg.Properties{"q": "2"}))
	t1c, err := txn.Commit(ctx)
	require.NoError(t, err)
	require.NotEqual(t, t1.MetadataLocation(), t1c.MetadataLocation())
	require.Len(t, metadataFiles(t, dir), 2)
	loaded, err := cat.LoadTable(ctx, table.Identifier{"ns", "t1"})
	require.NoError(t, err)
	require.Equal(t, "2", loaded.Properties()["q"])
	require.Equal(t, t1c.MetadataLocation(), loaded.MetadataLocation())
	require.Equal(t, t1c.MetadataLocation(), srv.MetadataLocation([]string{"ns"}, "t1"))

	// A stale commit (the table moved) is a 409: ErrCommitFailed.
	_, _, err = cat.CommitTable(ctx, table.Identifier{"ns", "t1"},
		[]table.Requirement{table.AssertLastAssignedFieldID(99)}, []table.Update{table.NewSetPropertiesUpdate(iceberg.Properties{"x": "y"})})
	require.ErrorIs(t, err, table.ErrCommitFailed)
	// Unknown updates are refused with 400 before anything changes.
	_, _, err = cat.CommitTable(ctx, table.Identifier{"ns", "t1"}, nil, []table.Update{table.NewSetCurrentSchemaUpdate(42)})
	require.ErrorIs(t, err, rest.ErrBadRequest)
	_, _, err = cat.CommitTable(ctx, table.Identifier{"ns", "nope"}, nil, nil)
	require.ErrorIs(t, err, catalog.ErrNoSuchTable)

	_, err = cat.CreateTable(ctx, table.Identifier{"ns", "t2"}, schema())
	require.NoError(t, err)
	var names []string
	for id, err := range cat.ListTables(cat.SetPageSize(ctx, 1), table.Identifier{"ns"}) {
		require.NoError(t, err)
		names = append(names, strings.Join(id, "."))
	}
	require.Equal(t, []string{"ns.t1", "ns.t2"}, names)

	ok, err := cat.CheckTableExists(ctx, table.Identifier{"ns", "t2"})
	require.NoError(t, err)
	require.True(t, ok)
	_, err = cat.RenameTable(ctx, table.Identifier{"ns", "t2"}, table.Identifier{"ns", "t1"})
	require.Error(t, err, "destination exists")
	moved, err := cat.RenameTable(ctx, table.Identifier{"ns", "t2"}, table.Identifier{"ns", "t3"})
	require.NoError(t, err)
	require.Equal(t, table.Identifier{"ns", "t3"}, moved.Identifier())
	ok, err = cat.CheckTableExists(ctx, table.Identifier{"ns", "t2"})
	require.NoError(t, err)
	require.False(t, ok)
	_, err = cat.LoadTable(ctx, table.Identifier{"ns", "t2"})
	require.ErrorIs(t, err, catalog.ErrNoSuchTable)
	require.NoError(t, cat.DropTable(ctx, table.Identifier{"ns", "t3"}))
	require.ErrorIs(t, cat.DropTable(ctx, table.Identifier{"ns", "t3"}), catalog.ErrNoSuchTable)
	require.Equal(t, 2, srv.Count(restcatalog.OpRenameTable))
}

// TestStagedCreate: a create transaction (stage-create, then a commit with
// assert-create) creates the table at its commit.
func TestStagedCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, cat, _ := start(t, restcatalog.Config{})
	require.NoError(t, cat.CreateNamespace(ctx, table.Identifier{"ns"}, nil))
	tbl, err := cat.CreateTable(ctx, table.Identifier{"ns", "s"}, schema(),
		catalog.WithStagedUpdates(table.NewSetPropertiesUpdate(iceberg.Properties{"staged": "yes"})))
	require.NoError(t, err)
	require.Equal(t, "yes", tbl.Properties()["staged"])
	loaded, err := cat.LoadTable(ctx, table.Identifier{"ns", "s"})
	require.NoError(t, err)
	require.Equal(t, tbl.Metadata().TableUUID(), loaded.Metadata().TableUUID())
}

// TestTransactionCommit: a multi-table commit lands on every table or on
// none: one failed requirement leaves all tables as they were.
func TestTransactionCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, cat, dir := start(t, restcatalog.Config{})
	require.NoError(t, cat.CreateNamespace(ctx, table.Identifier{"ns"}, nil))
	a, err := cat.CreateTable(ctx, table.Identifier{"ns", "a"}, schema())
	require.NoError(t, err)
	b, err := cat.CreateTable(ctx, table.Identifier{"ns", "b"}, schema())
	require.NoError(t, err)
	set := func(v string) []table.Update {
		return []table.Update{table.NewSetPropertiesUpdate(iceberg.Properties{"v": v})}
	}
	uuidOf := func(tb *table.Table) table.Requirement { return table.AssertTableUUID(tb.Metadata().TableUUID()) }

	require.NoError(t, cat.CommitTransaction(ctx, []table.TableCommit{
		{Identifier: a.Identifier(), Requirements: []table.Requirement{uuidOf(a)}, Updates: set("1")},
		{Identifier: b.Identifier(), Requirements: []table.Requirement{uuidOf(b)}, Updates: set("1")},
	}))
	prop := func(name string) string {
		tb, err := cat.LoadTable(ctx, table.Identifier{"ns", name})
		require.NoError(t, err)
		return tb.Properties()["v"]
	}
	require.Equal(t, "1", prop("a"))
	require.Equal(t, "1", prop("b"))
	files := len(metadataFiles(t, dir))

	// b's requirement fails: neither table changes, no file is left.
	err = cat.CommitTransaction(ctx, []table.TableCommit{
		{Identifier: a.Identifier(), Requirements: []table.Requirement{uuidOf(a)}, Updates: set("2")},
		{Identifier: b.Identifier(), Requirements: []table.Requirement{uuidOf(a)}, Updates: set("2")},
	})
	require.ErrorIs(t, err, table.ErrCommitFailed)
	require.Equal(t, "1", prop("a"))
	require.Equal(t, "1", prop("b"))
	require.Len(t, metadataFiles(t, dir), files)

	// A fault after applying: both landed, the client hears 503.
	srv.Inject(restcatalog.Fault{Op: restcatalog.OpCommitTransaction, Table: "b", Status: http.StatusServiceUnavailable, After: true})
	err = cat.CommitTransaction(ctx, []table.TableCommit{
		{Identifier: a.Identifier(), Updates: set("3")},
		{Identifier: b.Identifier(), Updates: set("3")},
	})
	require.ErrorIs(t, err, rest.ErrCommitStateUnknown)
	require.Equal(t, "3", prop("a"))
	require.Equal(t, "3", prop("b"))
	// A missing table fails the whole transaction with 404.
	err = cat.CommitTransaction(ctx, []table.TableCommit{
		{Identifier: a.Identifier(), Updates: set("4")},
		{Identifier: table.Identifier{"ns", "zz"}, Updates: set("4")},
	})
	require.ErrorIs(t, err, catalog.ErrNoSuchTable)
	require.Equal(t, "3", prop("a"))
}

func TestFaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, cat, _ := start(t, restcatalog.Config{})
	require.NoError(t, cat.CreateNamespace(ctx, table.Identifier{"ns"}, nil))
	tb, err := cat.CreateTable(ctx, table.Identifier{"ns", "t"}, schema())
	require.NoError(t, err)
	commit := func(v string) error {
		_, _, err := cat.CommitTable(ctx, tb.Identifier(), nil, []table.Update{table.NewSetPropertiesUpdate(iceberg.Properties{"v": v})})
		return err
	}
	prop := func() string {
		tb, err := cat.LoadTable(ctx, tb.Identifier())
		require.NoError(t, err)
		return tb.Properties()["v"]
	}
	for _, c := range []struct {
		f      restcatalog.Fault
		want   error
		landed bool
	}{
		{restcatalog.Fault{Status: http.StatusConflict}, table.ErrCommitFailed, false},
		{restcatalog.Fault{Status: http.StatusInternalServerError}, rest.ErrCommitStateUnknown, false},
		{restcatalog.Fault{Status: http.StatusGatewayTimeout}, rest.ErrCommitStateUnknown, false},
		{restcatalog.Fault{Status: http.StatusBadGateway, After: true}, rest.ErrCommitStateUnknown, true},
		{restcatalog.Fault{Status: http.StatusServiceUnavailable, After: true}, rest.ErrCommitStateUnknown, true},
		{restcatalog.Fault{Drop: true}, nil, false},
		{restcatalog.Fault{Drop: true, After: true}, nil, true},
	} {
		before := prop()
		c.f.Op, c.f.Table = restcatalog.OpCommitTable, "t"
		srv.Inject(c.f)
		v := before + "x"
		err := commit(v)
		require.Error(t, err, "%+v", c.f)
		if c.want != nil {
			require.ErrorIs(t, err, c.want, "%+v", c.f)
		}
		if c.landed {
			require.Equal(t, v, prop(), "%+v", c.f)
		} else {
			require.Equal(t, before, prop(), "%+v", c.f)
		}
	}
	require.NoError(t, commit("ok"), "faults fire once")
	// A fault on another table does not fire.
	srv.Inject(restcatalog.Fault{Op: restcatalog.OpCommitTable, Table: "other", Status: http.StatusConflict})
	require.NoError(t, commit("ok2"))
	srv.ClearFaults(restcatalog.OpCommitTable, "")
}

func TestAuth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := restcatalog.Config{Clients: map[string]string{"c1": "secret", "c2": "other"}, Tokens: []string{"static-tok"}}
	srv, cat, _ := start(t, cfg, rest.WithCredential("c1:secret"))
	require.NoError(t, cat.CreateNamespace(ctx, table.Identifier{"ns"}, nil))
	require.Positive(t, srv.Count(restcatalog.OpGetToken))

	// wrong secret: the token endpoint answers invalid_client
	_, err := rest.NewCatalog(ctx, "bad", srv.URL(), rest.WithCredential("c1:wrong"))
	require.ErrorIs(t, err, rest.ErrOAuthError)
	require.ErrorContains(t, err, "invalid_client")
	// no credentials at all, or an unknown static token: 401
	_, err = rest.NewCatalog(ctx, "none", srv.URL())
	require.ErrorIs(t, err, rest.ErrUnauthorized)
	_, err = rest.NewCatalog(ctx, "tok", srv.URL(), rest.WithOAuthToken("nope"))
	require.ErrorIs(t, err, rest.ErrUnauthorized)
	static, err := rest.NewCatalog(ctx, "tok", srv.URL(), rest.WithOAuthToken("static-tok"))
	require.NoError(t, err)
	defer static.Close()
	_, err = static.LoadNamespaceProperties(ctx, table.Identifier{"ns"})
	require.NoError(t, err)

	// a forbidden client: 403
	c2, err := rest.NewCatalog(ctx, "c2", srv.URL(), rest.WithCredential("c2:other"))
	require.NoError(t, err)
	defer c2.Close()
	srv.Forbid("c2")
	_, err = c2.LoadNamespaceProperties(ctx, table.Identifier{"ns"})
	require.ErrorIs(t, err, rest.ErrForbidden)
	_, err = cat.LoadNamespaceProperties(ctx, table.Identifier{"ns"})
	require.NoError(t, err)

	// revoked tokens: 401 on the next request
	srv.RevokeTokens()
	_, err = cat.LoadNamespaceProperties(ctx, table.Identifier{"ns"})
	require.ErrorIs(t, err, rest.ErrUnauthorized)
}

func TestConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	cfg := restcatalog.Config{
		Warehouse: "file://" + filepath.ToSlash(dir), WarehouseName: "main", Prefix: "wh-main",
		Defaults:  iceberg.Properties{"clients": "4"},
		Overrides: iceberg.Properties{"custom": "yes"},
	}
	srv := restcatalog.Start(t, cfg)
	_, err := rest.NewCatalog(ctx, "x", srv.URL(), rest.WithWarehouseLocation("other"))
	require.ErrorIs(t, err, rest.ErrRESTError, "unknown warehouse")
	cat, err := rest.NewCatalog(ctx, "x", srv.URL(), rest.WithWarehouseLocation("main"))
	require.NoError(t, err)
	defer cat.Close()
	// The prefix override routes every call under /v1/wh-main/.
	require.NoError(t, cat.CreateNamespace(ctx, table.Identifier{"ns"}, nil))
	rsp, err := http.Get(srv.URL() + "/v1/namespaces")
	require.NoError(t, err)
	rsp.Body.Close()
	require.Equal(t, http.StatusNotFound, rsp.StatusCode, "no route without the prefix")
	rsp, err = http.Get(srv.URL() + "/v1/wh-main/namespaces")
	require.NoError(t, err)
	rsp.Body.Close()
	require.Equal(t, http.StatusOK, rsp.StatusCode)
	tb, err := cat.CreateTable(ctx, table.Identifier{"ns", "t"}, schema())
	require.NoError(t, err)
	_, err = os.Stat(strings.TrimPrefix(tb.MetadataLocation(), "file://"))
	require.NoError(t, err)
}
