package writestrategy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/apache/iceberg-go/catalog"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
)

// OpenConfig configures Open. Only Warehouse is required; every nil or zero
// field means the defaults of the piece it configures.
type OpenConfig struct {
	// Warehouse is the root of the table data: a local directory or an
	// object-store URL such as s3://bucket/path (then pass
	// facade.S3Properties in Catalog.Props). Required.
	Warehouse string
	// Migrate applies the control-plane migrations (ledger.Migrate, in the
	// schema of Ledger.Schema) before anything else. Leave it false when
	// migrations run at deploy time.
	Migrate bool
	// Logger is given to the ledger, the resolver, the facade and the
	// dispatcher, except where their own config below sets one. Default
	// discard.
	Logger *slog.Logger

	// Ledger configures the ledger (schema, timeouts, expectations). The
	// writer flags live in the same schema.
	Ledger *ledger.Config
	// Resolver configures the flag resolution (cache TTL and size).
	Resolver *sink.ResolverConfig
	// Catalog configures the Iceberg catalog (its name, properties such as
	// facade.S3Properties). Its Warehouse must be empty or equal Warehouse,
	// its DatabaseURL empty (the catalog is on the pool).
	Catalog *facade.CatalogConfig
	// Facade configures the Iceberg writes (lifecycle, partitioning,
	// naming, workers).
	Facade *facade.Config
	// Dispatch configures the dispatcher (workspace, cursor, observer,
	// recovery). Open sets its Ledger, Resolver and Lakehouse, which must
	// be nil.
	Dispatch *DispatchConfig
}

// Stack is lakewrite wired on one pool by Open: each piece is reachable,
// for the calls that are not Dispatcher's (flags for an operator, the
// ledger for a loader of your own, the facade for a read-back). It holds
// nothing to close: the pool stays the caller's.
type Stack struct {
	Ledger     *ledger.Ledger
	Flags      *sink.Flags
	Resolver   *sink.Resolver
	Catalog    catalog.Catalog // facade.NewPostgresCatalog's
	Facade     *facade.Facade
	Dispatcher *Dispatcher
}

// Open wires lakewrite for the common case, everything on one pool: the
// ledger and the writer flags in the control-plane schema, a resolver over
// the flags, an Iceberg catalog in the same database on the same pool
// (facade.NewPostgresCatalog, so a write's snapshots and its ledger commit
// land in one transaction) with its data under cfg.Warehouse, a facade on
// that catalog, and a Dispatcher composing them. It is the six
// constructors ledger.New, sink.NewFlags, sink.NewResolver,
// facade.NewPostgresCatalog, facade.New and NewDispatcher, in that order;
// a service that brings its own catalog (REST, iceberg-go's SQL catalog)
// calls them itself. Open does not change the configs it is given.
func Open(ctx context.Context, pool *pgxpool.Pool, cfg *OpenConfig) (*Stack, error) {
	if pool == nil {
		return nil, errors.New("writestrategy: Open: nil pool")
	}
	if cfg == nil || cfg.Warehouse == "" {
		return nil, errors.New("writestrategy: Open: OpenConfig.Warehouse is required")
	}
	var lc ledger.Config
	if cfg.Ledger != nil {
		lc = *cfg.Ledger
	}
	if lc.Logger == nil {
		lc.Logger = cfg.Logger
	}
	var rc sink.ResolverConfig
	if cfg.Resolver != nil {
		rc = *cfg.Resolver
	}
	if rc.Logger == nil {
		rc.Logger = cfg.Logger
	}
	cc := facade.CatalogConfig{Warehouse: cfg.Warehouse}
	if cfg.Catalog != nil {
		if cfg.Catalog.Warehouse != "" && cfg.Catalog.Warehouse != cfg.Warehouse {
			return nil, fmt.Errorf("writestrategy: Open: Catalog.Warehouse %q differs from Warehouse %q", cfg.Catalog.Warehouse, cfg.Warehouse)
		}
		cc = *cfg.Catalog
		cc.Warehouse = cfg.Warehouse
	}
	var fc facade.Config
	if cfg.Facade != nil {
		fc = *cfg.Facade
	}
	if fc.Logger == nil {
		fc.Logger = cfg.Logger
	}
	var dc DispatchConfig
	if cfg.Dispatch != nil {
		dc = *cfg.Dispatch
		if dc.Ledger != nil || dc.Resolver != nil || dc.Lakehouse != nil {
			return nil, errors.New("writestrategy: Open: Dispatch.Ledger, Resolver and Lakehouse are set by Open")
		}
	}
	if dc.Logger == nil {
		dc.Logger = cfg.Logger
	}

	if cfg.Migrate {
		if _, err := ledger.Migrate(ctx, pool, lc.Schema); err != nil {
			return nil, err
		}
	}
	s := &Stack{}
	var err error
	if s.Ledger, err = ledger.New(pool, &lc); err != nil {
		return nil, err
	}
	if s.Flags, err = sink.NewFlags(pool, &sink.FlagsConfig{Schema: lc.Schema}); err != nil {
		return nil, err
	}
	if s.Resolver, err = sink.NewResolver(s.Flags, &rc); err != nil {
		return nil, err
	}
	if s.Catalog, err = facade.NewPostgresCatalog(ctx, pool, cc); err != nil {
		return nil, err
	}
	if s.Facade, err = facade.New(s.Catalog, &fc); err != nil {
		return nil, err
	}
	dc.Ledger, dc.Resolver, dc.Lakehouse = s.Ledger, s.Resolver, s.Facade
	if s.Dispatcher, err = NewDispatcher(pool, &dc); err != nil {
		return nil, err
	}
	return s, nil
}
