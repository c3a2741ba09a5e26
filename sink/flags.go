package sink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lakewrite/lakewrite/ledger"
)

// FlagsConfig configures [NewFlags]. The zero value (or nil) is valid.
type FlagsConfig struct {
	// Schema holds the control-plane tables; "" means ledger.DefaultSchema
	// ("lakewrite").
	Schema string
}

// Flags reads and changes writer flags in Postgres: the API an operator
// runbook calls (check -> set override -> re-deploy -> verify -> smoke;
// revert = clear override). It does not cache; [Resolver] does. Safe for
// concurrent use when its db is (a pool is; a single conn or tx is not).
type Flags struct {
	db     ledger.DB
	schema string
	flags  string // qualified writer_flags
	ovr    string // qualified writer_flag_overrides
	dsets  string // qualified datasets
}

// WriterFlags is one writer's flags row.
type WriterFlags struct {
	WriterID string
	Default  Sink
	Max      Sink

	updatedAt time.Time // set by reads, ignored by SetWriter
}

// Override is one per-dataset override of a writer's default.
type Override struct {
	WriterID  string
	DatasetID string
	Sink      Sink

	updatedAt time.Time
}

// NewFlags returns a Flags on db: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
// Every method runs one statement, so a pgx.Tx makes flag changes commit
// with the caller's own work. It does not touch the database.
func NewFlags(db ledger.DB, cfg *FlagsConfig) (*Flags, error) {
	if db == nil {
		return nil, fmt.Errorf("sink: NewFlags: %w: db is nil; pass a *pgxpool.Pool, *pgx.Conn or pgx.Tx", errInvalidArgument)
	}
	var c FlagsConfig
	if cfg != nil {
		c = *cfg
	}
	if c.Schema == "" {
		c.Schema = ledger.DefaultSchema
	}
	q := pgx.Identifier{c.Schema}.Sanitize() + "."
	return &Flags{db: db, schema: c.Schema, flags: q + "writer_flags", ovr: q + "writer_flag_overrides", dsets: q + "datasets"}, nil
}

// SetWriter creates or replaces a writer's default and max sink. A default
// above the max is refused with an error matching [ErrAboveCeiling]. Lowering the max below
// existing overrides is allowed (the kill switch): those overrides are then
// capped at resolution and reported as clamped.
func (f *Flags) SetWriter(ctx context.Context, w WriterFlags) error {
	if err := nonEmpty("writer id", w.WriterID); err != nil {
		return err
	}
	for _, m := range []Sink{w.Default, w.Max} {
		if _, err := ParseSink(string(m)); err != nil {
			return err
		}
	}
	if w.Default.Compare(w.Max) > 0 {
		return ceilingError(w.WriterID, "", w.Default, w.Max)
	}
	_, err := f.db.Exec(ctx, `INSERT INTO `+f.flags+` (writer_id, default_mode, max_mode) VALUES ($1, $2, $3)
		ON CONFLICT (writer_id) DO UPDATE SET default_mode = EXCLUDED.default_mode, max_mode = EXCLUDED.max_mode, updated_at = now()`,
		w.WriterID, string(w.Default), string(w.Max))
	return f.dbErr("set writer "+w.WriterID, err)
}

// Writer returns a writer's flags row, or an error wrapping
// [ErrUnknownWriter].
func (f *Flags) Writer(ctx context.Context, writerID string) (WriterFlags, error) {
	rows, err := f.db.Query(ctx, `SELECT writer_id, default_mode, max_mode, updated_at FROM `+f.flags+` WHERE writer_id = $1`, writerID)
	if err != nil {
		return WriterFlags{}, f.dbErr("read writer", err)
	}
	ws, err := pgx.CollectRows(rows, scanWriter)
	if err != nil {
		return WriterFlags{}, f.dbErr("read writer", err)
	}
	if len(ws) == 0 {
		return WriterFlags{}, fmt.Errorf("sink: writer %q: %w (create it with SetWriter)", writerID, ErrUnknownWriter)
	}
	return ws[0], nil
}

