package changelog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultSchema is the control-plane schema used when New is given "".
const DefaultSchema = "lakewrite"

// Querier runs statements: a *pgxpool.Pool, a *pgx.Conn and a pgx.Tx all
// satisfy it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// DB is a Querier that can begin a transaction (a savepoint on a pgx.Tx).
type DB interface {
	Querier
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Errors callers branch on; every error of the package wraps one of these
// or a database error.
var (
	// ErrInvalid: bad input (an empty source id, a table or column that
	// does not exist, a malformed position). Nothing was changed.
	ErrInvalid = errors.New("changelog: invalid input")
	// ErrNotRepeatableRead: Window was given a transaction whose snapshot
	// is per statement (READ COMMITTED).
	ErrNotRepeatableRead = errors.New("changelog: Window needs a REPEATABLE READ or SERIALIZABLE transaction")
	// ErrKind: the source id is recorded as the other kind of source (a
	// tracked relation given to RegisterSource, or a row-store source given
	// to Untrack).
	ErrKind = errors.New("changelog: source is of another kind")
)

// Log is the change log of one control-plane schema. It holds no
// connection and no state beyond the schema's name; share it freely.
type Log struct {
	schema string // unquoted
	q      string // quoted schema
	chunk  int    // images per log entry of a trigger (0: defaultCaptureChunk)
}

// New returns the change log of the control-plane schema (""
// means DefaultSchema), migrated by ledger.Migrate.
func New(schema string) *Log {
	if schema == "" {
		schema = DefaultSchema
	}
	return &Log{schema: schema, q: pgx.Identifier{schema}.Sanitize()}
}

// Table returns the change log's table, schema-qualified and quoted, for
// writers of row-store change records:
//
//	INSERT INTO <Table()> (source, op, image) VALUES ($1, 'I', $2)
//
// in the transaction of the write (xid defaults to that transaction's id).
func (l *Log) Table() string { return l.q + ".change_log" }

func (l *Log) sources() string   { return l.q + ".change_sources" }
func (l *Log) positions() string { return l.q + ".refresh_positions" }
func (l *Log) marks() string     { return l.q + ".change_log_marks" }

// RegisterSource records source as a row-store dataset whose writes record
// change images in the change log (see the package doc for what the writers
// must then do). Call it in a transaction of q or with q itself; the
// registration's transaction id becomes the source's installed_xid: a reader
// whose position does not see it reads the source whole. Registering a
// registered row-store source again changes nothing; a source id tracked as
// a relation is ErrKind.
func (l *Log) RegisterSource(ctx context.Context, q Querier, source string) error {
	if source == "" {
		return fmt.Errorf("%w: empty source id", ErrInvalid)
	}
	var relation *string
	err := q.QueryRow(ctx, `WITH ins AS (
		INSERT INTO `+l.sources()+` (source, installed_xid) VALUES ($1, pg_current_xact_id())
		ON CONFLICT (source) DO NOTHING RETURNING relation)
		SELECT relation FROM ins
		UNION ALL
		SELECT relation FROM `+l.sources()+` WHERE source = $1 AND NOT EXISTS (SELECT FROM ins)`, source).Scan(&relation)
	if err != nil {
		return fmt.Errorf("changelog: register %q: %w", source, err)
	}
	if relation != nil {
		return fmt.Errorf("%w: %q is a tracked relation (%s)", ErrKind, source, *relation)
	}
	return nil
}

// names returns the per-source function and trigger name stem: a hash of
// the schema and the source, so any source id gives valid, distinct names.
func (l *Log) stem(source string) string {
	h := sha256.Sum256([]byte(l.schema + "\x00" + source))
	return hex.EncodeToString(h[:8])
}

// quoteLiteral quotes s as a SQL string literal whatever
// standard_conforming_strings says (as libpq's PQescapeLiteral does).
func quoteLiteral(s string) string {
	if strings.Contains(s, `\`) {
		return ` E'` + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `'`, `''`) + `'`
	}
	return `'` + strings.ReplaceAll(s, `'`, `''`) + `'`
}
