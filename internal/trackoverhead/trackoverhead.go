// Package trackoverhead measures what change tracking (package
// incremental/changelog) costs the writes of a tracked table: the same
// inserts and updates timed on a table without tracking and on an identical
// one with it, in the same run, as ratios.
package trackoverhead

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	Schema           string // a scratch schema, created and dropped (default "lakewrite_trackoverhead")
	Rows             int    // rows inserted, then updated (default 100,000)
	RowsPerStatement int    // rows each INSERT or UPDATE statement writes (default 1,000)
	Reps             int    // repetitions; each case keeps its fastest (default 3)
	// StatementsPerRoundTrip is how many statements are sent in one batch,
	// which runs as one transaction (default 1,000); 1 sends each statement
	// on its own round trip, committed on its own, as an application
	// writing a row at a time does.
	StatementsPerRoundTrip int
	Columns                []string // tracked columns of the table (id bigint, k int, v double precision, note text); default id, k
	Floor                  bool     // also time the minimal trigger of the floor (Result.InsertFloor)
}

// Result is one measurement: the fastest time of each case.
type Result struct {
	Rows, RowsPerStatement         int
	StatementsPerRoundTrip         int
	InsertUntracked, InsertTracked time.Duration
	UpdateUntracked, UpdateTracked time.Duration
	// InsertFloor and UpdateFloor (with Options.Floor; else 0) are the
	// times on a third identical table whose changes a minimal row-level
	// trigger records in the same change log: one entry per row written
	// by one INSERT, no check, no pinned setting, no security context,
	// about the least a trigger can do to record a change.
	InsertFloor, UpdateFloor time.Duration
}

// InsertRatio is tracked / untracked time of the inserts.
func (r Result) InsertRatio() float64 { return float64(r.InsertTracked) / float64(r.InsertUntracked) }

// UpdateRatio is tracked / untracked time of the updates.
func (r Result) UpdateRatio() float64 { return float64(r.UpdateTracked) / float64(r.UpdateUntracked) }

// FloorInsertRatio is the minimal trigger's / untracked time of the
// inserts (see Result.InsertFloor).
func (r Result) FloorInsertRatio() float64 {
	return float64(r.InsertFloor) / float64(r.InsertUntracked)
}

// FloorUpdateRatio is the minimal trigger's / untracked time of the
// updates.
func (r Result) FloorUpdateRatio() float64 {
	return float64(r.UpdateFloor) / float64(r.UpdateUntracked)
}

func (r Result) String() string {
	s := fmt.Sprintf("TRACKING insert_ratio=%.2f update_ratio=%.2f rows=%d rows_per_statement=%d statements_per_round_trip=%d",
		r.InsertRatio(), r.UpdateRatio(), r.Rows, r.RowsPerStatement, r.StatementsPerRoundTrip)
	if r.InsertFloor > 0 {
		s += fmt.Sprintf(" floor_insert_ratio=%.2f floor_update_ratio=%.2f", r.FloorInsertRatio(), r.FloorUpdateRatio())
	}
	return s
}