// writers lists every writer's flags row, ordered by writer id.
func (f *Flags) writers(ctx context.Context) ([]WriterFlags, error) {
	rows, err := f.db.Query(ctx, `SELECT writer_id, default_mode, max_mode, updated_at FROM `+f.flags+` ORDER BY writer_id`)
	if err != nil {
		return nil, f.dbErr("list writers", err)
	}
	ws, err := pgx.CollectRows(rows, scanWriter)
	return ws, f.dbErr("list writers", err)
}

func scanWriter(row pgx.CollectableRow) (WriterFlags, error) {
	var w WriterFlags
	var def, max string
	err := row.Scan(&w.WriterID, &def, &max, &w.updatedAt)
	w.Default, w.Max = Sink(def), Sink(max)
	return w, err
}

// SetOverride sets the override of writerID to sink s for every dataset in
// datasetIDs, in one statement: all or none. It refuses with:
//   - an error matching [ErrAboveCeiling] when s is above the writer's max
//     sink;
//   - [ErrUnknownWriter] when the writer has no flags row;
//   - [ledger.ErrDatasetNotFound] when a dataset is not registered.
//
// Pass both outputs of a split together so they flip as a pair.
func (f *Flags) SetOverride(ctx context.Context, writerID string, s Sink, datasetIDs ...string) error {
	if err := nonEmpty("writer id", writerID); err != nil {
		return err
	}
	if _, err := ParseSink(string(s)); err != nil {
		return err
	}
	ids, err := datasetList(datasetIDs)
	if err != nil {
		return err
	}
	// The writer row is share-locked for the statement, so a concurrent
	// SetWriter lowering the ceiling either sees this override (and caps it)
	// or makes this statement see the new ceiling.
	tag, err := f.db.Exec(ctx, `WITH w AS (
			SELECT writer_id FROM `+f.flags+` WHERE writer_id = $1 AND max_mode = ANY($4::pg_catalog.text[]) FOR SHARE)
		INSERT INTO `+f.ovr+` (writer_id, dataset_id, mode)
		SELECT w.writer_id, d.id, $3 FROM w, unnest($2::pg_catalog.text[]) AS d(id)
		ON CONFLICT (writer_id, dataset_id) DO UPDATE SET mode = EXCLUDED.mode, updated_at = now()`,
		writerID, ids, string(s), atLeast(s))
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23503" { // foreign_key_violation: writer_flags is locked, so it is a dataset
			missing, qerr := f.missingDatasets(ctx, ids)
			if qerr != nil || len(missing) == 0 {
				return fmt.Errorf("sink: set override of writer %q: %w: %s", writerID, ledger.ErrDatasetNotFound, pe.Detail)
			}
			return fmt.Errorf("sink: set override of writer %q: %w: %q", writerID, ledger.ErrDatasetNotFound, missing)
		}
		return f.dbErr("set override", err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	w, err := f.Writer(ctx, writerID)
	if err != nil {
		return err
	}
	return ceilingError(writerID, ids[0], s, w.Max)
}

