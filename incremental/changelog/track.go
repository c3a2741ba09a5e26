package changelog

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Trigger name suffixes, one trigger per kind of statement.
var triggerKinds = []struct{ suffix, event, referencing string }{
	{"i", "INSERT", "REFERENCING NEW TABLE AS lw_new"},
	{"u", "UPDATE", "REFERENCING OLD TABLE AS lw_old NEW TABLE AS lw_new"},
	{"d", "DELETE", "REFERENCING OLD TABLE AS lw_old"},
	{"t", "TRUNCATE", ""},
}

// Track installs change tracking of table under the source id: a function
// in the control-plane schema and, on table, statement-level AFTER INSERT,
// UPDATE and DELETE triggers with transition tables that record the images
// of columns, and an AFTER TRUNCATE trigger that records an 'F'.
//
// table is a table's name as SQL writes it (schema-qualified or found by
// the search_path, quoted where needed); a partitioned table, a view or a
// foreign table is ErrInvalid, as are columns the table does not have.
// Tracking a source again with the same table and columns changes nothing
// (but for triggers installed by an earlier version of this package, which
// it replaces with the current ones, readers' positions staying valid);
// with other columns or another table it replaces the triggers and records
// a new installed_xid, so readers whose position predates it read the
// source whole once. Track waits for the transactions writing the table to
// end (CREATE TRIGGER's lock) and needs only the TRIGGER privilege on it,
// plus the right to create functions in the control-plane schema.
func (l *Log) Track(ctx context.Context, db DB, source, table string, columns []string) error {
	if source == "" {
		return fmt.Errorf("%w: empty source id", ErrInvalid)
	}
	if len(columns) == 0 {
		return fmt.Errorf("%w: track %q: no columns", ErrInvalid, source)
	}
	for i, c := range columns {
		if c == "" || slices.Contains(columns[:i], c) {
			return fmt.Errorf("%w: track %q: column %q empty or repeated", ErrInvalid, source, c)
		}
	}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var (
			relid    uint32
			relation string
			relkind  string
		)
		err := tx.QueryRow(ctx, `SELECT c.oid, format('%I.%I', n.nspname, c.relname), c.relkind::text
			FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			WHERE c.oid = pg_catalog.to_regclass($1)`, table).Scan(&relid, &relation, &relkind)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: track %q: no table %q", ErrInvalid, source, table)
		}
		if err != nil {
			return err
		}
		if relkind != "r" {
			return fmt.Errorf("%w: track %q: %s is not a plain table (a partitioned table is tracked partition by partition)", ErrInvalid, source, relation)
		}
		sig, types, missing, err := signature(ctx, tx, relid, columns)
		if err != nil {
			return err
		}
		if len(missing) > 0 {
			return fmt.Errorf("%w: track %q: %s has no column %s", ErrInvalid, source, relation, strings.Join(missing, ", "))
		}

		var (
			oldRelid    *uint32
			oldRelation *string
			oldSig      *string
			oldFunction *string
		)
		err = tx.QueryRow(ctx, `SELECT relid, relation, signature, function FROM `+l.sources()+` WHERE source = $1 FOR UPDATE`, source).
			Scan(&oldRelid, &oldRelation, &oldSig, &oldFunction)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		case oldRelation == nil:
			return fmt.Errorf("%w: %q is a row-store source", ErrKind, source)
		}
		fn := l.q + "." + pgx.Identifier{"changelog_" + l.stem(source)}.Sanitize()
		body := l.captureBody(source, columns)
		upgrade := false
		if oldRelid != nil && *oldRelid == relid && oldSig != nil && *oldSig == sig {
			ok, err := l.triggersInstalled(ctx, tx, source, relid)
			if err != nil {
				return err
			}
			if ok {
				// Tracked as asked. Triggers of an earlier version (another
				// body) are replaced in this transaction, whose DROP locks
				// the table against writers until the new triggers commit:
				// no change is missed, and readers' positions stay valid.
				var current string
				if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT prosrc FROM pg_catalog.pg_proc
					WHERE oid = pg_catalog.to_regprocedure($1)), '')`, *oldFunction+"()").Scan(&current); err != nil {
					return err
				}
				if current == body {
					return nil
				}
				upgrade = true
			}
		}
		var oldState string
		if upgrade {
			if oldState, err = l.triggerState(ctx, tx, source); err != nil {
				return err
			}
		}
		if oldFunction != nil {
			// CASCADE drops the triggers that call it, which needs only
			// the function's ownership (DROP TRIGGER needs the table's).
			if _, err := tx.Exec(ctx, `DROP FUNCTION IF EXISTS `+*oldFunction+`() CASCADE`); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, captureFunction(fn, body)); err != nil {
			return err
		}
		for _, k := range triggerKinds {
			name := pgx.Identifier{l.triggerName(source, k.suffix)}.Sanitize()
			if _, err := tx.Exec(ctx, `CREATE TRIGGER `+name+` AFTER `+k.event+` ON `+relation+` `+k.referencing+
				` FOR EACH STATEMENT EXECUTE FUNCTION `+fn+`()`); err != nil {
				return err
			}
			if err := enableAlways(ctx, tx, relation, name); err != nil {
				return err
			}
		}
		if upgrade {
			if _, err := tx.Exec(ctx, `UPDATE `+l.sources()+` SET function = $2 WHERE source = $1`, source, fn); err != nil {
				return err
			}
			// The replacement missed no change (this transaction locks
			// the table's writers out): the positions that saw the old
			// triggers as they were take the new ones' state.
			newState, err := l.triggerState(ctx, tx, source)
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `UPDATE `+l.positions()+` SET position = left(position, -16) || $3
				WHERE source_id = $1 AND right(position, 17) = '.' || $2`, source, oldState, newState)
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO `+l.sources()+` AS s (source, relation, relid, columns, function, signature, types, installed_xid, installed_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, pg_current_xact_id(), now())
			ON CONFLICT (source) DO UPDATE SET relation = excluded.relation, relid = excluded.relid, columns = excluded.columns,
				function = excluded.function, signature = excluded.signature, types = excluded.types,
				installed_xid = excluded.installed_xid, installed_at = excluded.installed_at`,
			source, relation, relid, columns, fn, sig, types)
		return err
	})
	if err != nil {
		return fmt.Errorf("changelog: track %q on %s: %w", source, table, err)
	}
	return nil
}

