package changelog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Position is a pg_snapshot in its text form (xmin:xmax:xip,...): what a
// reader has read of a source. "" means none. Window and Trim also accept
// it prefixed with "pg:". The position of a tracked table ends with
// "@", the table's file node (pg_relation_filenode) at the read, "." and a
// hash of its tracking triggers' catalog rows: a rewrite of the table
// (ALTER TABLE ... TYPE, VACUUM FULL, CLUSTER), which changes rows without
// firing a trigger, gives it a new file node, and ALTER TABLE ... DISABLE
// TRIGGER then ENABLE TRIGGER (writes meanwhile were not recorded) new
// trigger rows.
type Position string

// Reasons a Window is not known.
const (
	ReasonNoPosition = "no earlier position"
	ReasonNotTracked = "not tracked"
	ReasonInstalled  = "tracking installed after the last run"
	ReasonTrimmed    = "log trimmed past the last run"
	ReasonFull       = "a TRUNCATE or full rewrite"
	ReasonAltered    = "a tracked column was altered, or the tracking triggers were removed, disabled or replaced since the last run"
	ReasonAhead      = "the last position is not in this database's past"
	ReasonRewritten  = "the table was rewritten (ALTER TABLE changing a column's type or values, VACUUM FULL, CLUSTER) or its last position does not say"
)

// Window is what a source changed between two positions.
type Window struct {
	Known    bool     // false: the next run must read the source whole (see Reason)
	Reason   string   // why not Known (one of the Reason constants)
	Position Position // the reading transaction's snapshot: store it once the run commits
	Images   int64    // images in the window (0 when nothing changed); 0 when not Known
	SQL      string   // SELECT op, image: the window's images, valid in the reading transaction; "" when not Known
	Args     []any    // SQL's parameters as $1..$n
	// Columns are a tracked table's tracked columns, the only ones its
	// images hold; nil for a row-store source, whose images hold every
	// column.
	Columns []string

	where string // the entries' condition over the log as "c", with Args
	log   string // the change log table
}

// ValuesSQL is the SQL of the values, as text, of columns (which the
// window's images hold: see Missing) in each of the window's images, old
// and new: "SELECT v1, ..., vn ...", valid in the reading transaction with
// Args; a value is what the image holds as text (what ->> reads of the
// image in SQL). It reads a tracked table's entries without building their
// images, for a reader that needs a few columns (a refresh's keys); ""
// when the window is not Known.
func (w Window) ValuesSQL(columns []string) string {
	if !w.Known {
		return ""
	}
	json := make([]string, len(columns))
	out := make([]string, len(columns))
	for i, c := range columns {
		json[i] = "c.image ->> " + quoteLiteral(c) + " AS v" + strconv.Itoa(i+1)
		out[i] = "u.v" + strconv.Itoa(i+1)
	}
	sql := `SELECT ` + strings.Join(json, ", ") + ` FROM ` + w.log + ` c` + w.where + ` AND c.op IN ('I', 'D')`
	if w.Columns == nil {
		return sql
	}
	// A tracked table's entries: each needed column's slice of vals,
	// unnested (see unnestVals).
	slice := func(byColumn bool) string {
		args := make([]string, len(columns))
		for i, c := range columns {
			k := strconv.Itoa(slices.Index(w.Columns, c) + 1)
			args[i] = "c.vals[:][" + k + ":" + k + "]"
			if byColumn {
				args[i] = "c.vals[" + k + ":" + k + "][:]"
			}
		}
		names := make([]string, len(columns))
		for i := range columns {
			names[i] = "v" + strconv.Itoa(i+1)
		}
		return "unnest(" + strings.Join(args, ", ") + ") AS u(" + strings.Join(names, ", ") + ")"
	}
	return sql + `
		UNION ALL
		SELECT ` + strings.Join(out, ", ") + ` FROM ` + w.log + ` c CROSS JOIN LATERAL ` + slice(true) + w.where + ` AND c.op IN ('n', 'o')
		UNION ALL
		SELECT ` + strings.Join(out, ", ") + ` FROM ` + w.log + ` c CROSS JOIN LATERAL ` + slice(false) + w.where + ` AND c.op IN ('i', 'd')`
}

// Missing returns those of columns the window's images do not hold (see
// Window.Columns): a reader that needs one cannot read its changes from
// the window.
func (w Window) Missing(columns []string) []string {
	if w.Columns == nil {
		return nil
	}
	var out []string
	for _, c := range columns {
		if !slices.Contains(w.Columns, c) {
			out = append(out, c)
		}
	}
	return out
}

// Window reads, inside tx, what source changed after since and up to tx's
// own snapshot: the change log entries visible in tx's snapshot and not
// visible in since. tx must be REPEATABLE READ (or SERIALIZABLE), so that
// its snapshot is the one the run reads its sources with, and Position
// (that snapshot) is what to store with SavePosition in the transaction
// that commits the run: successive windows then neither skip nor repeat a
// change, including changes of transactions in flight at either read.
//
// A window is not Known, and the run must read the source whole, when since
// is "", the source is not tracked, its tracking was installed or
// re-installed after since, the log was trimmed past since, a tracked
// column was altered or the triggers removed, the table was rewritten
// since (see Position), or the window holds an 'F' (a TRUNCATE or a full
// rewrite). Position is set in every case.
func (l *Log) Window(ctx context.Context, tx pgx.Tx, source string, since Position) (Window, error) {
	var pos, iso, trig string
	var node *uint32
	if err := tx.QueryRow(ctx, `SELECT pg_current_snapshot()::text, current_setting('transaction_isolation'),
		(SELECT pg_relation_filenode(relid)::pg_catalog.int8 FROM `+l.sources()+` WHERE source = $1 AND relid IS NOT NULL), `+l.triggerStateSQL(),
		source, l.triggerNames(source)).Scan(&pos, &iso, &node, &trig); err != nil {
		return Window{}, fmt.Errorf("changelog: window of %q: %w", source, err)
	}
	if iso == "read committed" || iso == "read uncommitted" {
		return Window{}, ErrNotRepeatableRead
	}
	w := Window{Position: Position(pos)}
	if node != nil {
		trig = stateHash(trig)
		w.Position += Position("@" + strconv.FormatUint(uint64(*node), 10) + "." + trig)
	}
	if since == "" {
		w.Reason = ReasonNoPosition
		return w, nil
	}
	from, err := parsePosition(since)
	if err != nil {
		return Window{}, err
	}
	to, err := parsePosition(w.Position)
	if err != nil {
		return Window{}, err
	}
	if from.xmax > to.xmax {
		w.Reason = ReasonAhead
		return w, nil
	}
	var (
		relid     *uint32
		columns   []string
		types     []string
		sig       *string
		installed bool
		below     string
		at        string
	)
	err = tx.QueryRow(ctx, `SELECT relid, columns, types, signature,
			pg_visible_in_snapshot(installed_xid, $2::pg_snapshot), trimmed_below::text, coalesce(trimmed_snapshot, '')
		FROM `+l.sources()+` WHERE source = $1`, source, from.text).
		Scan(&relid, &columns, &types, &sig, &installed, &below, &at)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		w.Reason = ReasonNotTracked
		return w, nil
	case err != nil:
		return Window{}, fmt.Errorf("changelog: window of %q: %w", source, err)
	case !installed:
		w.Reason = ReasonInstalled
		return w, nil
	}
	if relid != nil {
		w.Columns = columns
	}
	if trimmed, err := trimmedBefore(from, below, at); err != nil {
		return Window{}, fmt.Errorf("changelog: window of %q: %w", source, err)
	} else if trimmed {
		w.Reason = ReasonTrimmed
		return w, nil
	}
	if relid != nil {
		ok, err := l.triggersInstalled(ctx, tx, source, *relid)
		if err != nil {
			return Window{}, fmt.Errorf("changelog: window of %q: %w", source, err)
		}
		now, _, missing, err := signature(ctx, tx, *relid, columns)
		if err != nil {
			return Window{}, fmt.Errorf("changelog: window of %q: %w", source, err)
		}
		if !ok || len(missing) > 0 || sig == nil || now != *sig {
			w.Reason = ReasonAltered
			return w, nil
		}
	}
	const where = ` WHERE c.source = $1 AND c.xid >= $2::xid8 AND c.xid < $3::xid8
		AND NOT pg_visible_in_snapshot(c.xid, $4::pg_snapshot) AND pg_visible_in_snapshot(c.xid, $5::pg_snapshot)`
	args := []any{source, strconv.FormatUint(from.xmin, 10), strconv.FormatUint(to.xmax, 10), from.text, to.text}
	var full bool
	if err := tx.QueryRow(ctx, `SELECT coalesce(sum(CASE WHEN c.op IN ('i', 'd') THEN array_length(c.vals, 1)
			WHEN c.op IN ('n', 'o') THEN array_length(c.vals, 2) ELSE 1 END)
			FILTER (WHERE c.op <> 'F'), 0), coalesce(bool_or(c.op = 'F'), false) FROM `+l.Table()+` c`+where, args...).
		Scan(&w.Images, &full); err != nil {
		return Window{}, fmt.Errorf("changelog: window of %q: %w", source, err)
	}
	if full {
		w.Images = 0
		w.Reason = ReasonFull
		return w, nil
	}
	if relid != nil && (node == nil || from.node != *node) {
		w.Images = 0
		w.Reason = ReasonRewritten
		return w, nil
	}
	if relid != nil && from.triggers != trig {
		w.Images = 0
		w.Reason = ReasonAltered
		return w, nil
	}
	w.Known = true
	w.where, w.log = where, l.Table()
	w.SQL = `SELECT c.op, c.image FROM ` + l.Table() + ` c` + where + ` AND c.op IN ('I', 'D')`
	if relid != nil {
		// A tracked table's images are recorded compactly: a row of
		// vals per column (or, from triggers of earlier versions, per
		// image).
		w.SQL += `
		UNION ALL
		SELECT CASE c.op WHEN 'n' THEN 'I' ELSE 'D' END::"char", ` + images(columns, types) + `
		FROM ` + l.Table() + ` c CROSS JOIN LATERAL ` + unnestVals(len(columns), true) + where + ` AND c.op IN ('n', 'o')
		UNION ALL
		SELECT upper(c.op::text)::"char", ` + images(columns, types) + `
		FROM ` + l.Table() + ` c CROSS JOIN LATERAL ` + unnestVals(len(columns), false) + where + ` AND c.op IN ('i', 'd')`
	}
	w.Args = args
	return w, nil
}

