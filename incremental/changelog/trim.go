package changelog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Defaults of TrimOptions.
const (
	DefaultMaxAge    = 7 * 24 * time.Hour
	DefaultBatchSize = 10_000
)

// TrimOptions bound the change log. Zero fields mean the defaults.
type TrimOptions struct {
	// MaxAge: entries older than this are deleted even when a consumer
	// still needs them (it then reads the source whole). Zero means
	// DefaultMaxAge, negative no age bound. Age is told by the marks each
	// Trim records, so an entry goes at the first Trim after a Trim that
	// ran at least MaxAge after the entry was written.
	MaxAge time.Duration
	// MaxRows: at most this many change_log rows are kept per source (the
	// newest, whole transactions), even when a consumer still needs older
	// ones; a tracked table's row holds up to 100,000 images. Zero means no
	// row bound.
	MaxRows int64
	// BatchSize: entries per DELETE statement, each its own transaction,
	// so that a trim never holds many row locks long. Zero means
	// DefaultBatchSize.
	BatchSize int
	// Sources, when set, are the only sources trimmed (entries of sources
	// no longer registered are then left for a Trim of every source).
	Sources []string
}

// TrimReport says what a Trim deleted.
type TrimReport struct {
	Deleted int64        // entries deleted, all sources
	Sources []SourceTrim // the sources Trim deleted entries of, or raised the bound of
}

// SourceTrim is what Trim did to one source.
type SourceTrim struct {
	Source       string
	Deleted      int64
	TrimmedBelow uint64   // entries below this xid may be gone (the source's trimmed_below)
	Behind       []string // outputs whose position is now behind TrimmedBelow: their next run reads the source whole
}

