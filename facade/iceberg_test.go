package facade_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/internal/contract"
	"github.com/lakewrite/lakewrite/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// faultCatalog wraps a real catalog and fails CommitTable on demand.
type faultCatalog struct {
	catalog.Catalog
	mu    sync.Mutex
	kind  map[string]error
	n     map[string]int
	land  map[string]bool // commit for real, then report unknown
	calls int
}

func (c *faultCatalog) fail(table string, kind error, n int, land bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kind[table], c.n[table], c.land[table] = kind, n, land
}

func (c *faultCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	name := ident[len(ident)-1]
	c.mu.Lock()
	c.calls++
	kind, n, land := c.kind[name], c.n[name], c.land[name]
	if n > 0 {
		c.n[name] = n - 1
	}
	c.mu.Unlock()
	if n <= 0 {
		return c.Catalog.CommitTable(ctx, ident, reqs, updates)
	}
	if errors.Is(kind, facade.ErrCommitConflict) {
		return nil, "", fmt.Errorf("%w: injected conflict", table.ErrCommitFailed)
	}
	if land {
		if _, _, err := c.Catalog.CommitTable(ctx, ident, reqs, updates); err != nil {
			return nil, "", err
		}
	}
	return nil, "", errors.New("injected: connection reset by peer")
}

type icebergEnv struct {
	f         *facade.Facade
	cat       *faultCatalog
	warehouse string
	mem       *memory.CheckedAllocator
}

func newIcebergEnv(t *testing.T) *icebergEnv {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	wh := t.TempDir()
	sqlcat, err := facade.OpenSQLCatalog(context.Background(), facade.SQLCatalogConfig{DatabaseURL: pgtest.URL(t), Warehouse: wh})
	require.NoError(t, err)
	t.Cleanup(func() { sqlcat.Close() })
	fc := &faultCatalog{Catalog: sqlcat, kind: map[string]error{}, n: map[string]int{}, land: map[string]bool{}}
	f, err := facade.New(fc, &facade.Config{Allocator: mem, RetryMinWait: time.Millisecond, RetryMaxWait: 20 * time.Millisecond, CommitRetries: 6})
	require.NoError(t, err)
	return &icebergEnv{f: f, cat: fc, warehouse: wh, mem: mem}
}

func TestContract(t *testing.T) {
	contract.Run(t, func(t *testing.T) *contract.Env {
		e := newIcebergEnv(t)
		return &contract.Env{
			LH:  e.f,
			Mem: e.mem,
			FailCommits: func(id string, kind error, n int) {
				e.cat.fail(id, kind, n, false)
			},
		}
	})
}

// dataFiles lists the parquet files under the warehouse.
func dataFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".parquet") {
			out = append(out, p)
		}
		return nil
	}))
	return out
}

func referenced(t *testing.T, f *facade.Facade, dataset string) map[string]bool {
	t.Helper()
	tbl, err := f.LoadTable(context.Background(), dataset)
	require.NoError(t, err)
	out := map[string]bool{}
	if tbl.CurrentSnapshot() == nil {
		return out
	}
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	require.NoError(t, err)
	for _, task := range tasks {
		out[strings.TrimPrefix(task.File.FilePath(), "file://")] = true
	}
	return out
}

var _ = os.Remove
