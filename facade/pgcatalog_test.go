package facade_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/internal/contract"
	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// pgCatalogEnv is a Postgres catalog and iceberg-go's SQL catalog on the
// same database and warehouse, each with a facade.
type pgCatalogEnv struct {
	pool   *pgxpool.Pool
	pg     catalog.Catalog
	sql    *facade.SQLCatalog
	viaPG  *facade.Facade
	viaSQL *facade.Facade
	mem    *memory.CheckedAllocator
}

// newPGCatalogEnv opens both catalogs on a fresh database; sqlFirst lets
// iceberg-go's SQL catalog create the catalog tables.
func newPGCatalogEnv(t *testing.T, sqlFirst bool) *pgCatalogEnv {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	wh := t.TempDir()
	openSQL := func() *facade.SQLCatalog {
		sqlcat, err := facade.OpenSQLCatalog(ctx, facade.CatalogConfig{DatabaseURL: pool.Config().ConnString(), Warehouse: wh})
		require.NoError(t, err)
		t.Cleanup(func() { sqlcat.Close() })
		return sqlcat
	}
	var sqlcat *facade.SQLCatalog
	if sqlFirst {
		sqlcat = openSQL()
	}
	pg, err := facade.NewPostgresCatalog(ctx, pool, facade.CatalogConfig{Warehouse: wh})
	require.NoError(t, err)
	if !sqlFirst {
		sqlcat = openSQL()
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	cfg := &facade.Config{Allocator: mem, RetryMinWait: time.Millisecond, RetryMaxWait: 20 * time.Millisecond}
	viaPG, err := facade.New(pg, cfg)
	require.NoError(t, err)
	viaSQL, err := facade.New(sqlcat, cfg)
	require.NoError(t, err)
	return &pgCatalogEnv{pool: pool, pg: pg, sql: sqlcat, viaPG: viaPG, viaSQL: viaSQL, mem: mem}
}

func (e *pgCatalogEnv) write(t *testing.T, f *facade.Facade, dataset string, mode facade.WriteMode, from, n int) facade.CommitResult {
	t.Helper()
	sc := contract.Schema()
	bs := contract.Batches(e.mem, sc, from, n, 100, n)
	defer func() {
		for _, b := range bs {
			b.Release()
		}
	}()
	res, err := f.Write(context.Background(), facade.Target{DatasetID: dataset, WriterID: "w"},
		facade.WriteRequest{Mode: mode, Schema: sc, Rows: contract.Seq(bs)})
	require.NoError(t, err)
	return res
}

// scanRows reads a table through iceberg-go directly (no facade) and
// returns its row count.
func scanRows(t *testing.T, cat catalog.Catalog, ident table.Identifier) int64 {
	t.Helper()
	tbl, err := cat.LoadTable(context.Background(), ident)
	require.NoError(t, err)
	at, err := tbl.Scan().ToArrowTable(context.Background())
	require.NoError(t, err)
	defer at.Release()
	return at.NumRows()
}

// A table created and written through the Postgres catalog is loaded,
// scanned and appended to through iceberg-go's SQL catalog on the same
// database, and the reverse; both see each other's commits and history.
func TestPostgresCatalogCompatibleWithSQLCatalog(t *testing.T) {
	t.Parallel()
	for _, sqlFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "tables_by_ours", true: "tables_by_sql_catalog"}[sqlFirst], func(t *testing.T) {
			t.Parallel()
			testCompatible(t, newPGCatalogEnv(t, sqlFirst))
		})
	}
}