// Measure creates identical tables in a scratch schema, one untracked, one
// tracked with l and, with opts.Floor, one with the minimal trigger of
// Result.InsertFloor, and times opts.Rows inserts then opts.Rows updates
// of each, in statements of opts.RowsPerStatement rows sent
// opts.StatementsPerRoundTrip statements a batch (one transaction each),
// alternating the tables, opts.Reps times. It drops the scratch schema and
// the tracking when it returns.
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
	if opts.StatementsPerRoundTrip <= 0 {
		opts.StatementsPerRoundTrip = 1_000
	}
	if len(opts.Columns) == 0 {
		opts.Columns = []string{"id", "k"}
	}
	res = Result{Rows: opts.Rows, RowsPerStatement: opts.RowsPerStatement, StatementsPerRoundTrip: opts.StatementsPerRoundTrip}
	s := pgx.Identifier{opts.Schema}.Sanitize()
	source := "trackoverhead:" + opts.Schema
	floorSource := "trackoverhead-floor:" + opts.Schema
	if _, err := db.Exec(ctx, `CREATE SCHEMA `+s+`;
		CREATE TABLE `+s+`.plain (id bigint PRIMARY KEY, k int NOT NULL, v double precision, note text);
		CREATE TABLE `+s+`.tracked (id bigint PRIMARY KEY, k int NOT NULL, v double precision, note text);
		CREATE TABLE `+s+`.floor (id bigint PRIMARY KEY, k int NOT NULL, v double precision, note text)`); err != nil {
		return res, fmt.Errorf("trackoverhead: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		err = errors.Join(err, l.Untrack(cctx, db, source))
		_, derr := db.Exec(cctx, `DROP SCHEMA `+s+` CASCADE`)
		err = errors.Join(err, derr)
		_, derr = db.Exec(cctx, `DELETE FROM `+l.Table()+` WHERE source = $1`, floorSource)
		err = errors.Join(err, derr)
	}()
	if opts.Floor {
		if _, err := db.Exec(ctx, floorTrigger(s, l.Table(), floorSource, opts.Columns)); err != nil {
			return res, fmt.Errorf("trackoverhead: floor trigger: %w", err)
		}
	}
	if err := l.Track(ctx, db, source, opts.Schema+".tracked", opts.Columns); err != nil {
		return res, err
	}
	run := func(table, stmt string) (time.Duration, error) {
		n := opts.RowsPerStatement
		start := time.Now()
		b := &pgx.Batch{}
		for lo := 1; lo <= opts.Rows; lo += n {
			b.Queue(`/* `+table+` */ `+stmt, lo, min(lo+n-1, opts.Rows))
			if b.Len() == opts.StatementsPerRoundTrip || lo+n > opts.Rows {
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
		if _, err := db.Exec(ctx, `TRUNCATE `+s+`.plain, `+s+`.tracked, `+s+`.floor`); err != nil {
			return res, fmt.Errorf("trackoverhead: %w", err)
		}
		if _, err := db.Exec(ctx, `DELETE FROM `+l.Table()+` WHERE source = ANY($1)`, []string{source, floorSource}); err != nil {
			return res, fmt.Errorf("trackoverhead: %w", err)
		}
		for _, c := range []struct {
			table string
			ins   *time.Duration
			upd   *time.Duration
		}{{"plain", &res.InsertUntracked, &res.UpdateUntracked}, {"tracked", &res.InsertTracked, &res.UpdateTracked}, {"floor", &res.InsertFloor, &res.UpdateFloor}} {
			if c.table == "floor" && !opts.Floor {
				continue
			}
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
		}{{"plain", &res.UpdateUntracked}, {"tracked", &res.UpdateTracked}, {"floor", &res.UpdateFloor}} {
			if c.table == "floor" && !opts.Floor {
				continue
			}
			d, err := run(c.table, `UPDATE `+s+`.`+c.table+` SET v = v + 1 WHERE id BETWEEN $1 AND $2`)
			if err != nil {
				return res, err
			}
			keep(c.upd, d)
		}
	}
	return res, nil
}

// floorTrigger creates, in schema s, the minimal trigger of the floor on
// table s.floor: for each row, one INSERT of its tracked columns' values as
// text (the new image; an update's old and new ones) into log, in the
// layout of the change log's entries (vals: a row per column).
func floorTrigger(s, log, source string, columns []string) string {
	img := func(rec string) string {
		vals := make([]string, len(columns))
		for i, c := range columns {
			vals[i] = "ARRAY[" + rec + "." + pgx.Identifier{c}.Sanitize() + "::text]"
		}
		return "ARRAY[" + strings.Join(vals, ", ") + "]"
	}
	src := "'" + strings.ReplaceAll(source, "'", "''") + "'"
	return `CREATE FUNCTION ` + s + `.floor_capture() RETURNS trigger LANGUAGE plpgsql AS $lw$
BEGIN
	IF TG_OP = 'INSERT' THEN
		INSERT INTO ` + log + ` (source, op, vals) VALUES (` + src + `, 'n', ` + img("NEW") + `);
	ELSE
		INSERT INTO ` + log + ` (source, op, vals) VALUES (` + src + `, 'o', ` + img("OLD") + `), (` + src + `, 'n', ` + img("NEW") + `);
	END IF;
	RETURN NULL;
END
$lw$;
CREATE TRIGGER floor_capture AFTER INSERT OR UPDATE ON ` + s + `.floor FOR EACH ROW EXECUTE FUNCTION ` + s + `.floor_capture()`
}
