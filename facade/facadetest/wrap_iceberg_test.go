package facadetest_test

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/facadetest"
	"github.com/lakewrite/lakewrite/facade/internal/contract"
	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// warehouseFiles lists the files under the warehouse's data directories.
func warehouseFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.Contains(filepath.ToSlash(p), "/data/") {
			out = append(out, p)
		}
		return nil
	}))
	slices.Sort(out)
	return out
}

// realFacade opens a facade over a SQL catalog on a fresh local
// warehouse, closed when the test ends; it returns the warehouse too.
func realFacade(t *testing.T, cfg *facade.Config) (*facade.Facade, string) {
	t.Helper()
	wh := t.TempDir()
	cat, err := facade.OpenSQLCatalog(context.Background(), facade.CatalogConfig{DatabaseURL: pgtest.URL(t), Warehouse: wh})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cat.Close() })
	f, err := facade.New(cat, cfg)
	require.NoError(t, err)
	return f, wh
}

// One fault per point against iceberg-go on a local warehouse: a write
// stopped before its commit leaves the table and the data directory as they
// were; a write stopped after it is visible and found by its txn id.
func TestRealFacade(t *testing.T) {
	t.Parallel()
	cases := []struct {
		fault  facadetest.Fault
		landed bool
	}{
		{fault: facadetest.Fault{Point: facadetest.BeforeStage}},
		{fault: facadetest.Fault{Point: facadetest.MidStream, AfterRows: 1150}},
		{fault: facadetest.Fault{Point: facadetest.BeforeCommit}},
		{fault: facadetest.Fault{Point: facadetest.AfterCommit}, landed: true},
	}
	for _, c := range cases {
		t.Run(string(c.fault.Point), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			// Small files, so that a stream stopped in the middle has written
			// whole files already.
			f, wh := realFacade(t, &facade.Config{Allocator: mem, TargetFileSize: 1, RowGroupRows: 250})
			first := contract.Batches(mem, contract.Schema(), 0, 500, 100, 500)
			second := contract.Batches(mem, contract.Schema(), 500, 2000, 100, 2000)
			defer func() {
				for _, b := range append(first, second...) {
					b.Release()
				}
			}()
			tgt := target("orders")
			before, err := f.Write(ctx, tgt, facade.WriteRequest{Mode: facade.Replace, Schema: contract.Schema(), Rows: contract.Seq(first), TxnID: "txn-0"})
			require.NoError(t, err)
			files := warehouseFiles(t, wh)
			require.NotEmpty(t, files)

			fault := c.fault
			fault.Err, fault.Times = errBoom, 1
			lh := facadetest.Wrap(f, fault)
			_, werr := lh.Write(ctx, tgt, facade.WriteRequest{Mode: facade.Append, Schema: contract.Schema(), Rows: contract.Seq(second), TxnID: "txn-1"})
			require.ErrorIs(t, werr, errBoom)
			require.Equal(t, 1, facadetest.Hits(lh, c.fault.Point))
			tbl, err := f.LoadTable(ctx, "orders")
			require.NoError(t, err)
			found, ok, err := f.FindTxn(ctx, "orders", "txn-1")
			require.NoError(t, err)
			sum, err := f.Checksum(ctx, "orders", 0)
			require.NoError(t, err)
			if !c.landed {
				require.NotErrorIs(t, werr, facade.ErrCommitStateUnknown)
				require.False(t, ok)
				require.Equal(t, before.SnapshotID, tbl.CurrentSnapshot().SnapshotID, "table unchanged")
				require.Equal(t, before.Checksum, sum)
				require.Equal(t, files, warehouseFiles(t, wh), "no file left in data/")
				return
			}
			require.ErrorIs(t, werr, facade.ErrCommitStateUnknown, "the commit landed")
			_, err = lh.Write(ctx, tgt, facade.WriteRequest{Mode: facade.Append, Schema: contract.Schema(), Rows: contract.Seq(second), TxnID: "txn-1"})
			require.NoError(t, err, "the retried append replays the landed one")
			require.True(t, ok, "found by txn id")
			require.Equal(t, tbl.CurrentSnapshot().SnapshotID, found.SnapshotID)
			require.Equal(t, int64(2000), found.Rows)
			require.Equal(t, int64(2500), sum.Rows)
			require.WithinDuration(t, time.Now(), found.CommittedAt, time.Hour)
		})
	}
}

// BeforeAbort on the real facade: the staged files stay until an abort
// gets through.
func TestRealFacadeBeforeAbort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	f, wh := realFacade(t, &facade.Config{Allocator: mem})
	bs := contract.Batches(mem, contract.Schema(), 0, 300, 100, 300)
	defer func() {
		for _, b := range bs {
			b.Release()
		}
	}()
	lh := facadetest.Wrap(f, facadetest.Fault{Point: facadetest.BeforeAbort, Times: 1, Err: errBoom})
	st, err := lh.Stage(ctx, target("orders"), facade.WriteRequest{Mode: facade.Replace, Schema: contract.Schema(), Rows: contract.Seq(bs)})
	require.NoError(t, err)
	staged := warehouseFiles(t, wh)
	require.NotEmpty(t, staged)
	require.True(t, errors.Is(st.Abort(ctx), errBoom))
	require.Equal(t, staged, warehouseFiles(t, wh), "the failed abort left the files")
	require.NoError(t, st.Abort(ctx))
	require.Empty(t, warehouseFiles(t, wh))
}