func testCompatible(t *testing.T, e *pgCatalogEnv) {
	ctx := context.Background()
	defer e.mem.AssertSize(t, 0)

	// Ours first, then iceberg-go's SQL catalog.
	first := e.write(t, e.viaPG, "ours", facade.Replace, 0, 300)
	ident, err := e.viaPG.TableIdentifier("ours")
	require.NoError(t, err)
	require.EqualValues(t, 300, scanRows(t, e.sql, ident))
	second := e.write(t, e.viaSQL, "ours", facade.Append, 300, 200)
	require.EqualValues(t, 500, scanRows(t, e.pg, ident))
	third := e.write(t, e.viaPG, "ours", facade.Append, 500, 100)
	for _, cat := range []catalog.Catalog{e.pg, e.sql} {
		require.EqualValues(t, 600, scanRows(t, cat, ident))
		tbl, err := cat.LoadTable(ctx, ident)
		require.NoError(t, err)
		require.Equal(t, third.SnapshotID, tbl.CurrentSnapshot().SnapshotID)
		require.NotNil(t, tbl.SnapshotByID(first.SnapshotID))
		require.NotNil(t, tbl.SnapshotByID(second.SnapshotID))
	}
	for _, f := range []*facade.Facade{e.viaPG, e.viaSQL} {
		sum, err := f.Checksum(ctx, "ours", 0)
		require.NoError(t, err)
		require.EqualValues(t, 600, sum.Rows)
	}

	// iceberg-go's SQL catalog first, then ours.
	e.write(t, e.viaSQL, "theirs", facade.Replace, 0, 250)
	ident, err = e.viaSQL.TableIdentifier("theirs")
	require.NoError(t, err)
	require.EqualValues(t, 250, scanRows(t, e.pg, ident))
	e.write(t, e.viaPG, "theirs", facade.Append, 250, 50)
	e.write(t, e.viaPG, "theirs", facade.Replace, 0, 40)
	require.EqualValues(t, 40, scanRows(t, e.sql, ident))
	e.write(t, e.viaSQL, "theirs", facade.Append, 40, 10)
	require.EqualValues(t, 50, scanRows(t, e.pg, ident))

	// The catalogs list the same namespaces and tables.
	nsPG, err := e.pg.ListNamespaces(ctx, nil)
	require.NoError(t, err)
	nsSQL, err := e.sql.ListNamespaces(ctx, nil)
	require.NoError(t, err)
	require.ElementsMatch(t, nsSQL, nsPG)
	ns := catalog.NamespaceFromIdent(ident)
	var tPG, tSQL []string
	for id, err := range e.pg.ListTables(ctx, ns) {
		require.NoError(t, err)
		tPG = append(tPG, catalog.TableNameFromIdent(id))
	}
	for id, err := range e.sql.ListTables(ctx, ns) {
		require.NoError(t, err)
		tSQL = append(tSQL, catalog.TableNameFromIdent(id))
	}
	slices.Sort(tSQL)
	require.Equal(t, tSQL, tPG)
	require.Len(t, tPG, 2)
}