// Trim deletes the change log entries no consumer needs: for each source,
// those below the smallest xmin of its consumers' stored positions (an
// entry below a position's xmin is visible in it); and, bounded by opts,
// entries older than MaxAge or beyond MaxRows, raising the source's
// trimmed_below first so that a consumer behind it reads the source whole
// (it is listed in SourceTrim.Behind). A source without a consumer keeps
// only what the bounds allow. Entries of sources no longer registered are
// deleted.
//
// Trim runs outside any transaction of the caller's (db is a pool or a
// connection) in short statements: the bound first, then batches of
// deletes. It is safe to run concurrently with writers, readers and
// another Trim: an entry is deleted only after a bound above it is
// committed, and readers see the log through their snapshot.
func (l *Log) Trim(ctx context.Context, db DB, opts TrimOptions) (TrimReport, error) {
	if opts.MaxAge == 0 {
		opts.MaxAge = DefaultMaxAge
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	var rep TrimReport
	var ageCut uint64
	if opts.MaxAge >= 0 {
		// The marks tell entries' age (a Trim without an age bound
		// records none: they would pile up).
		var err error
		if ageCut, err = l.mark(ctx, db, opts.MaxAge); err != nil {
			return rep, fmt.Errorf("changelog: trim: %w", err)
		}
	}
	type src struct {
		name    string
		trimmed uint64
		at      string
	}
	rows, err := db.Query(ctx, `SELECT source, trimmed_below::text, coalesce(trimmed_snapshot, '') FROM `+l.sources()+`
		WHERE $1::text[] IS NULL OR source = ANY($1) ORDER BY source`, opts.Sources)
	if err != nil {
		return rep, fmt.Errorf("changelog: trim: %w", err)
	}
	var srcs []src
	var name, below, at string
	if _, err := pgx.ForEachRow(rows, []any{&name, &below, &at}, func() error {
		v, err := strconv.ParseUint(below, 10, 64)
		srcs = append(srcs, src{name, v, at})
		return err
	}); err != nil {
		return rep, fmt.Errorf("changelog: trim: %w", err)
	}
	for _, s := range srcs {
		st, err := l.trimSource(ctx, db, s.name, s.trimmed, s.at, ageCut, opts)
		if err != nil {
			return rep, fmt.Errorf("changelog: trim %q: %w", s.name, err)
		}
		if st.Deleted > 0 || st.TrimmedBelow > s.trimmed {
			rep.Sources = append(rep.Sources, st)
			rep.Deleted += st.Deleted
		}
	}
	if opts.Sources != nil {
		return rep, nil
	}
	orphans, err := l.orphans(ctx, db, opts.BatchSize)
	if err != nil {
		return rep, fmt.Errorf("changelog: trim: %w", err)
	}
	for _, st := range orphans {
		rep.Sources = append(rep.Sources, st)
		rep.Deleted += st.Deleted
	}
	return rep, nil
}

// mark records this Trim's mark and returns the xid below which entries are
// older than maxAge (0: none known yet).
func (l *Log) mark(ctx context.Context, db DB, maxAge time.Duration) (uint64, error) {
	if _, err := db.Exec(ctx, `INSERT INTO `+l.marks()+` (at, xid) VALUES (clock_timestamp(), pg_snapshot_xmin(pg_current_snapshot()))`); err != nil {
		return 0, err
	}
	var at time.Time
	var xid string
	err := db.QueryRow(ctx, `SELECT at, xid::text FROM `+l.marks()+` WHERE at <= clock_timestamp() - $1::interval ORDER BY at DESC LIMIT 1`,
		fmt.Sprintf("%d microseconds", maxAge.Microseconds())).Scan(&at, &xid)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	// Older marks are of no further use.
	if _, err := db.Exec(ctx, `DELETE FROM `+l.marks()+` WHERE at < $1`, at); err != nil {
		return 0, err
	}
	return strconv.ParseUint(xid, 10, 64)
}

func (l *Log) trimSource(ctx context.Context, db DB, source string, trimmed uint64, at string, ageCut uint64, opts TrimOptions) (SourceTrim, error) {
	st := SourceTrim{Source: source, TrimmedBelow: trimmed}
	type consumer struct {
		output string
		pos    snapshot
	}
	rows, err := db.Query(ctx, `SELECT dataset_id, position FROM `+l.positions()+` WHERE source_id = $1`, source)
	if err != nil {
		return st, err
	}
	var consumers []consumer
	var output, position string
	if _, err := pgx.ForEachRow(rows, []any{&output, &position}, func() error {
		// A position that is not a pg_snapshot is of another kind of
		// source (an Iceberg snapshot id): not a consumer of this log. A
		// consumer may store a word of its own before its position (a
		// model, its run's transaction id and a space).
		if i := strings.LastIndexByte(position, ' '); i >= 0 {
			position = position[i+1:]
		}
		if s, err := parsePosition(Position(position)); err == nil {
			consumers = append(consumers, consumer{output, s})
		}
		return nil
	}); err != nil {
		return st, err
	}
	// The bound: below what every consumer has read, or (no consumer)
	// nothing, raised by the age and row bounds.
	var bound uint64
	for i, c := range consumers {
		if i == 0 || c.pos.xmin < bound {
			bound = c.pos.xmin
		}
	}
	bound = max(bound, ageCut)
	if opts.MaxRows > 0 {
		var x string
		err := db.QueryRow(ctx, `SELECT xid::text FROM `+l.Table()+` WHERE source = $1 ORDER BY xid DESC OFFSET $2 LIMIT 1`,
			source, opts.MaxRows).Scan(&x)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return st, err
		default:
			v, err := strconv.ParseUint(x, 10, 64)
			if err != nil {
				return st, err
			}
			bound = max(bound, v+1)
		}
	}
	if bound > trimmed {
		// The new bound and the snapshot it is taken in: only entries
		// visible in it are deleted, so a reader's position is behind only
		// when it does not see one of them (see trimmedPast).
		var now string
		if err := db.QueryRow(ctx, `UPDATE `+l.sources()+` SET trimmed_below = greatest(trimmed_below, $2::xid8),
				trimmed_snapshot = CASE WHEN $2::xid8 > trimmed_below THEN pg_current_snapshot()::text ELSE trimmed_snapshot END
			WHERE source = $1 RETURNING trimmed_below::text, trimmed_snapshot`, source, strconv.FormatUint(bound, 10)).Scan(&now, &at); err != nil {
			if errors.Is(err, pgx.ErrNoRows) { // untracked meanwhile
				return st, nil
			}
			return st, err
		}
		v, err := strconv.ParseUint(now, 10, 64)
		if err != nil {
			return st, err
		}
		st.TrimmedBelow = v
	}
	if st.TrimmedBelow == 0 {
		return st, nil
	}
	trim, err := parsePosition(Position(at))
	if err != nil {
		return st, err
	}
	for _, c := range consumers {
		if trimmedPast(c.pos, st.TrimmedBelow, trim) {
			st.Behind = append(st.Behind, c.output)
		}
	}
	st.Deleted, err = l.deleteBatches(ctx, db, `source = $1 AND xid < $2::xid8 AND pg_visible_in_snapshot(xid, $3::pg_snapshot)`,
		opts.BatchSize, source, strconv.FormatUint(st.TrimmedBelow, 10), trim.text)
	return st, err
}