func (f *Flags) missingDatasets(ctx context.Context, ids []string) ([]string, error) {
	rows, err := f.db.Query(ctx, `SELECT d.id FROM unnest($1::pg_catalog.text[]) AS d(id)
		WHERE NOT EXISTS (SELECT 1 FROM `+f.dsets+` x WHERE x.id = d.id) ORDER BY d.id`, ids)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// ClearOverride removes the overrides of writerID for datasetIDs (the
// revert), in one statement, and returns how many existed. Clearing an
// override that does not exist is not an error. Resolvers observe the revert
// within their TTL.
func (f *Flags) ClearOverride(ctx context.Context, writerID string, datasetIDs ...string) (int, error) {
	if err := nonEmpty("writer id", writerID); err != nil {
		return 0, err
	}
	ids, err := datasetList(datasetIDs)
	if err != nil {
		return 0, err
	}
	tag, err := f.db.Exec(ctx, `DELETE FROM `+f.ovr+` WHERE writer_id = $1 AND dataset_id = ANY($2::pg_catalog.text[])`, writerID, ids)
	if err != nil {
		return 0, f.dbErr("clear override", err)
	}
	return int(tag.RowsAffected()), nil
}

// Overrides lists the overrides of writerID ("" lists every writer's),
// ordered by writer and dataset.
func (f *Flags) Overrides(ctx context.Context, writerID string) ([]Override, error) {
	rows, err := f.db.Query(ctx, `SELECT writer_id, dataset_id, mode, updated_at FROM `+f.ovr+`
		WHERE $1 = '' OR writer_id = $1 ORDER BY writer_id, dataset_id`, writerID)
	if err != nil {
		return nil, f.dbErr("list overrides", err)
	}
	os, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Override, error) {
		var o Override
		var m string
		err := row.Scan(&o.WriterID, &o.DatasetID, &m, &o.updatedAt)
		o.Sink = Sink(m)
		return o, err
	})
	return os, f.dbErr("list overrides", err)
}

// Lookup reads the settings of writerID for each dataset, in one statement
// (one consistent snapshot), in the order given. It implements [Lookuper].
func (f *Flags) Lookup(ctx context.Context, writerID string, datasetIDs ...string) ([]Setting, error) {
	if err := nonEmpty("writer id", writerID); err != nil {
		return nil, err
	}
	for _, id := range datasetIDs {
		if err := nonEmpty("dataset id", id); err != nil {
			return nil, err
		}
	}
	rows, err := f.db.Query(ctx, f.lookupSQL(), writerID, datasetIDs)
	if err != nil {
		return nil, f.dbErr("look up flags", err)
	}
	return f.collectLookup(rows, writerID)
}

// lookupSQL is Lookup's query: $1 the writer id, $2 the dataset ids.
func (f *Flags) lookupSQL() string {
	return `SELECT d.id, w.writer_id IS NOT NULL, coalesce(w.default_mode, ''), coalesce(w.max_mode, ''), coalesce(o.mode, '')
		FROM unnest($2::pg_catalog.text[]) WITH ORDINALITY AS d(id, n)
		LEFT JOIN ` + f.flags + ` w ON w.writer_id = $1
		LEFT JOIN ` + f.ovr + ` o ON o.writer_id = $1 AND o.dataset_id = d.id
		ORDER BY d.n`
}

// collectLookup reads the rows of lookupSQL.
func (f *Flags) collectLookup(rows pgx.Rows, writerID string) ([]Setting, error) {
	ss, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Setting, error) {
		s := Setting{WriterID: writerID}
		var def, max, ovr string
		err := row.Scan(&s.DatasetID, &s.WriterKnown, &def, &max, &ovr)
		s.Default, s.Max, s.Override = Sink(def), Sink(max), Sink(ovr)
		return s, err
	})
	if err != nil {
		return nil, f.dbErr("look up flags", err)
	}
	return ss, nil
}

// Check resolves (writer, dataset) from the database, bypassing any cache:
// the "check" step of the runbook. It does not log.
func (f *Flags) Check(ctx context.Context, writerID, datasetID string) (Decision, error) {
	ss, err := f.Lookup(ctx, writerID, datasetID)
	if err != nil {
		return Decision{}, err
	}
	return Decide(ss[0]), nil
}

func (f *Flags) dbErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000") { // undefined_table, invalid_schema_name
		return fmt.Errorf("sink: %s: %w (schema %q: run ledger.Migrate): %w", op, errNotMigrated, f.schema, err)
	}
	return fmt.Errorf("sink: %s: %w", op, err)
}

func nonEmpty(what, s string) error {
	if s == "" {
		return fmt.Errorf("sink: %w: %s is empty", errInvalidArgument, what)
	}
	return nil
}

func datasetList(ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("sink: %w: no dataset ids", errInvalidArgument)
	}
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if err := nonEmpty("dataset id", id); err != nil {
			return nil, err
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}
