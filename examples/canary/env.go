package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// ErrNotMigrated: the database has no (or an outdated) lakewrite schema.
var ErrNotMigrated = errors.New("lakewrite schema not migrated: run `canary init` first")

// env is lakewrite wired on the operator's database and warehouse for one
// command. Unlike internal/embedded it never starts a throwaway cluster (a
// runbook needs state that outlives the process) and only init migrates:
// check, set, deploy, verify and revert do not change the schema.
type env struct {
	pool       *pgxpool.Pool
	ledger     *ledger.Ledger
	flags      *sink.Flags
	catalog    *facade.SQLCatalog
	lake       *facade.Facade
	dispatcher *writestrategy.Dispatcher
}

type envOptions struct {
	databaseURL string
	warehouse   string
	logger      *slog.Logger
	migrate     bool
}

func openEnv(ctx context.Context, o envOptions) (_ *env, err error) {
	if o.databaseURL == "" {
		return nil, &usageError{msg: "no database: pass -database-url or set DATABASE_URL"}
	}
	e := &env{}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	cfg, err := pgxpool.ParseConfig(o.databaseURL)
	if err != nil {
		return nil, &usageError{msg: fmt.Sprintf("-database-url: %v", err)}
	}
	cfg.MaxConns = 4
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// An unreachable server fails the command instead of hanging
		// (connect_timeout in the URL overrides it).
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	if e.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, err
	}
	if err := e.pool.Ping(ctx); err != nil {
		return nil, fmt.Errorf("connect to Postgres: %w", err)
	}
	if o.migrate {
		if _, err := ledger.Migrate(ctx, e.pool, ""); err != nil {
			return nil, err
		}
	} else if err := checkMigrated(ctx, e.pool); err != nil {
		return nil, err
	}
	if e.ledger, err = ledger.New(e.pool, &ledger.Config{Logger: o.logger}); err != nil {
		return nil, err
	}
	if e.flags, err = sink.NewFlags(e.pool, nil); err != nil {
		return nil, err
	}
	// A fresh resolver per process: this CLI sees a flag change at once. Long
	// running writers cache resolutions for their TTL (at most sink.MaxTTL).
	resolver, err := sink.NewResolver(e.flags, &sink.ResolverConfig{Logger: o.logger})
	if err != nil {
		return nil, err
	}
	wh, err := filepath.Abs(o.warehouse)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(wh, 0o755); err != nil {
		return nil, fmt.Errorf("warehouse: %w", err)
	}
	if e.catalog, err = facade.OpenSQLCatalog(ctx, facade.CatalogConfig{DatabaseURL: o.databaseURL, Warehouse: wh}); err != nil {
		return nil, err
	}
	if e.lake, err = facade.New(e.catalog, &facade.Config{Logger: o.logger}); err != nil {
		return nil, err
	}
	e.dispatcher, err = writestrategy.NewDispatcher(e.pool, &writestrategy.DispatchConfig{
		Ledger: e.ledger, Resolver: resolver, Lakehouse: e.lake, Workspace: "canary", Logger: o.logger})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// checkMigrated fails with ErrNotMigrated unless every embedded migration is
// applied to the default schema.
func checkMigrated(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := ledger.Migrations()
	if err != nil {
		return err
	}
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, ledger.DefaultSchema+".lakewrite_migrations").Scan(&exists); err != nil {
		return err
	}
	if !exists {
		return ErrNotMigrated
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+ledger.DefaultSchema+`.lakewrite_migrations`).Scan(&n); err != nil {
		return err
	}
	if n < len(ms) {
		return fmt.Errorf("%w (%d of %d migrations applied)", ErrNotMigrated, n, len(ms))
	}
	return nil
}

func (e *env) close() {
	if e.catalog != nil {
		_ = e.catalog.Close()
	}
	if e.pool != nil {
		e.pool.Close()
	}
}