// Namespaces and their properties, dotted namespace names, rename and drop
// agree between the two catalogs.
func TestPostgresCatalogNamespaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPGCatalogEnv(t, false)
	require.NoError(t, e.pg.CreateNamespace(ctx, table.Identifier{"a"}, iceberg.Properties{"owner": "me"}))
	require.NoError(t, e.pg.CreateNamespace(ctx, table.Identifier{"a", "b.c"}, nil))
	require.ErrorIs(t, e.pg.CreateNamespace(ctx, table.Identifier{"a"}, nil), catalog.ErrNamespaceAlreadyExists)
	require.ErrorIs(t, e.sql.CreateNamespace(ctx, table.Identifier{"a", "b.c"}, nil), catalog.ErrNamespaceAlreadyExists)
	require.NoError(t, e.sql.CreateNamespace(ctx, table.Identifier{"x"}, nil))
	for _, cat := range []catalog.Catalog{e.pg, e.sql} {
		ok, err := cat.CheckNamespaceExists(ctx, table.Identifier{"x"})
		require.NoError(t, err)
		require.True(t, ok)
		props, err := cat.LoadNamespaceProperties(ctx, table.Identifier{"a"})
		require.NoError(t, err)
		require.Equal(t, iceberg.Properties{"owner": "me"}, props)
		under, err := cat.ListNamespaces(ctx, table.Identifier{"a"})
		require.NoError(t, err)
		require.ElementsMatch(t, []table.Identifier{{"a"}, {"a", "b.c"}}, under)
	}
	sum, err := e.pg.UpdateNamespaceProperties(ctx, table.Identifier{"a"}, []string{"owner", "nope"}, iceberg.Properties{"k": "v"})
	require.NoError(t, err)
	require.Equal(t, []string{"owner"}, sum.Removed)
	require.Equal(t, []string{"k"}, sum.Updated)
	require.Equal(t, []string{"nope"}, sum.Missing)
	props, err := e.sql.LoadNamespaceProperties(ctx, table.Identifier{"a"})
	require.NoError(t, err)
	require.Equal(t, iceberg.Properties{"k": "v"}, props)

	// A table in the dotted namespace, created by ours, renamed by theirs.
	sc := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64})
	_, err = e.pg.CreateTable(ctx, table.Identifier{"a", "b.c", "t"}, sc)
	require.NoError(t, err)
	_, err = e.pg.CreateTable(ctx, table.Identifier{"a", "b.c", "t"}, sc)
	require.ErrorIs(t, err, catalog.ErrTableAlreadyExists)
	_, err = e.sql.LoadTable(ctx, table.Identifier{"a", "b.c", "t"})
	require.NoError(t, err)
	_, err = e.sql.RenameTable(ctx, table.Identifier{"a", "b.c", "t"}, table.Identifier{"x", "u"})
	require.NoError(t, err)
	ok, err := e.pg.CheckTableExists(ctx, table.Identifier{"x", "u"})
	require.NoError(t, err)
	require.True(t, ok)
	_, err = e.pg.RenameTable(ctx, table.Identifier{"x", "u"}, table.Identifier{"a", "v"})
	require.NoError(t, err)
	_, err = e.sql.LoadTable(ctx, table.Identifier{"a", "v"})
	require.NoError(t, err)
	require.ErrorIs(t, e.pg.DropNamespace(ctx, table.Identifier{"a"}), catalog.ErrNamespaceNotEmpty)
	require.NoError(t, e.pg.DropTable(ctx, table.Identifier{"a", "v"}))
	require.ErrorIs(t, e.pg.DropTable(ctx, table.Identifier{"a", "v"}), catalog.ErrNoSuchTable)
	_, err = e.sql.LoadTable(ctx, table.Identifier{"a", "v"})
	require.ErrorIs(t, err, catalog.ErrNoSuchTable)
	require.NoError(t, e.pg.DropNamespace(ctx, table.Identifier{"x"}))
	ok, err = e.sql.CheckNamespaceExists(ctx, table.Identifier{"x"})
	require.NoError(t, err)
	require.False(t, ok)
}

// A commit whose base moved is a clean conflict (table.ErrCommitFailed or
// a failed requirement), as with iceberg-go's SQL catalog.
func TestPostgresCatalogConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPGCatalogEnv(t, false)
	defer e.mem.AssertSize(t, 0)
	e.write(t, e.viaPG, "c", facade.Replace, 0, 10)
	ident, err := e.viaPG.TableIdentifier("c")
	require.NoError(t, err)
	stale, err := e.pg.LoadTable(ctx, ident)
	require.NoError(t, err)
	e.write(t, e.viaSQL, "c", facade.Append, 10, 10)
	txn := stale.NewTransaction()
	require.NoError(t, txn.SetProperties(iceberg.Properties{"k": "v"}))
	_, err = txn.Commit(ctx)
	require.Error(t, err)
	require.Contains(t, err.Error(), "requirement failed")
}

