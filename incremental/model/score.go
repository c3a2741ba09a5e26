package model

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/cursor"
)

// Column is a source column: its name and Postgres type (as format_type
// prints it).
type Column struct{ Name, Type string }

// Source is a model's source as the write reads it.
type Source struct {
	// SQL is a parenthesized subquery of the source's rows with its
	// columns and "__ord" (their order); Args are its parameters.
	SQL     string
	Args    []any
	Columns []Column
}

// CopyFunc copies, in tx, the rows of rec into table's columns (rec's,
// then "__ord" numbered from ord) and returns the next ord.
type CopyFunc func(ctx context.Context, tx pgx.Tx, table pgx.Identifier, columns []string, rec arrow.RecordBatch, ord int64) (int64, error)

// Scored is the output of a run, in a temporary table of its transaction.
type Scored struct {
	// SQL selects the output rows (KeyColumn then the declared columns)
	// in output order.
	SQL   string
	Stats Stats
}

// Score reads src's rows (restricted to the rows cond holds for, over
// "s", when cond is not empty) into a temporary table of tx, runs s.Func
// over them in windows and copies the output rows (with copyRows) into
// another temporary table, whose columns are defs (the declared columns'
// definitions). progress, when set, sees each window.
func Score(ctx context.Context, tx pgx.Tx, s *Spec, src Source, cond string, defs []string, copyRows CopyFunc, progress func(WindowEvent)) (Scored, error) {
	keySQL, err := sourceKeySQL(s, src)
	if err != nil {
		return Scored{}, err
	}
	for _, c := range s.Columns {
		if !slices.ContainsFunc(src.Columns, func(sc Column) bool { return sc.Name == c }) {
			return Scored{}, fmt.Errorf("%w: model %q passes column %q, which source %q does not have", ErrInvalid, s.Output, c, s.Source)
		}
	}
	in, out := tempName("in"), tempName("out")
	cols := ""
	for _, c := range s.Columns {
		cols += ", s." + ident(c)
	}
	where := ""
	if cond != "" {
		where = " WHERE " + cond
	}
	tag, err := tx.Exec(ctx, "CREATE TEMP TABLE "+in+` ON COMMIT DROP AS SELECT row_number() OVER (ORDER BY s."__ord") AS "__w", `+
		keySQL+" AS "+ident(KeyColumn)+cols+" FROM "+src.SQL+" s"+where, src.Args...)
	if err != nil {
		return Scored{}, fmt.Errorf("model %q: read source: %w", s.Output, err)
	}
	total := tag.RowsAffected()
	if _, err := tx.Exec(ctx, "CREATE INDEX ON "+in+` ("__w")`); err != nil {
		return Scored{}, fmt.Errorf("model %q: index source rows: %w", s.Output, err)
	}
	if _, err := tx.Exec(ctx, "CREATE TEMP TABLE "+out+" ("+ident(KeyColumn)+" pg_catalog.text, "+strings.Join(defs, ", ")+`, "__ord" bigint) ON COMMIT DROP`); err != nil {
		return Scored{}, fmt.Errorf("model %q: %w", s.Output, err)
	}
	names := []string{ident(KeyColumn)}
	copyCols := []string{KeyColumn}
	for _, f := range s.Schema.Fields() {
		names = append(names, ident(f.Name))
		copyCols = append(copyCols, f.Name)
	}
	readSQL := "SELECT " + ident(KeyColumn) + cols + " FROM " + in + ` s WHERE "__w" > $1 AND "__w" <= $2 ORDER BY "__w"`
	window := s.window()
	var from, ord int64
	r := &Runner{Func: s.Func, Concurrency: s.Concurrency, Deadline: s.Deadline, Schema: OutputSchema(s.Schema), Total: total, Progress: progress}
	read := func() (arrow.RecordBatch, error) {
		if from >= total {
			return nil, nil
		}
		rec, err := readWindow(ctx, tx, readSQL, from, from+window, int(window))
		from += window
		if err != nil {
			return nil, fmt.Errorf("model %q: read window: %w", s.Output, err)
		}
		return rec, nil
	}
	table := pgx.Identifier{"pg_temp", strings.TrimPrefix(out, "pg_temp.")}
	write := func(rec arrow.RecordBatch) (err error) {
		ord, err = copyRows(ctx, tx, table, copyCols, rec, ord)
		return err
	}
	st, err := r.Run(ctx, read, write)
	if err != nil {
		return Scored{}, fmt.Errorf("model %q: %w", s.Output, err)
	}
	return Scored{SQL: "SELECT " + strings.Join(names, ", ") + " FROM " + out + ` ORDER BY "__ord"`, Stats: st}, nil
}

// sourceKeySQL is the expression of KeyColumn over the source's columns
// (as "s").
func sourceKeySQL(s *Spec, src Source) (string, error) {
	exprs, types, err := keyColumns(s, src)
	if err != nil {
		return "", err
	}
	sql, err := KeySQL(exprs, types)
	if err != nil {
		return "", fmt.Errorf("%w: model %q: %w", ErrInvalid, s.Output, err)
	}
	return sql, nil
}

// readWindow reads the rows of one window as one record batch (nil when
// it has none).
func readWindow(ctx context.Context, tx pgx.Tx, sql string, from, to int64, size int) (arrow.RecordBatch, error) {
	st, err := cursor.Batches(ctx, tx, sql, []any{from, to}, &cursor.Options{BatchSize: size})
	if err != nil {
		return nil, err
	}
	var out arrow.RecordBatch
	for rec, err := range st.All() {
		if err == nil && out != nil { // one window is one batch: BatchSize is its size
			rec.Release()
			err = fmt.Errorf("model: a window of %d rows came in more than one batch", size)
		}
		if err != nil {
			if out != nil {
				out.Release()
			}
			return nil, err
		}
		out = rec
	}
	return out, nil
}

// tempName names a new temporary table of a model's run.
func tempName(what string) string {
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	return "pg_temp.lw_model_" + what + "_" + hex.EncodeToString(suffix[:])
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }
