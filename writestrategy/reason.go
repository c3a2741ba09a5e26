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

// ErrServerTimeout: a server setting ended the write: one of
// idle_in_transaction_session_timeout (SQLSTATE 25P03),
// statement_timeout (57014), lock_timeout (55P03), idle_session_timeout
// (57P05) or transaction_timeout (25P04). The error names the setting and
// its SQLSTATE, and unwraps to the error the write failed with.
//
// When the server's message reached the client, the reason is certain.
// When the server closed the session and its message was lost with the
// connection (the write then fails with a transport error, e.g. a broken
// pipe, or, when the session held the write's intent, with
// ledger.ErrLostHold), the reason is inferred: the error says the server
// closed the session and names, with its value, a session timeout of the
// server (as a new session of the dispatcher's database sees it) that the
// write ran longer than. The Iceberg arm keeps its compute transaction
// open, idle, while the client encodes and uploads the rows it read:
// idle_in_transaction_session_timeout must be longer than that (or off
// for the writers' role).
var ErrServerTimeout = errors.New("writestrategy: a server timeout ended the write")

// serverTimeoutError names setting, reported with SQLSTATE code, as what
// ended the write that failed with err. value is the setting's value as
// the server shows it ("2s"), when read; inferred says the server's
// message was lost and the reason was inferred from the settings. It
// matches ErrServerTimeout.
func serverTimeoutError(setting, code, value string, inferred bool, err error) error {
	what := "the server's " + setting
	if value != "" {
		what += " (" + value + ")"
	}
	if inferred {
		return fmt.Errorf("%w: the server closed the session; the write ran longer than %s (SQLSTATE %s), which likely ended it: raise it for the writers' role or database: %w",
			ErrServerTimeout, what, code, err)
	}
	return fmt.Errorf("%w: %s ended the write (SQLSTATE %s): %w", ErrServerTimeout, what, code, err)
}

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

// nameReason returns err naming the server timeout that caused it (an
// error matching ErrServerTimeout), when one did; err otherwise. started is when the
// write began. A busy dataset (ledger.ErrBusy) and the caller's own
// context ending are never renamed.
func (d *Dispatcher) nameReason(ctx context.Context, started time.Time, err error) error {
	if err == nil || ctx.Err() != nil || errors.Is(err, ledger.ErrBusy) || errors.Is(err, ErrServerTimeout) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if c, ok := timeoutCodes[pgErr.Code]; ok && (c.says == "" || strings.Contains(pgErr.Message, c.says)) {
			return serverTimeoutError(c.setting, pgErr.Code, "", false, err)
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
			return serverTimeoutError(s.setting, s.code, v.shown, true, err)
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
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNRESET), errors.Is(err, net.ErrClosed):
		return true
	case errors.As(err, &ne):
		// A bare syscall.Errno is a net.Error too: a file's error (an
		// Iceberg metadata file gone, a full disk) is not the connection's.
		if _, errno := ne.(syscall.Errno); !errno {
			return true
		}
	}
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset")
}
