package ledger

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migration is one numbered step of the control-plane schema.
type Migration struct {
	Version int    // 1, 2, 3, ... without gaps
	Name    string // file name, e.g. "001_control_plane.sql"
	// SQL uses unqualified names; it is meant to run with search_path set to
	// the target schema.
	SQL string
}

var migrationName = regexp.MustCompile(`^(\d{3})_[a-z0-9_]+\.sql$`)

// Migrations returns the embedded control-plane migrations in order. It is
// the raw SQL for teams that run their own migration tool: create the schema,
// set search_path to it, and run each file once in order.
func Migrations() ([]Migration, error) {
	return loadMigrations(migrationFS, "migrations")
}

func loadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("ledger: read migrations: %w", err)
	}
	var ms []Migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("ledger: migration file %q is not named NNN_name.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		b, err := fs.ReadFile(fsys, dir+"/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("ledger: read migration %s: %w", e.Name(), err)
		}
		ms = append(ms, Migration{Version: v, Name: e.Name(), SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("ledger: migrations have a gap or duplicate: expected version %d, found %s", i+1, m.Name)
		}
	}
	return ms, nil
}

// Migrate applies every embedded migration not yet applied to schema (empty
// means "lakewrite"), in one transaction. It is idempotent, and safe when
// several processes call it at once: a transaction-scoped advisory lock keyed
// on the schema name serializes them. It returns the versions it applied.
// db is a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
func Migrate(ctx context.Context, db DB, schema string) ([]int, error) {
	if schema == "" {
		schema = DefaultSchema
	}
	ms, err := Migrations()
	if err != nil {
		return nil, err
	}
	var applied []int
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('lakewrite.migrate:' || $1, 0))`, schema); err != nil {
			return err
		}
		q := pgx.Identifier{schema}.Sanitize()
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+q); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+q+`.lakewrite_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT version FROM `+q+`.lakewrite_migrations`)
		if err != nil {
			return err
		}
		done, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return err
		}
		have := map[int]bool{}
		for _, v := range done {
			have[int(v)] = true
		}
		if _, err := tx.Exec(ctx, `SELECT set_config('search_path', $1, true)`, q); err != nil {
			return err
		}
		for _, m := range ms {
			if have[m.Version] {
				continue
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+q+`.lakewrite_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
				return err
			}
			applied = append(applied, m.Version)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: migrate schema %q: %w", schema, err)
	}
	return applied, nil
}
