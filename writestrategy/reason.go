package writestrategy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lakewrite/lakewrite/ledger"
)

// ErrSinkChanged: an output's storage (its sink, hence its write mode)
// changed while it was being written, a writer flag flipped between the
// write's planning and its intent. Nothing was written; the write is safe
// to retry as it is (the retry plans for the new storage).
var ErrSinkChanged = errors.New("writestrategy: output changed storage while being written; retry")

// ErrServerTimeout matches every *ServerTimeoutError.
var ErrServerTimeout = errors.New("writestrategy: a server timeout ended the write")

// ServerTimeoutError names the server setting that ended a write: one of
// idle_in_transaction_session_timeout (SQLSTATE 25P03),
// statement_timeout (57014), lock_timeout (55P03), idle_session_timeout
// (57P05) or transaction_timeout (25P04). It matches ErrServerTimeout and
// unwraps to the error the write failed with.
//
// When the server's message reached the client, the reason is certain.
// When the server closed the session and its message was lost with the
// connection (the write then fails with a transport error, e.g. a broken
// pipe, or, when the session held the write's intent, with
// ledger.ErrLostHold), the reason is inferred: Inferred is set, and Setting names a
// session timeout of the server (as a new session of the dispatcher's
// database sees it) that the write ran longer than. The Iceberg arm keeps
// its compute transaction open, idle, while the client encodes and
// uploads the rows it read: idle_in_transaction_session_timeout must be
// longer than that (or off for the writers' role).
type ServerTimeoutError struct {
	Setting  string // the setting's name, e.g. "idle_in_transaction_session_timeout"
	SQLState string // the SQLSTATE the server reports it with
	Value    string // the setting's value as the server shows it ("2s"), when read
	Inferred bool   // the server's message was lost: inferred from the settings
	Err      error
}

func (e *ServerTimeoutError) Error() string {
	what := "the server's " + e.Setting
	if e.Value != "" {
		what += " (" + e.Value + ")"
	}
	if e.Inferred {
		return fmt.Sprintf("writestrategy: the server closed the session; the write ran longer than %s (SQLSTATE %s), which likely ended it: raise it for the writers' role or database: %v",
			what, e.SQLState, e.Err)
	}
	return fmt.Sprintf("writestrategy: %s ended the write (SQLSTATE %s): %v", what, e.SQLState, e.Err)
}

// Is reports ErrServerTimeout.
func (e *ServerTimeoutError) Is(target error) bool { return target == ErrServerTimeout }

func (e *ServerTimeoutError) Unwrap() error { return e.Err }

// timeoutCodes are the SQLSTATEs of the server's timeouts, with the
// settings they come from and the words of their messages (a code some
// other event shares, such as 57014 for a cancel, is named only when the
// message says it).
var timeoutCodes = map[string]struct{ setting, says string }{
	"25P03": {"idle_in_transaction_session_timeout", ""},
	"57014": {"statement_timeout", "statement timeout"},
	"55P03": {"lock_timeout", "lock timeout"},
	"57P05": {"idle_session_timeout", ""},
	"25P04": {"transaction_timeout", ""},
}

// sessionTimeouts are the settings that end a session (inferred from the
// write's duration when their message is lost), most likely first.
var sessionTimeouts = []struct{ setting, code string }{
	{"idle_in_transaction_session_timeout", "25P03"},
	{"transaction_timeout", "25P04"},
	{"idle_session_timeout", "57P05"},
}

// reasonWait bounds the query of the server's settings after a transport
// error.
const reasonWait = 2 * time.Second

// nameReason returns err naming the server timeout that caused it (a
// *ServerTimeoutError), when one did; err otherwise. started is when the
// write began. A busy dataset (ledger.ErrBusy) and the caller's own
// context ending are never renamed.
func (d *Dispatcher) nameReason(ctx context.Context, started time.Time, err error) error {
	if err == nil || ctx.Err() != nil || errors.Is(err, ledger.ErrBusy) || errors.Is(err, ErrServerTimeout) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if c, ok := timeoutCodes[pgErr.Code]; ok && (c.says == "" || strings.Contains(pgErr.Message, c.says)) {
			return &ServerTimeoutError{Setting: c.setting, SQLState: pgErr.Code, Err: err}
		}
		return err
	}
	if !transportError(err) && !errors.Is(err, ledger.ErrLostHold) {
		return err
	}
	q, ok := d.db.(interface {
		Query(context.Context, string, ...any) (pgx.Rows, error)
	})
	if !ok {
		return err
	}
	qctx, cancel := context.WithTimeout(ctx, reasonWait)
	defer cancel()
	ran := time.Since(started)
	names := make([]string, len(sessionTimeouts))
	for i, s := range sessionTimeouts {
		names[i] = s.setting
	}
	// pg_settings has no row for a setting the server does not know.
	rows, qerr := q.Query(qctx, `SELECT name, setting::pg_catalog.int8, current_setting(name)
		FROM pg_catalog.pg_settings WHERE name = ANY($1)`, names)
	if qerr != nil {
		return err
	}
	type setting struct {
		ms    int64
		shown string
	}
	set := map[string]setting{}
	for rows.Next() {
		var name string
		var v setting
		if rows.Scan(&name, &v.ms, &v.shown) == nil {
			set[name] = v
		}
	}
	if rows.Err() != nil {
		return err
	}
	for _, s := range sessionTimeouts {
		if v := set[s.setting]; v.ms > 0 && time.Duration(v.ms)*time.Millisecond <= ran {
			return &ServerTimeoutError{Setting: s.setting, SQLState: s.code, Value: v.shown, Inferred: true, Err: err}
		}
	}
	return err
}

// transportError reports an error of the connection itself (the server
// closed it, the network failed), not one the server reported.
func transportError(err error) bool {
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNRESET), errors.Is(err, net.ErrClosed):
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset")
}