// trimmedPast reports whether an entry a trim may have deleted (xid below
// below, visible in the trim's snapshot) is not visible in pos: then a
// window since pos may miss it. Conservative: an xid that aborted counts.
func trimmedPast(pos snapshot, below uint64, trim snapshot) bool {
	if below == 0 {
		return false
	}
	for _, x := range pos.xip {
		if x < below && trim.visible(x) {
			return true
		}
	}
	// The xids at or above pos's xmax and below the bound: is one of them
	// visible in the trim's snapshot?
	hi := min(below, trim.xmax)
	if pos.xmax >= hi {
		return false
	}
	if pos.xmax < trim.xmin {
		return true
	}
	inProgress := uint64(0)
	for _, x := range trim.xip {
		if x >= pos.xmax && x < hi {
			inProgress++
		}
	}
	return inProgress < hi-pos.xmax
}

func (l *Log) deleteBatches(ctx context.Context, db DB, where string, batch int, args ...any) (int64, error) {
	var total int64
	args = append(args, batch)
	limit := "$" + strconv.Itoa(len(args))
	for {
		tag, err := db.Exec(ctx, `DELETE FROM `+l.Table()+` WHERE ctid = ANY(ARRAY(
			SELECT ctid FROM `+l.Table()+` WHERE `+where+` LIMIT `+limit+`))`, args...)
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			return total, nil
		}
	}
}

// orphans deletes the entries of source ids that are not registered
// (untracked, or written by a writer that never registered). Each batch
// checks the registration in its own snapshot: an entry it sees committed
// while the source is not registered was written before any registration
// that is to come, so no reader will need it.
func (l *Log) orphans(ctx context.Context, db DB, batch int) ([]SourceTrim, error) {
	rows, err := db.Query(ctx, `WITH RECURSIVE s(source) AS (
			(SELECT source FROM `+l.Table()+` ORDER BY source LIMIT 1)
			UNION ALL
			SELECT (SELECT c.source FROM `+l.Table()+` c WHERE c.source > s.source ORDER BY c.source LIMIT 1)
			FROM s WHERE s.source IS NOT NULL)
		SELECT s.source FROM s
		WHERE s.source IS NOT NULL AND NOT EXISTS (SELECT FROM `+l.sources()+` cs WHERE cs.source = s.source)`)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	var out []SourceTrim
	for _, source := range names {
		n, err := l.deleteBatches(ctx, db, `source = $1 AND NOT EXISTS (SELECT FROM `+l.sources()+` WHERE source = $1)`, batch, source)
		if err != nil {
			return out, err
		}
		if n > 0 {
			out = append(out, SourceTrim{Source: source, Deleted: n})
		}
	}
	return out, nil
}
