package facade_test

import (
	"context"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/internal/contract"
	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// stmtLog records the SQL statements run through a pool.
type stmtLog struct {
	mu    sync.Mutex
	stmts []string
}

func (l *stmtLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stmts = append(l.stmts, strings.Join(strings.Fields(d.SQL), " "))
	return ctx
}

func (l *stmtLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *stmtLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.stmts
	l.stmts = nil
	return out
}

// catalogStatements keeps the statements on the catalog's tables.
func catalogStatements(stmts []string) []string {
	var out []string
	for _, s := range stmts {
		if strings.Contains(s, "iceberg_tables") || strings.Contains(s, "iceberg_namespace_properties") {
			out = append(out, s)
		}
	}
	return out
}

// TestPostgresCatalogSmallWriteStatements pins the catalog statements of
// a write as the Dispatcher runs it (WriteOrder, Stage, CommitTx in the
// caller's transaction): to a new table in an existing namespace, and an
// append with a txn id to that table (its replay check reads the table
// Stage loads). A write must not creep back to looking the table
// or its namespace up several times.
func TestPostgresCatalogSmallWriteStatements(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	require.NoError(t, err)
	log := &stmtLog{}
	cfg.ConnConfig.Tracer = log
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	pc, err := facade.NewPostgresCatalog(ctx, pool, facade.CatalogConfig{Warehouse: t.TempDir()})
	require.NoError(t, err)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	f, err := facade.New(pc, &facade.Config{Allocator: mem})
	require.NoError(t, err)

	write := func(dataset string, mode facade.WriteMode, txnID string) []string {
		t.Helper()
		sc := contract.Schema()
		bs := contract.Batches(mem, sc, 0, 1, 1, 1)
		defer func() {
			for _, b := range bs {
				b.Release()
			}
		}()
		log.take()
		_, err := f.WriteOrder(ctx, dataset)
		require.NoError(t, err)
		st, err := f.Stage(ctx, facade.Target{DatasetID: dataset, WriterID: "w"},
			facade.WriteRequest{Mode: mode, Schema: sc, Rows: contract.Seq(bs), TxnID: txnID})
		require.NoError(t, err)
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }() // a no-op after Commit
		res, err := st.(facade.TxStaged).CommitTx(ctx, tx)
		require.NoError(t, err)
		require.EqualValues(t, 1, res.Rows)
		require.NoError(t, tx.Commit(ctx))
		return catalogStatements(log.take())
	}
	// The first write creates the namespace; the next ones find it.
	write("warmup", facade.Replace, "")

	stmts := write("fresh", facade.Replace, "")
	t.Logf("new table:\n%s", strings.Join(stmts, "\n"))
	require.Len(t, stmts, 3, "catalog statements of a write creating its table:\n%s", strings.Join(stmts, "\n"))

	stmts = write("fresh", facade.Append, "txn-1")
	t.Logf("existing table:\n%s", strings.Join(stmts, "\n"))
	require.Len(t, stmts, 3, "catalog statements of a write to an existing table:\n%s", strings.Join(stmts, "\n"))
}

// TestPostgresCatalogFirstCommitIntoDroppedNamespace: the namespace of a
// pending table is dropped between Stage and the commit that creates the
// table. The one statement inserting the table's row sees it gone: the
// commit fails, no table exists, and the staged data files and the
// metadata file written for the commit are deleted.
func TestPostgresCatalogFirstCommitIntoDroppedNamespace(t *testing.T) {
	e := newPGCatalogEnv(t, false)
	ctx := context.Background()
	cfg := &facade.Config{Allocator: e.mem}
	facade.SetNamespace(cfg, []string{"gone"})
	f, err := facade.New(e.pg, cfg)
	require.NoError(t, err)
	sc := contract.Schema()
	bs := contract.Batches(e.mem, sc, 0, 10, 10, 10)
	st, err := f.Stage(ctx, facade.Target{DatasetID: "orphan", WriterID: "w"},
		facade.WriteRequest{Mode: facade.Replace, Schema: sc, Rows: contract.Seq(bs)})
	for _, b := range bs {
		b.Release()
	}
	require.NoError(t, err)
	require.NotEmpty(t, st.Info().DataFiles)
	tableDir := filepath.Dir(filepath.Dir(localPath(st.Info().DataFiles[0].Path)))
	require.NoError(t, e.pg.DropNamespace(ctx, table.Identifier{"gone"}))

	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = st.(facade.TxStaged).CommitTx(ctx, tx)
	require.ErrorIs(t, err, catalog.ErrNoSuchNamespace)
	require.NoError(t, tx.Rollback(ctx))
	_, err = e.pg.LoadTable(ctx, table.Identifier{"gone", "orphan"})
	require.ErrorIs(t, err, catalog.ErrNoSuchTable)
	var left []string
	require.NoError(t, filepath.WalkDir(tableDir, func(p string, d fs.DirEntry, err error) error {
		// The manifests iceberg-go wrote for the snapshot stay, unreferenced,
		// for the lifecycle's orphan pass.
		if err == nil && (strings.HasSuffix(p, ".parquet") || strings.HasSuffix(p, ".metadata.json")) {
			left = append(left, p)
		}
		return err
	}))
	require.Empty(t, left, "no data file or table metadata file is left behind")
}

