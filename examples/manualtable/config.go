package manualtable

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
)

// DefaultWriterID is the writer id of manual-table writes, distinct from
// pipeline outputs so that flags and cutover lists can tell them apart.
const DefaultWriterID = "manual.table"

// Config configures the handler. DB, Ledger and Lakehouse are required;
// every other zero field means the documented default.
type Config struct {
	// DB is the Postgres pool holding the ledger's control-plane schema
	// (the same database the Ledger writes). The handler never closes it.
	DB ledger.DB
	// Ledger wraps every upload in a write intent. How long a concurrent
	// upload of the same dataset waits before a 409 is the ledger's
	// Config.WaitTimeout.
	Ledger *ledger.Ledger
	// Lakehouse receives the rows: a *facade.Facade, or a facadetest
	// double in tests.
	Lakehouse facade.Lakehouse
	// WriterID of the writes. Default DefaultWriterID ("manual.table").
	WriterID string
	// Workspace recorded in the snapshot summary. Default "".
	Workspace string
	// MaxUploadBytes bounds a request body. Default 256 MiB.
	MaxUploadBytes int64
	// MaxLineBytes bounds one NDJSON line. Default 1 MiB.
	MaxLineBytes int
	// BatchRows is the number of rows per Arrow record batch handed to the
	// lakehouse; it bounds the handler's memory per upload. Default 8192.
	BatchRows int
	// Logger receives one record per write (Info) and per server error
	// (Error). Default: discard.
	Logger *slog.Logger
	// Allocator for the record batches. Default memory.DefaultAllocator.
	Allocator memory.Allocator
	// BodyStallTimeout bounds how long one read of the request body may
	// wait for the client: an upload whose client stops sending (or
	// vanishes without closing the connection) fails after this long, its
	// intent is aborted and the dataset is free again. It is a stall bound,
	// not a bound on the whole upload: every read that makes progress
	// extends the deadline. Applied through http.ResponseController, so it
	// needs a server whose connections support read deadlines (net/http's
	// does). Default 30s.
	BodyStallTimeout time.Duration
	// Authorize, when set, is asked before a request touches a dataset:
	// it returns the identity of the caller (recorded on the upload's
	// ledger intent as its actor and in the snapshot summary as
	// lakewrite.meta.uploaded-by) or an error. An error wrapping
	// ErrUnauthenticated answers 401, any other error 403; either way
	// nothing is read or written. Nil: every request is allowed and no
	// identity is recorded (put the handler behind your own
	// authentication then).
	Authorize func(r *http.Request, datasetID string, action Action) (principal string, err error)
}

// Action is what a request does to a dataset, as Authorize sees it.
type Action string

// The actions of the routes.
const (
	ActionRead    Action = "read"    // GET /datasets/{id}
	ActionDeclare Action = "declare" // PUT /datasets/{id}
	ActionWrite   Action = "write"   // POST /datasets/{id}/rows
)

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.DB == nil:
		return c, errors.New("manualtable: Config.DB is nil: pass the pgx pool of the ledger's database")
	case c.Ledger == nil:
		return c, errors.New("manualtable: Config.Ledger is nil: pass ledger.New(pool, ...)")
	case c.Lakehouse == nil:
		return c, errors.New("manualtable: Config.Lakehouse is nil: pass a *facade.Facade (or a facadetest double)")
	case c.MaxUploadBytes < 0 || c.MaxLineBytes < 0 || c.BatchRows < 0 || c.BodyStallTimeout < 0:
		return c, errors.New("manualtable: Config.MaxUploadBytes, MaxLineBytes, BatchRows and BodyStallTimeout must not be negative (0 means the default)")
	}
	if c.WriterID == "" {
		c.WriterID = DefaultWriterID
	}
	if c.MaxUploadBytes == 0 {
		c.MaxUploadBytes = 256 << 20
	}
	if c.MaxLineBytes == 0 {
		c.MaxLineBytes = 1 << 20
	}
	if c.BatchRows == 0 {
		c.BatchRows = 8192
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Allocator == nil {
		c.Allocator = memory.DefaultAllocator
	}
	if c.BodyStallTimeout == 0 {
		c.BodyStallTimeout = 30 * time.Second
	}
	return c, nil
}
