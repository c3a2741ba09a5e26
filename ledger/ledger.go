package ledger

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what the ledger needs from Postgres. A *pgxpool.Pool, a *pgx.Conn
// and a pgx.Tx all satisfy it. The ledger never closes or reconfigures it.
//
// Open, Commit and Abort each run in their own short transaction (begun with
// Begin; on a pgx.Tx that is a savepoint). Give the ledger a pool or a
// connection that is not inside a long transaction: the point of the intent
// is that it is visible to other processes before the write starts.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Expectation checks a commit before it is stamped. It runs inside the
// commit transaction, after the intent row was updated and before the
// dataset is stamped; returning an error vetoes the commit: the intent is
// aborted with the error as its reason and the dataset is left unchanged.
// Check runs them without committing, so a writer can ask before it makes
// data visible elsewhere; they run again at Commit.
type Expectation func(ctx context.Context, tx pgx.Tx, c Commit) error

// Config configures a Ledger. The zero value is valid.
type Config struct {
	// Schema holding the control-plane tables. Default "lakewrite".
	Schema string
	// Logger receives one Info record per intent state change. Default:
	// discard.
	Logger *slog.Logger
	// LockTimeout bounds every lock wait inside the ledger's short
	// transactions (Postgres lock_timeout). Default 5s.
	LockTimeout time.Duration
	// WaitTimeout bounds how long Open waits for another open intent of the
	// same dataset to end before returning a *BusyError. The caller's
	// context bounds it too. Default 30s.
	WaitTimeout time.Duration
	// MinBackoff and MaxBackoff bound the jittered exponential backoff
	// between Open attempts on a busy dataset. Defaults 10ms and 1s.
	MinBackoff, MaxBackoff time.Duration
	// Expectations run at every commit, in order; the first error vetoes.
	Expectations []Expectation
}

// Ledger records write intents in Postgres. It is safe for concurrent use
// and holds no goroutines; all state is in the database.
type Ledger struct {
	db     DB
	cfg    Config
	schema string // quoted identifier
	log    *slog.Logger
}