// BenchmarkPostgresCatalogSmallWrite: a 1-row write creating its table on
// the catalog of NewPostgresCatalog, as the Dispatcher runs it (WriteOrder, Stage,
// CommitTx in a transaction).
func BenchmarkPostgresCatalogSmallWrite(b *testing.B) {
	ctx := context.Background()
	pool := pgtest.Pool(b)
	pc, err := facade.NewPostgresCatalog(ctx, pool, facade.CatalogConfig{Warehouse: b.TempDir()})
	require.NoError(b, err)
	mem := memory.NewGoAllocator()
	f, err := facade.New(pc, &facade.Config{Allocator: mem})
	require.NoError(b, err)
	sc := contract.Schema()
	bs := contract.Batches(mem, sc, 0, 1, 1, 1)
	defer bs[0].Release()
	write := func(dataset string) {
		_, err := f.WriteOrder(ctx, dataset)
		require.NoError(b, err)
		st, err := f.Stage(ctx, facade.Target{DatasetID: dataset, WriterID: "w"},
			facade.WriteRequest{Mode: facade.Replace, Schema: sc, Rows: contract.Seq(bs)})
		require.NoError(b, err)
		require.NoError(b, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := st.(facade.TxStaged).CommitTx(ctx, tx)
			return err
		}))
	}
	write("warmup")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		write("small_" + strconv.Itoa(i))
	}
}

// TestPostgresCatalogSwapConflictRetries: two replaces of an existing
// table are staged from the same snapshot; the second's pointer swap finds
// the pointer moved (a clean conflict), retries on the refreshed table and
// lands, through Commit and through CommitTx. The metadata file written
// for the refused swap is removed.
func TestPostgresCatalogSwapConflictRetries(t *testing.T) {
	e := newPGCatalogEnv(t, false)
	ctx := context.Background()
	e.write(t, e.viaPG, "cas", facade.Replace, 0, 10)
	metadataFiles := func() int {
		tbl, err := e.viaPG.LoadTable(ctx, "cas")
		require.NoError(t, err)
		ms, err := filepath.Glob(filepath.Join(filepath.Dir(localPath(tbl.MetadataLocation())), "*.metadata.json"))
		require.NoError(t, err)
		return len(ms)
	}
	for _, inTx := range []bool{false, true} {
		before := metadataFiles()
		a := e.stage(t, "cas", facade.Replace, 20)
		b := e.stage(t, "cas", facade.Replace, 30)
		_, err := a.Commit(ctx)
		require.NoError(t, err)
		var rb facade.CommitResult
		if inTx {
			tx, err := e.pool.Begin(ctx)
			require.NoError(t, err)
			rb, err = b.(facade.TxStaged).CommitTx(ctx, tx)
			require.NoError(t, err)
			require.NoError(t, tx.Commit(ctx))
		} else {
			rb, err = b.Commit(ctx)
			require.NoError(t, err)
		}
		tbl, err := e.viaPG.LoadTable(ctx, "cas")
		require.NoError(t, err)
		require.Equal(t, rb.SnapshotID, tbl.CurrentSnapshot().SnapshotID)
		require.EqualValues(t, 30, scanRows(t, e.pg, tbl.Identifier()))
		require.Equal(t, before+2, metadataFiles(), "one metadata file per landed commit")
	}
}
