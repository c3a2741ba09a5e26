package sliceriver

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// DefaultSchema is the ledger's schema, which holds the slices' results.
const DefaultSchema = "lakewrite"

// resultsTable is the quoted name of the results table in schema.
func resultsTable(schema string) string {
	if schema == "" {
		schema = DefaultSchema
	}
	return pgx.Identifier{schema, "slice_results"}.Sanitize()
}

// Migrate brings River's tables (rivermigrate, in the search path's
// schema) up to date and creates the slices' results table in schema
// (DefaultSchema when empty), or adds its newer columns: one row per
// written slice, keyed by (write_id, slice), holding the slice's encoded
// files and its rows.
func Migrate(ctx context.Context, db *pgxpool.Pool, schema string) error {
	m, err := rivermigrate.New(riverpgxv5.New(db), nil)
	if err != nil {
		return fmt.Errorf("sliceriver: river migrator: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("sliceriver: river migrations: %w", err)
	}
	if schema == "" {
		schema = DefaultSchema
	}
	_, err = db.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()+`;
		CREATE TABLE IF NOT EXISTS `+resultsTable(schema)+` (
			write_id uuid NOT NULL,
			slice integer NOT NULL,
			files jsonb NOT NULL,
			rounded bigint NOT NULL,
			written_at timestamptz NOT NULL DEFAULT now(),
			PRIMARY KEY (write_id, slice));
		ALTER TABLE `+resultsTable(schema)+` ADD COLUMN IF NOT EXISTS row_count bigint NOT NULL DEFAULT 0`)
	if err != nil {
		return fmt.Errorf("sliceriver: results table: %w", err)
	}
	return nil
}
