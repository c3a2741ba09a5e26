package ledger

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/internal/vocab"
)

// DB is what the ledger needs from Postgres. A *pgxpool.Pool, a *pgx.Conn
// and a pgx.Tx all satisfy it. The ledger never closes or reconfigures it.
//
// Open, Commit and Abort each run in their own short transaction (begun with
// Begin; on a pgx.Tx that is a savepoint). Give the ledger a pool or a
// connection that is not inside a long transaction: the point of the intent
// is that it is visible to other processes before the write starts.
//
// Writer liveness (see the package documentation) needs a pool or a
// connection. A session lock needs a session on a direct connection: with
// a DB that also has the method Acquire(ctx) (*pgxpool.Conn, error), as a
// *pgxpool.Pool does, each open intent holds one acquired connection until
// it is committed, aborted or released, so the pool needs room for one
// extra connection per concurrent intent; with a *pgx.Conn the intent is
// held on that connection. Through a pooler intents are held by a lease
// instead, renewed on the pool (on a connection of the renewals' own for a
// *pgx.Conn). A pgx.Tx can hold neither: its intents have no liveness.
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
	// WaitTimeout bounds how long Open waits for another open intent of the
	// same dataset to end before returning an error matching ErrBusy. The caller's
	// context bounds it too. Default 30s.
	WaitTimeout time.Duration
	// Expectations run at every commit, in order; the first error vetoes.
	// They do not run for maintenance intents.
	Expectations []Expectation
	// Liveness says how an open intent shows that its writer is alive:
	// a session-level advisory lock on a direct connection, a lease
	// everywhere else (see the package documentation). Default
	// LivenessAuto.
	Liveness Liveness
	// Lease is how long an intent's lease lasts (database clock) when it
	// has one: a writer that stops renewing it (killed, cut off) frees its
	// dataset once it lapses. KeepAlive, With and WithTx renew it every
	// Lease/3 while the write runs; Alive renews it too. Default 30s; at
	// least 100ms.
	Lease time.Duration
	// cleanupTimeout bounds the clean-up calls the ledger makes after the
	// caller's work is done or failed (the abort in With and WithTx,
	// releasing a held connection). They run under context.WithoutCancel of
	// the caller's context, so a cancelled context still cleans up. 30s.
	cleanupTimeout time.Duration
	// ClientCheckInterval is set as client_connection_check_interval
	// (PostgreSQL 14 and later) on the session of every intent that holds
	// one: while a statement of the write runs on it, the server checks
	// this often that the writer is still connected, and when it is not,
	// ends the statement and the session, freeing the intent's lock (see
	// the package documentation). Default 1s; negative: not set. Older
	// servers ignore it.
	ClientCheckInterval time.Duration

	// lockTimeout bounds every lock wait inside the ledger's short
	// transactions (Postgres lock_timeout). Default 5s.
	lockTimeout time.Duration
	// minBackoff and maxBackoff bound the jittered exponential backoff
	// between Open attempts on a busy dataset. Defaults 10ms and 1s.
	minBackoff, maxBackoff time.Duration
}

// Liveness selects how the ledger tells a dead writer from a slow one.
type Liveness int

const (
	// LivenessAuto holds each open intent by a session-level advisory lock
	// when the ledger's connections reach PostgreSQL directly (the
	// connection's startup key names its own backend), and by a lease
	// otherwise (PgBouncer, Supavisor and other poolers, in any pool mode).
	// Through a pgx.Tx intents have no liveness.
	LivenessAuto Liveness = iota
	// LivenessLease holds every intent by a lease, never by a session
	// lock, whatever the connection.
	LivenessLease
	// LivenessOff is LivenessLease. It predates leases, when turning
	// session locks off left intents to recovery by age; intents without
	// a session lock are now held by a lease, which frees a dead writer's
	// dataset within Config.Lease.
	LivenessOff = LivenessLease
)