// Untrack removes the recording of source: the triggers and function of a
// tracked relation, the source's registration and its change log entries.
// An unknown source is not an error. Readers of the source read it whole
// from then on ("not tracked").
func (l *Log) Untrack(ctx context.Context, db DB, source string) error {
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var fn *string
		err := tx.QueryRow(ctx, `DELETE FROM `+l.sources()+` WHERE source = $1 RETURNING function`, source).Scan(&fn)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if fn != nil {
			if _, err := tx.Exec(ctx, `DROP FUNCTION IF EXISTS `+*fn+`() CASCADE`); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `DELETE FROM `+l.Table()+` WHERE source = $1`, source)
		return err
	})
	if err != nil {
		return fmt.Errorf("changelog: untrack %q: %w", source, err)
	}
	return nil
}

func (l *Log) triggerName(source, suffix string) string {
	return "lakewrite_changelog_" + l.stem(source) + "_" + suffix
}

// enableAlways makes trigger name of relation fire in every session,
// those with session_replication_role = replica too (a logical
// replication subscriber applying changes, a bulk load skipping foreign
// key checks), when the caller owns the table; with only the TRIGGER
// privilege the trigger keeps the default, and writes made in replica
// mode are not recorded.
func enableAlways(ctx context.Context, tx pgx.Tx, relation, name string) error {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return err
	}
	_, err = sp.Exec(ctx, `ALTER TABLE `+relation+` ENABLE ALWAYS TRIGGER `+name)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42501" { // insufficient_privilege: not the owner
		return sp.Rollback(ctx)
	}
	if err != nil {
		_ = sp.Rollback(ctx)
		return err
	}
	return sp.Commit(ctx)
}

// triggerNames are the names of source's triggers.
func (l *Log) triggerNames(source string) []string {
	names := make([]string, len(triggerKinds))
	for i, k := range triggerKinds {
		names[i] = l.triggerName(source, k.suffix)
	}
	return names
}

// triggerStateSQL is the SQL expression of the state of the triggers $2
// (their names) of source $1: each one's name, catalog row version (xmin)
// and enabled state, "" when none exists. ALTER TABLE ... DISABLE and ENABLE TRIGGER write a new row
// version, so a trigger disabled and enabled again since a read has
// another state.
func (l *Log) triggerStateSQL() string {
	return `coalesce((SELECT string_agg(t.tgname || ':' || t.xmin::text || ':' || t.tgenabled::text, ',' ORDER BY t.tgname)
		FROM pg_catalog.pg_trigger t WHERE t.tgrelid = (SELECT s.relid FROM ` + l.sources() + ` s WHERE s.source = $1) AND t.tgname = ANY($2)), '')`
}