// New returns a Ledger over db. It does not touch the database; call
// Migrate once (at deploy or start-up) to create the schema.
func New(db DB, cfg *Config) (*Ledger, error) {
	if db == nil {
		return nil, invalid("New: db is nil")
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.LockTimeout <= 0 {
		c.LockTimeout = 5 * time.Second
	}
	if c.WaitTimeout <= 0 {
		c.WaitTimeout = 30 * time.Second
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 10 * time.Millisecond
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = time.Second
	}
	if c.MaxBackoff < c.MinBackoff {
		return nil, invalid("Config.MaxBackoff (%s) is below MinBackoff (%s)", c.MaxBackoff, c.MinBackoff)
	}
	return &Ledger{db: db, cfg: c, schema: pgx.Identifier{c.Schema}.Sanitize(), log: c.Logger}, nil
}

// Schema returns the configured schema name (unquoted).
func (l *Ledger) Schema() string { return l.cfg.Schema }

// Status of an intent.
type Status string

// The states of an intent: open -> committed | aborted.
const (
	StatusOpen      Status = "open"
	StatusCommitted Status = "committed"
	StatusAborted   Status = "aborted"
)

// Write modes the ledger understands. An append adds its row count to the
// dataset's; a replace sets it.
const (
	ModeReplace = "replace"
	ModeAppend  = "append"
)

// OpenParams describe a new intent.
type OpenParams struct {
	// ID is the transaction id, a UUID. Empty: the ledger mints one. Pre-mint
	// it when the id must be known before Open returns (e.g. to record it
	// elsewhere first); opening the same id again while it is open returns
	// the same intent.
	ID        string
	DatasetID string
	WriterID  string // e.g. "pipeline.output"
	Sink      string // e.g. "pg" or "iceberg_native"
	WriteMode string // ModeReplace or ModeAppend
}

// Intent is an open write intent. Pass it back to Commit or Abort.
type Intent struct {
	ID        string
	DatasetID string
	WriterID  string
	Sink      string
	WriteMode string
	// Attempt is the fence: a commit must carry the attempt the intent had
	// when it was opened or claimed.
	Attempt   int64
	CreatedAt time.Time // database clock
}

// Outcome is what a finished write reports to Commit.
type Outcome struct {
	// RowCount written by this write, from the commit result (never a
	// recount of the target).
	RowCount int64
	// SnapshotID of the Iceberg snapshot; 0 when the sink has none.
	SnapshotID int64
	// CommittedAt is the commit time of the write (the snapshot's timestamp
	// for Iceberg). It becomes the intent's committed_at and the dataset's
	// source watermark. Required.
	CommittedAt time.Time
	// Schema, when not nil, replaces the dataset's declared schema.
	Schema json.RawMessage
}

// Commit is what an Expectation sees.
type Commit struct {
	Intent  Intent
	Outcome Outcome
}

// Txn is a ledger row as read back.
type Txn struct {
	ID          string
	DatasetID   string
	WriterID    string
	Sink        string
	WriteMode   string
	Status      Status
	RowCount    int64
	SnapshotID  int64 // 0 when none
	CreatedAt   time.Time
	CommittedAt time.Time // zero unless committed
	Error       string
	Attempt     int64
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// NewID mints a random (version 4) transaction id.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func validID(id string) bool { return uuidRE.MatchString(id) }

func (p *OpenParams) validate() error {
	switch {
	case strings.TrimSpace(p.DatasetID) == "":
		return invalid("dataset id is empty")
	case strings.TrimSpace(p.WriterID) == "":
		return invalid("writer id is empty")
	case strings.TrimSpace(p.Sink) == "":
		return invalid("sink is empty")
	case p.WriteMode != ModeReplace && p.WriteMode != ModeAppend:
		return invalid("write mode %q: want %q or %q", p.WriteMode, ModeReplace, ModeAppend)
	case p.ID != "" && !validID(p.ID):
		return invalid("transaction id %q is not a UUID", p.ID)
	}
	return nil
}

func (o *Outcome) validate() error {
	switch {
	case o.RowCount < 0:
		return invalid("row count %d is negative", o.RowCount)
	case o.CommittedAt.IsZero():
		return invalid("commit time is zero: pass the commit result's time")
	case o.SnapshotID < 0:
		return invalid("snapshot id %d is negative", o.SnapshotID)
	case o.Schema != nil && !json.Valid(o.Schema):
		return invalid("schema is not valid JSON")
	}
	return nil
}

func (i *Intent) validate() error {
	if i == nil || !validID(i.ID) {
		return invalid("intent is nil or has no valid id")
	}
	return nil
}

// setLockTimeout sets lock_timeout for the current transaction.
func (l *Ledger) setLockTimeout(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`,
		fmt.Sprintf("%dms", l.cfg.LockTimeout.Milliseconds()))
	return err
}

func (l *Ledger) table(name string) string { return l.schema + "." + name }

const txnColumns = `id::text, dataset_id, writer_id, sink, write_mode, status, row_count,
	coalesce(snapshot_id, 0), created_at, committed_at, coalesce(error, ''), attempt`

func scanTxn(row pgx.Row) (Txn, error) {
	var t Txn
	var status string
	var committed *time.Time
	err := row.Scan(&t.ID, &t.DatasetID, &t.WriterID, &t.Sink, &t.WriteMode, &status,
		&t.RowCount, &t.SnapshotID, &t.CreatedAt, &committed, &t.Error, &t.Attempt)
	t.Status = Status(status)
	if committed != nil {
		t.CommittedAt = *committed
	}
	return t, err
}

// Get returns the intent with the given id, in any state.
func (l *Ledger) Get(ctx context.Context, id string) (Txn, error) {
	if !validID(id) {
		return Txn{}, invalid("transaction id %q is not a UUID", id)
	}
	t, err := scanTxn(l.db.QueryRow(ctx, `SELECT `+txnColumns+` FROM `+l.table("pipeline_build_transactions")+` WHERE id = $1`, id))
	if err == pgx.ErrNoRows {
		return Txn{}, &StateError{ID: id, kind: ErrIntentNotFound}
	}
	if err != nil {
		return Txn{}, fmt.Errorf("ledger: get intent %s: %w", id, err)
	}
	return t, nil
}

// Intent returns the open intent t as an Intent value (for Commit/Abort).
func (t Txn) Intent() *Intent {
	return &Intent{ID: t.ID, DatasetID: t.DatasetID, WriterID: t.WriterID, Sink: t.Sink,
		WriteMode: t.WriteMode, Attempt: t.Attempt, CreatedAt: t.CreatedAt}
}
