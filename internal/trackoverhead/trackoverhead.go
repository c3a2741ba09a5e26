// Package trackoverhead measures what change tracking (package
// incremental/changelog) costs the writes of a tracked table: the same
// inserts and updates timed on a table without tracking and on an identical
// one with it, in the same run, as ratios.
package trackoverhead

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/incremental/changelog"
)

// DB is a *pgxpool.Pool or a *pgx.Conn.
type DB interface {
	changelog.DB
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Options of a measurement. Zero fields mean the defaults.
type Options struct {
	Schema           string   // a scratch schema, created and dropped (default "lakewrite_trackoverhead")
	Rows             int      // rows inserted, then updated (default 100,000)
	RowsPerStatement int      // rows each INSERT or UPDATE statement writes (default 1,000)
	Reps             int      // repetitions; each case keeps its fastest (default 3)
	Columns          []string // tracked columns of the table (id bigint, k int, v double precision, note text); default id, k
}

// Result is one measurement: the fastest time of each case.
type Result struct {
	Rows, RowsPerStatement         int
	InsertUntracked, InsertTracked time.Duration
	UpdateUntracked, UpdateTracked time.Duration
}

// InsertRatio is tracked / untracked time of the inserts.
func (r Result) InsertRatio() float64 { return float64(r.InsertTracked) / float64(r.InsertUntracked) }

// UpdateRatio is tracked / untracked time of the updates.
func (r Result) UpdateRatio() float64 { return float64(r.UpdateTracked) / float64(r.UpdateUntracked) }

func (r Result) String() string {
	return fmt.Sprintf("TRACKING insert_ratio=%.2f update_ratio=%.2f rows=%d rows_per_statement=%d",
		r.InsertRatio(), r.UpdateRatio(), r.Rows, r.RowsPerStatement)
}

// Measure creates two identical tables in a scratch schema, tracks one with
// l, and times opts.Rows inserts then opts.Rows updates of each, in
// statements of opts.RowsPerStatement rows sent 1,000 statements a batch
// (one transaction each), alternating the tables, opts.Reps times. It drops
// the scratch schema and the tracking when it returns.
func Measure(ctx context.Context, db DB, l *changelog.Log, opts Options) (res Result, err error) {
	if opts.Schema == "" {
		opts.Schema = "lakewrite_trackoverhead"
	}
	if opts.Rows <= 0 {
		opts.Rows = 100_000
	}
	if opts.RowsPerStatement <= 0 {
		opts.RowsPerStatement = 1_000
	}
	if opts.Reps <= 0 {
		opts.Reps = 3
	}
	if len(opts.Columns) == 0 {
		opts.Columns = []string{"id", "k"}
	}
	res = Result{Rows: opts.Rows, RowsPerStatement: opts.RowsPerStatement}
	s := pgx.Identifier{opts.Schema}.Sanitize()
	source := "trackoverhead:" + opts.Schema
	if _, err := db.Exec(ctx, `CREATE SCHEMA `+s+`;
		CREATE TABLE `+s+`.plain (id bigint PRIMARY KEY, k int NOT NULL, v double precision, note text);
		CREATE TABLE `+s+`.tracked (id bigint PRIMARY KEY, k int NOT NULL, v double precision, note text)`); err != nil {
		return res, fmt.Errorf("trackoverhead: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		err = errors.Join(err, l.Untrack(cctx, db, source))
		_, derr := db.Exec(cctx, `DROP SCHEMA `+s+` CASCADE`)
		err = errors.Join(err, derr)
	}()
	if err := l.Track(ctx, db, source, opts.Schema+".tracked", opts.Columns); err != nil {
		return res, err
	}
	run := func(table, stmt string) (time.Duration, error) {
		n := opts.RowsPerStatement
		start := time.Now()
		b := &pgx.Batch{}
		for lo := 1; lo <= opts.Rows; lo += n {
			b.Queue(`/* `+table+` */ `+stmt, lo, min(lo+n-1, opts.Rows))
			if b.Len() == 1000 || lo+n > opts.Rows {
				if err := db.SendBatch(ctx, b).Close(); err != nil {
					return 0, fmt.Errorf("trackoverhead: %w", err)
				}
				b = &pgx.Batch{}
			}
		}
		return time.Since(start), nil
	}
	keep := func(d *time.Duration, v time.Duration) {
		if *d == 0 || v < *d {
			*d = v
		}
	}
	for range opts.Reps {
		if _, err := db.Exec(ctx, `TRUNCATE `+s+`.plain, `+s+`.tracked`); err != nil {
			return res, fmt.Errorf("trackoverhead: %w", err)
		}
		if _, err := db.Exec(ctx, `DELETE FROM `+l.Table()+` WHERE source = $1`, source); err != nil {
			return res, fmt.Errorf("trackoverhead: %w", err)
		}
		for _, c := range []struct {
			table string
			ins   *time.Duration
			upd   *time.Duration
		}{{"plain", &res.InsertUntracked, &res.UpdateUntracked}, {"tracked", &res.InsertTracked, &res.UpdateTracked}} {
			t := s + "." + c.table
			d, err := run(c.table, `INSERT INTO `+t+` SELECT g, g % 1000, g * 0.5, 'note ' || g FROM generate_series($1::bigint, $2::bigint) g`)
			if err != nil {
				return res, err
			}
			keep(c.ins, d)
		}
		for _, c := range []struct {
			table string
			upd   *time.Duration
		}{{"plain", &res.UpdateUntracked}, {"tracked", &res.UpdateTracked}} {
			d, err := run(c.table, `UPDATE `+s+`.`+c.table+` SET v = v + 1 WHERE id BETWEEN $1 AND $2`)
			if err != nil {
				return res, err
			}
			keep(c.upd, d)
		}
	}
	return res, nil
}
