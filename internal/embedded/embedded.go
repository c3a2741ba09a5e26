// Package embedded wires lakewrite on its embedded default for the example
// programs: Postgres from DATABASE_URL or a throwaway local cluster, the
// control-plane schema migrated, the Iceberg catalog in the same database
// on the same pool (facade.NewPostgresCatalog, so a write's snapshots and its
// ledger commit land in one transaction) with a local warehouse directory,
// and a write dispatcher: writestrategy.Open on a pool of its own.
package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/apache/iceberg-go/catalog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/pgcluster"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// Options configure Start.
type Options struct {
	// DatabaseURL of an existing Postgres; empty starts a throwaway cluster
	// from the system binaries, removed by Close (or by its supervisor if
	// the process dies).
	DatabaseURL string
	// Warehouse directory for the Iceberg tables. Empty: a new directory
	// under the OS temp dir, removed by Close.
	Warehouse string
	// Logger for the library's records. Default discard.
	Logger *slog.Logger
	// MaxConns of the pool, shared by the ledger, the row store and the
	// Iceberg catalog. Default 8.
	MaxConns int32
	// Facade configures the Iceberg facade (nil: defaults).
	Facade *facade.Config
	// Tracer, when set, traces the pool's queries (e.g. to count the
	// statements of a write).
	Tracer pgx.QueryTracer
	// TCP connects to the throwaway cluster over TCP loopback instead of
	// its unix socket (ignored with DatabaseURL).
	TCP bool
	// Settings are extra server settings of the throwaway cluster (name ->
	// value, e.g. shared_buffers; ignored with DatabaseURL).
	Settings map[string]string
}

// Env is a running embedded default. Close releases everything.
type Env struct {
	URL        string
	Pool       *pgxpool.Pool
	Ledger     *ledger.Ledger
	Flags      *sink.Flags
	Resolver   *sink.Resolver
	Catalog    catalog.Catalog
	Facade     *facade.Facade
	Dispatcher *writestrategy.Dispatcher
	Warehouse  string
	// Started is true when Start launched its own Postgres cluster.
	Started bool

	cluster       *pgcluster.Cluster
	removeWarehse bool
}

// Start brings the embedded default up.
func Start(ctx context.Context, o Options) (_ *Env, err error) {
	e := &Env{URL: o.DatabaseURL, Warehouse: o.Warehouse}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	if e.URL == "" {
		c, err := pgcluster.Start(ctx, pgcluster.Options{TCP: o.TCP, Settings: o.Settings})
		if err != nil {
			return nil, fmt.Errorf("start a local Postgres (set DATABASE_URL to use your own): %w", err)
		}
		e.cluster, e.Started, e.URL = c, true, c.URL("postgres")
	}
	if e.Warehouse == "" {
		dir, err := os.MkdirTemp("", "lakewrite-warehouse-")
		if err != nil {
			return nil, err
		}
		e.Warehouse, e.removeWarehse = dir, true
	}
	if e.Warehouse, err = filepath.Abs(e.Warehouse); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(e.Warehouse, 0o755); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(e.URL)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	cfg.MaxConns = o.MaxConns
	if o.Tracer != nil {
		cfg.ConnConfig.Tracer = o.Tracer
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 8
	}
	if e.Pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, err
	}
	if err := e.Pool.Ping(ctx); err != nil {
		return nil, fmt.Errorf("connect to Postgres: %w", err)
	}
	st, err := writestrategy.Open(ctx, e.Pool, &writestrategy.OpenConfig{
		Warehouse: e.Warehouse,
		Migrate:   true,
		Logger:    o.Logger,
		Facade:    o.Facade,
		Dispatch:  &writestrategy.DispatchConfig{Workspace: "embedded"},
	})
	if err != nil {
		return nil, err
	}
	e.Ledger, e.Flags, e.Resolver = st.Ledger, st.Flags, st.Resolver
	e.Catalog, e.Facade, e.Dispatcher = st.Catalog, st.Facade, st.Dispatcher
	return e, nil
}

// Close closes the pool (which the catalog uses), stops the cluster Start launched
// and removes the warehouse Start created.
func (e *Env) Close() {
	if e == nil {
		return
	}
	if e.Pool != nil {
		e.Pool.Close()
	}
	e.cluster.Stop()
	if e.removeWarehse {
		_ = os.RemoveAll(e.Warehouse)
	}
}