// triggerState reads the state of source's triggers (triggerStateSQL) as
// the hash a position holds.
func (l *Log) triggerState(ctx context.Context, q Querier, source string) (string, error) {
	var st string
	err := q.QueryRow(ctx, `SELECT `+l.triggerStateSQL(), source, l.triggerNames(source)).Scan(&st)
	return stateHash(st), err
}

// stateHash is the hash of a trigger state a position holds.
func stateHash(state string) string {
	h := fnv.New64a()
	h.Write([]byte(state))
	return fmt.Sprintf("%016x", h.Sum64())
}

// triggersInstalled reports whether the four triggers of source are on
// relid and enabled.
func (l *Log) triggersInstalled(ctx context.Context, q Querier, source string, relid uint32) (bool, error) {
	names := l.triggerNames(source)
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_trigger
		WHERE tgrelid = $1 AND tgname = ANY($2) AND tgenabled <> 'D'`, relid, names).Scan(&n)
	return n == len(names), err
}

// signature describes columns of relid as attnum:name:type, so that a
// dropped, renamed, re-added or retyped column changes it; types are their
// types, schema-qualified and quoted; missing lists the columns relid does
// not have.
func signature(ctx context.Context, q Querier, relid uint32, columns []string) (sig string, types, missing []string, err error) {
	rows, err := q.Query(ctx, `SELECT c.name, a.attnum || ':' || a.attname || ':' || a.atttypid || ':' || a.atttypmod,
			quote_ident(tn.nspname) || '.' || quote_ident(t.typname)
		FROM unnest($2::text[]) WITH ORDINALITY AS c(name, i)
		LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = $1 AND a.attname = c.name AND a.attnum > 0 AND NOT a.attisdropped
		LEFT JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
		LEFT JOIN pg_catalog.pg_namespace tn ON tn.oid = t.typnamespace
		ORDER BY c.i`, relid, columns)
	if err != nil {
		return "", nil, nil, err
	}
	var parts []string
	for rows.Next() {
		var name string
		var part, typ *string
		if err := rows.Scan(&name, &part, &typ); err != nil {
			rows.Close()
			return "", nil, nil, err
		}
		if part == nil {
			missing = append(missing, name)
			continue
		}
		parts = append(parts, *part)
		types = append(types, *typ)
	}
	if err := rows.Err(); err != nil {
		return "", nil, nil, err
	}
	return strings.Join(parts, ","), types, missing, nil
}

// captureBody is the body of the trigger function of source. It records the tracked
// columns' values as text, column by column: a log entry (op 'n' for new
// images, 'o' for old ones) holds up to l.chunk images as a two-dimensional
// array with one row per tracked column; Window turns them back into jsonb
// images. Aggregating each column into one array costs a third of what an
// array per row did. Before that it checks that the tracked columns still
// exist: after an ALTER TABLE that dropped or renamed one it records an 'F'
// instead, so the user's statement never fails. The function pins the
// settings that shape the text of a value (DateStyle, IntervalStyle,
// extra_float_digits, bytea_output) so any reader parses it back exactly.
// SECURITY DEFINER: the table's writers need no right on the control-plane
// schema.
func (l *Log) captureBody(source string, columns []string) string {
	src := quoteLiteral(source)
	names := make([]string, len(columns))
	vals := make([]string, len(columns))
	aggs := make([]string, len(columns))
	chunkAggs := make([]string, len(columns))
	for i, c := range columns {
		names[i] = quoteLiteral(c)
		vals[i] = "t." + pgx.Identifier{c}.Sanitize() + "::text AS c" + strconv.Itoa(i)
		aggs[i] = "array_agg(t." + pgx.Identifier{c}.Sanitize() + "::text)"
		chunkAggs[i] = "array_agg(s.c" + strconv.Itoa(i) + ")"
	}
	chunk := strconv.Itoa(l.captureChunk())
	// One entry for a statement of up to chunk rows; above that, entries of
	// chunk rows each (numbering the rows costs a window function).
	chunked := func(op, table string) string {
		return `INSERT INTO ` + l.Table() + ` (source, op, vals) SELECT ` + src + `, '` + op + `'::"char", ARRAY[` + strings.Join(chunkAggs, ", ") + `]
			FROM (SELECT ` + strings.Join(vals, ", ") + `, row_number() OVER () AS lw_n FROM ` + table + ` t) s GROUP BY (s.lw_n - 1) / ` + chunk + `;`
	}
	// whole aggregates at most chunk + 1 rows of table and yields its
	// entry when they are 1 to chunk: the statement's rows are counted in
	// the same pass that aggregates them.
	whole := func(op, table string) string {
		return `SELECT ` + src + `, '` + op + `'::"char", ARRAY[` + strings.Join(aggs, ", ") + `] FROM (SELECT * FROM ` + table + ` LIMIT ` + chunk + ` + 1) t
			HAVING count(*) BETWEEN 1 AND ` + chunk
	}
	// ins records the images of tables (an UPDATE's old and new ones have
	// as many rows): in one statement when they fit an entry each, else,
	// for a statement of no row or of more than chunk rows, in chunks.
	ins := func(ops, tables []string) string {
		var big, small []string
		for i := range ops {
			big = append(big, chunked(ops[i], tables[i]))
			small = append(small, whole(ops[i], tables[i]))
		}
		return `INSERT INTO ` + l.Table() + ` (source, op, vals) ` + strings.Join(small, " UNION ALL ") + `;
		IF NOT FOUND THEN
			` + strings.Join(big, "\n\t\t\t") + `
		END IF;`
	}
	log := l.Table()
	body := `
BEGIN
	IF TG_OP <> 'TRUNCATE' AND (SELECT count(*) FROM pg_catalog.pg_attribute WHERE attrelid = TG_RELID
			AND attname = ANY (ARRAY[` + strings.Join(names, ", ") + `]::text[]) AND attnum > 0 AND NOT attisdropped) <> ` + strconv.Itoa(len(columns)) + ` THEN
		INSERT INTO ` + log + ` (source, op) VALUES (` + src + `, 'F');
	ELSIF TG_OP = 'INSERT' THEN
		` + ins([]string{"n"}, []string{"lw_new"}) + `
	ELSIF TG_OP = 'UPDATE' THEN
		` + ins([]string{"o", "n"}, []string{"lw_old", "lw_new"}) + `
	ELSIF TG_OP = 'DELETE' THEN
		` + ins([]string{"o"}, []string{"lw_old"}) + `
	ELSE
		INSERT INTO ` + log + ` (source, op) VALUES (` + src + `, 'F');
	END IF;
	RETURN NULL;
END
`
	return body
}

// captureFunction creates trigger function fn of body (captureBody).
func captureFunction(fn, body string) string {
	tag := "$lw$"
	for i := 0; strings.Contains(body, tag); i++ {
		tag = fmt.Sprintf("$lw%d$", i)
	}
	return `CREATE FUNCTION ` + fn + `() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex'
AS ` + tag + body + tag
}

// defaultCaptureChunk is the most images a trigger records in one log
// entry.
const defaultCaptureChunk = 100_000

func (l *Log) captureChunk() int {
	if l.chunk > 0 {
		return l.chunk
	}
	return defaultCaptureChunk
}

// images is the SQL expression of the jsonb image of a row of
// unnestVals (jsonb_build_object takes at most 100 arguments: 50 columns
// a call).
func images(columns, types []string) string {
	var calls []string
	for i := 0; i < len(columns); i += 50 {
		var args []string
		for j := i; j < min(i+50, len(columns)); j++ {
			args = append(args, quoteLiteral(columns[j])+", (u.v"+strconv.Itoa(j+1)+")::"+types[j])
		}
		calls = append(calls, "jsonb_build_object("+strings.Join(args, ", ")+")")
	}
	return strings.Join(calls, " || ")
}

// unnestVals is the FROM item of the images of an entry c: a row u per
// image, its n columns' values as u.v1..u.vn. Entries of op 'n' and 'o'
// hold a row of vals per column (byColumn); those of op 'i' and 'd',
// written by triggers installed by earlier versions, a row per image.
// Each column is sliced out of vals once and unnested: subscripting
// vals once per image would decompress the whole array for every image
// (quadratic in the entry's size).
func unnestVals(n int, byColumn bool) string {
	args := make([]string, n)
	names := make([]string, n)
	for j := range n {
		k := strconv.Itoa(j + 1)
		args[j] = "c.vals[:][" + k + ":" + k + "]"
		if byColumn {
			args[j] = "c.vals[" + k + ":" + k + "][:]"
		}
		names[j] = "v" + k
	}
	return "unnest(" + strings.Join(args, ", ") + ") AS u(" + strings.Join(names, ", ") + ")"
}