// DefaultLease is the default Config.Lease.
const DefaultLease = 30 * time.Second

// minLease is the shortest Config.Lease: a renewal every third of it must
// fit a round trip.
const minLease = 100 * time.Millisecond

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
	if c.lockTimeout <= 0 {
		c.lockTimeout = 5 * time.Second
	}
	if c.WaitTimeout <= 0 {
		c.WaitTimeout = 30 * time.Second
	}
	if c.minBackoff <= 0 {
		c.minBackoff = 10 * time.Millisecond
	}
	if c.maxBackoff <= 0 {
		c.maxBackoff = time.Second
	}
	if c.cleanupTimeout <= 0 {
		c.cleanupTimeout = 30 * time.Second
	}
	if c.ClientCheckInterval == 0 {
		c.ClientCheckInterval = time.Second
	}
	if c.Liveness != LivenessAuto && c.Liveness != LivenessLease {
		return nil, invalid("Config.Liveness %d: want LivenessAuto or LivenessLease", c.Liveness)
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.Lease < minLease {
		return nil, invalid("Config.Lease %s: want at least %s", c.Lease, minLease)
	}
	if c.maxBackoff < c.minBackoff {
		return nil, invalid("maximum backoff (%s) is below the minimum (%s)", c.maxBackoff, c.minBackoff)
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

// Maintenance is the write mode of a maintenance intent (snapshot expiry,
// compaction, ...). It carries no data: it serializes with the dataset's
// writers like any intent, and its commit stamps only the dataset's
// maintained_at and maintenance report.
//
// The other write modes are the facade's: facade.Replace (the commit sets
// the dataset's row count) and facade.Append (the commit adds to it).
// OpenParams.WriteMode is that same type, facade.WriteMode.
const Maintenance = vocab.Maintenance

// OpenParams describe a new intent.
type OpenParams struct {
	DatasetID string
	WriterID  string // e.g. "pipeline.output"
	// Sink is where the write goes: a sink.Sink, sink.Postgres or
	// sink.Iceberg (stored as "pg", "iceberg_native").
	Sink vocab.Sink
	// WriteMode is a facade.WriteMode: facade.Replace, facade.Append, or
	// [Maintenance] (stored as "replace", "append", "maintenance").
	WriteMode vocab.WriteMode
	// IdempotencyKey, when not empty, is stored on the intent; FindByKey
	// finds the newest committed intent of the dataset with that key, so a
	// retried request can return the earlier result instead of writing
	// again.
	IdempotencyKey string
	// Actor, when not empty, records on whose behalf the write is made (a
	// user or service principal the embedding service authenticated),
	// beside WriterID, the code path that writes. Read back as Txn.Actor.
	Actor string
	// Lookup, when set, lets Open reconcile at once an open intent whose
	// writer is gone (its session lock is no longer held, or its lease
	// lapsed) instead of
	// waiting for it: the intent is claimed, then rolled forward when
	// Lookup finds its write, aborted when the write is provably absent; a
	// Lookup error leaves it open and Open returns an error matching
	// ErrUnresolved and ErrBusy.
	// A dead maintenance intent is aborted without asking Lookup, with or
	// without one.
	Lookup Lookup
	// RecoverAfter, with Lookup, lets Open reconcile the same way an open
	// intent without liveness (opened through a pgx.Tx, before liveness
	// existed, or by a writer whose lock was refused) once it was opened at least
	// this long ago (database clock): such a holder's death cannot be
	// seen, only its age. Zero: Open waits for such a holder like a live
	// one (Sweep and Recover still reconcile it by age). Must not be
	// negative; make it longer than the slowest write.
	RecoverAfter time.Duration
	// NoWait makes Open return an error matching ErrBusy at once instead of waiting
	// while another intent holds the dataset (a maintenance run skips a
	// dataset a writer is busy with). Reconciling a dead holder is not
	// waiting: it still happens.
	NoWait bool
	// Reads are read-only queries sent on the intent's held session in the
	// round trip that takes its lock and inserts it, after the insert: the
	// first reads of the write, without a round trip of their own. Each
	// Scan is called with its query's rows, in order, before Open returns;
	// a Scan's error is its caller's (Open ignores it). They run only
	// when the intent is inserted that way (on its first attempt, with a
	// held session): a caller must not rely on them running, and reads
	// itself when its Scan was not called. A read the server refuses fails
	// Open (the insert it shares a statement sequence with is undone).
	// They must not write: they see the intent's insert and are not part of
	// any transaction of the caller's.
	Reads []Read

	// id is the transaction id, a UUID. Empty: the ledger mints one.
	// Opening the same id again while it is open returns the same intent,
	// unless a reconciler claimed it meanwhile (ErrFenced).
	id string
}

// Read is a query of OpenParams.Reads: SQL with its arguments, and the
// function its rows are handed to.
type Read struct {
	SQL  string
	Args []any
	Scan func(pgx.Rows) error
}

// Intent is an open write intent. Pass it back to Commit or Abort.
//
// An Intent returned by Open holds the dataset for its writer (a session
// lock on a dedicated connection, see the package documentation) until
// Commit or Abort returns, or Release is called: every Open must end in one
// of them. Copies of an Intent share that hold.
type Intent struct {
	ID        string
	DatasetID string
	WriterID  string
	Sink      vocab.Sink      // a sink.Sink
	WriteMode vocab.WriteMode // a facade.WriteMode, or Maintenance
	CreatedAt time.Time       // database clock

	idempotencyKey string // "" when none
	actor          string // "" when none
	// attempt is the fence: a commit must carry the attempt the intent had
	// when it was opened or claimed.
	attempt int64

	st *intentState // shared by copies; nil for an Intent rebuilt from a Txn
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
	// Schema, when not nil, replaces the dataset's declared schema. Not
	// allowed on a maintenance commit.
	Schema json.RawMessage
	// Report is the JSON report of a maintenance run, stored as the
	// dataset's last maintenance report. Only for maintenance intents; nil
	// leaves the previous report.
	Report json.RawMessage
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
	Sink        vocab.Sink      // a sink.Sink
	WriteMode   vocab.WriteMode // a facade.WriteMode, or Maintenance
	Status      Status
	RowCount    int64
	SnapshotID  int64     // 0 when none
	CommittedAt time.Time // zero unless committed
	Error       string
	Attempt     int64
	// Actor the intent was opened for (OpenParams.Actor); "" when none.
	Actor string

	createdAt      time.Time
	idempotencyKey string // the key the intent was opened with; "" when none
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
	case strings.TrimSpace(string(p.Sink)) == "":
		return invalid("sink is empty")
	case p.WriteMode != vocab.Replace && p.WriteMode != vocab.Append && p.WriteMode != Maintenance:
		return invalid("write mode %q: want %q, %q or %q", p.WriteMode, vocab.Replace, vocab.Append, Maintenance)
	case p.id != "" && !validID(p.id):
		return invalid("transaction id %q is not a UUID", p.id)
	case p.RecoverAfter < 0:
		return invalid("RecoverAfter %s is negative", p.RecoverAfter)
	}
	return nil
}

// validate checks an outcome for an intent of the given write mode. A
// maintenance outcome may leave CommittedAt zero (the ledger stamps now()).
func (o *Outcome) validate(mode vocab.WriteMode) error {
	maint := mode == Maintenance
	switch {
	case o.RowCount < 0:
		return invalid("row count %d is negative", o.RowCount)
	case o.CommittedAt.IsZero() && !maint:
		return invalid("commit time is zero: pass the commit result's time")
	case o.SnapshotID < 0:
		return invalid("snapshot id %d is negative", o.SnapshotID)
	case o.Schema != nil && maint:
		return invalid("a maintenance commit carries no schema")
	case o.Schema != nil && !json.Valid(o.Schema):
		return invalid("schema is not valid JSON")
	case o.Report != nil && !maint:
		return invalid("Outcome.Report is for maintenance intents only")
	case o.Report != nil && !json.Valid(o.Report):
		return invalid("maintenance report is not valid JSON")
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
	_, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, l.lockTimeoutSetting())
	return err
}

// clientCheckSetting is the client_connection_check_interval set on held
// sessions, in ms; "" when not set.
func (l *Ledger) clientCheckSetting() string {
	if l.cfg.ClientCheckInterval < 0 {
		return ""
	}
	return strconv.FormatInt(max(l.cfg.ClientCheckInterval.Milliseconds(), 1), 10)
}

// lockTimeoutSetting is the value of lock_timeout for the ledger's
// transactions.
func (l *Ledger) lockTimeoutSetting() string {
	return fmt.Sprintf("%dms", l.cfg.lockTimeout.Milliseconds())
}

// autocommit reports whether a statement run on db is a transaction of
// its own (a pool, or a connection outside any transaction block).
func autocommit(db DB) bool {
	switch c := db.(type) {
	case *pgxpool.Pool:
		return true
	case *pgx.Conn:
		return c.PgConn().TxStatus() == 'I'
	}
	return false
}

func (l *Ledger) table(name string) string { return l.schema + "." + name }

const txnColumns = `id::pg_catalog.text, dataset_id, writer_id, sink, write_mode, status, row_count,
	coalesce(snapshot_id, 0), created_at, committed_at, coalesce(error, ''), attempt, coalesce(idempotency_key, ''), coalesce(actor, '')`

func scanTxn(row pgx.Row, extra ...any) (Txn, error) {
	var t Txn
	var status string
	var committed *time.Time
	dest := []any{&t.ID, &t.DatasetID, &t.WriterID, &t.Sink, &t.WriteMode, &status,
		&t.RowCount, &t.SnapshotID, &t.createdAt, &committed, &t.Error, &t.Attempt, &t.idempotencyKey, &t.Actor}
	err := row.Scan(append(dest, extra...)...)
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
		return Txn{}, &stateError{id: id, kind: ErrIntentNotFound}
	}
	if err != nil {
		return Txn{}, fmt.Errorf("ledger: get intent %s: %w", id, err)
	}
	return t, nil
}