// SavePosition stores position as what output read of source, in tx (the
// transaction that commits the output's run).
func (l *Log) SavePosition(ctx context.Context, tx pgx.Tx, output, source, position string) error {
	return l.SavePositions(ctx, tx, output, map[string]string{source: position})
}

// SavePositions stores positions (by source id) as what output read of
// each source, in tx, in one statement: as SavePosition for each.
func (l *Log) SavePositions(ctx context.Context, tx pgx.Tx, output string, positions map[string]string) error {
	if len(positions) == 0 {
		return nil
	}
	srcs := slices.Sorted(maps.Keys(positions))
	pos := make([]string, len(srcs))
	for i, src := range srcs {
		if output == "" || src == "" || positions[src] == "" {
			return fmt.Errorf("%w: save position: output, source and position must be set", ErrInvalid)
		}
		pos[i] = positions[src]
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+l.positions()+` (dataset_id, source_id, position, updated_at)
		SELECT $1, s, p, now() FROM unnest($2::text[], $3::text[]) AS u(s, p)
		ON CONFLICT (dataset_id, source_id) DO UPDATE SET position = excluded.position, updated_at = excluded.updated_at`,
		output, srcs, pos); err != nil {
		return fmt.Errorf("changelog: save positions of %q: %w", output, err)
	}
	return nil
}

// Positions returns the stored positions of output, by source id.
func (l *Log) Positions(ctx context.Context, q Querier, output string) (map[string]string, error) {
	rows, err := q.Query(ctx, `SELECT source_id, position FROM `+l.positions()+` WHERE dataset_id = $1`, output)
	if err != nil {
		return nil, fmt.Errorf("changelog: positions of %q: %w", output, err)
	}
	m := map[string]string{}
	var s, p string
	_, err = pgx.ForEachRow(rows, []any{&s, &p}, func() error {
		m[s] = p
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("changelog: positions of %q: %w", output, err)
	}
	return m, nil
}

type snapshot struct {
	text       string // the pg_snapshot: without a "pg:" prefix or a file node
	xmin, xmax uint64
	xip        []uint64
	node       uint32 // the table's file node after "@"; 0 when none
	triggers   string // the hash of the tracking triggers' state after the file node and "."
}

// visible is pg_visible_in_snapshot.
func (s snapshot) visible(x uint64) bool {
	return x < s.xmin || (x < s.xmax && !slices.Contains(s.xip, x))
}

// trimmedBefore reports whether the source's trim bound (trimmed_below and
// trimmed_snapshot as text) may have deleted an entry since needs.
func trimmedBefore(since snapshot, below, at string) (bool, error) {
	b, err := strconv.ParseUint(below, 10, 64)
	if err != nil || b == 0 {
		return false, err
	}
	trim, err := parsePosition(Position(at))
	if err != nil {
		return false, err
	}
	return trimmedPast(since, b, trim), nil
}

// parsePosition parses a pg_snapshot's text form, with a file node after
// "@" or not.
func parsePosition(p Position) (snapshot, error) {
	s := strings.TrimPrefix(string(p), "pg:")
	bad := fmt.Errorf("%w: position %q is not a pg_snapshot", ErrInvalid, string(p))
	var node uint64
	var triggers string
	if at := strings.IndexByte(s, '@'); at >= 0 {
		n, h, _ := strings.Cut(s[at+1:], ".")
		var err error
		if node, err = strconv.ParseUint(n, 10, 32); err != nil || node == 0 {
			return snapshot{}, bad
		}
		s, triggers = s[:at], h
	}
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return snapshot{}, bad
	}
	xmin, err1 := strconv.ParseUint(parts[0], 10, 64)
	xmax, err2 := strconv.ParseUint(parts[1], 10, 64)
	if err1 != nil || err2 != nil || xmin > xmax {
		return snapshot{}, bad
	}
	var xip []uint64
	if parts[2] != "" {
		for _, x := range strings.Split(parts[2], ",") {
			v, err := strconv.ParseUint(x, 10, 64)
			if err != nil || v < xmin || v >= xmax {
				return snapshot{}, bad
			}
			xip = append(xip, v)
		}
	}
	return snapshot{text: s, xmin: xmin, xmax: xmax, xip: xip, node: uint32(node), triggers: triggers}, nil
}