// The facade contract, on the Postgres catalog.
func TestContractPostgresCatalog(t *testing.T) {
	contract.Run(t, func(t *testing.T) *contract.Env {
		pool := pgtest.Pool(t)
		pg, err := facade.NewPostgresCatalog(context.Background(), pool, facade.CatalogConfig{Warehouse: t.TempDir()})
		require.NoError(t, err)
		fc := &faultCatalog{Catalog: pg, kind: map[string]error{}, n: map[string]int{}, land: map[string]bool{}}
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		pols := &contract.Policies{}
		f, err := facade.New(fc, &facade.Config{Allocator: mem, RetryMinWait: time.Millisecond, RetryMaxWait: 20 * time.Millisecond, CommitRetries: 6,
			SchemaPolicyFor: pols.For})
		require.NoError(t, err)
		return &contract.Env{LH: f, Mem: mem, Policies: pols, FailCommits: func(id string, kind error, n int) { fc.fail(id, kind, n, false) }}
	})
}

// Multi-table transactions: both tables' changes land in one Postgres
// transaction, or, when one table's requirements fail, neither does; a
// facade on the catalog then commits staged writes of several datasets
// together (CommitAll).
func TestPostgresCatalogCommitTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPGCatalogEnv(t, false)
	defer e.mem.AssertSize(t, 0)
	require.True(t, e.viaPG.SupportsAtomicCommit())
	e.write(t, e.viaPG, "a", facade.Replace, 0, 10)
	e.write(t, e.viaPG, "b", facade.Replace, 0, 10)
	load := func(id string) *table.Table {
		ident, err := e.viaPG.TableIdentifier(id)
		require.NoError(t, err)
		tbl, err := e.pg.LoadTable(ctx, ident)
		require.NoError(t, err)
		return tbl
	}
	commit := func(tbl *table.Table, k string) table.TableCommit {
		txn := tbl.NewTransaction()
		require.NoError(t, txn.SetProperties(iceberg.Properties{k: "v"}))
		tc, err := txn.TableCommit()
		require.NoError(t, err)
		return tc
	}

	a, b := load("a"), load("b")
	require.NoError(t, e.pg.(catalog.TransactionalCatalog).CommitTransaction(ctx, []table.TableCommit{commit(a, "k1"), commit(b, "k1")}))
	a2, b2 := load("a"), load("b")
	require.Equal(t, "v", a2.Properties()["k1"])
	require.Equal(t, "v", b2.Properties()["k1"])

	// b moves under a stale commit: the transaction fails and a stays.
	e.write(t, e.viaPG, "b", facade.Append, 10, 5)
	err := e.pg.(catalog.TransactionalCatalog).CommitTransaction(ctx, []table.TableCommit{commit(a2, "k2"), commit(b2, "k2")})
	require.Error(t, err)
	require.Equal(t, a2.MetadataLocation(), load("a").MetadataLocation())
	require.NotContains(t, load("a").Properties(), "k2")

	// CommitAll: staged writes of two datasets land together.
	sc := contract.Schema()
	var staged []facade.Staged
	for _, id := range []string{"a", "b"} {
		bs := contract.Batches(e.mem, sc, 100, 7, 100, 7)
		st, err := e.viaPG.Stage(ctx, facade.Target{DatasetID: id, WriterID: "w"},
			facade.WriteRequest{Mode: facade.Append, Schema: sc, Rows: contract.Seq(bs)})
		for _, x := range bs {
			x.Release()
		}
		require.NoError(t, err)
		staged = append(staged, st)
	}
	res, err := e.viaPG.CommitAll(ctx, staged...)
	require.NoError(t, err)
	require.Len(t, res, 2)
	require.Equal(t, res[0].SnapshotID, load("a").CurrentSnapshot().SnapshotID)
	require.Equal(t, res[1].SnapshotID, load("b").CurrentSnapshot().SnapshotID)
	ident, err := e.viaPG.TableIdentifier("a")
	require.NoError(t, err)
	require.EqualValues(t, 17, scanRows(t, e.pg, ident))
}