// intent returns the open intent t as an Intent value (for Commit/Abort).
// It holds nothing: it is how a reconciler commits or aborts an intent it
// did not open.
func (t Txn) intent() *Intent {
	return &Intent{ID: t.ID, DatasetID: t.DatasetID, WriterID: t.WriterID, Sink: t.Sink,
		WriteMode: t.WriteMode, idempotencyKey: t.idempotencyKey, actor: t.Actor, attempt: t.Attempt, CreatedAt: t.createdAt}
}

// FindByKey returns the newest committed intent of the dataset opened with
// the idempotency key, and whether there is one. It is an index lookup
// (dataset and key), whatever the length of the dataset's history. A
// retried request checks it first and returns the earlier result instead
// of writing again.
func (l *Ledger) FindByKey(ctx context.Context, datasetID, key string) (Txn, bool, error) {
	if datasetID == "" || key == "" {
		return Txn{}, false, invalid("FindByKey: dataset id and key must not be empty")
	}
	t, err := scanTxn(l.db.QueryRow(ctx, `SELECT `+txnColumns+` FROM `+l.table("pipeline_build_transactions")+`
		WHERE dataset_id = $1 AND idempotency_key = $2 AND status = 'committed'
		ORDER BY committed_at DESC, created_at DESC LIMIT 1`, datasetID, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return Txn{}, false, nil
	}
	if err != nil {
		return Txn{}, false, fmt.Errorf("ledger: find intent of dataset %q by key: %w", datasetID, err)
	}
	return t, true, nil
}
