package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ErrTransactionPooling was returned by Open when the ledger's sessions went
// through a pooler in transaction mode, which cannot hold a session lock.
// Intents opened through any pooler are now held by a lease instead (see
// the package documentation), and no call returns this error any more; it
// stays so that code matching it still compiles.
var ErrTransactionPooling = errors.New("ledger: the connection goes through a pooler in transaction mode, which cannot hold a session lock")

// sessionKindKey is where what a session's connection is (direct or
// pooled) is cached on it.
const sessionKindKey = "lakewrite.ledger.session"

// directSession reports whether conn reaches its PostgreSQL backend
// directly, so that a session lock taken on it lives exactly as long as the
// connection: the process id of the BackendKeyData the server sent at
// startup is the backend's own (pg_backend_pid). A pooler (PgBouncer,
// Supavisor, and the like) hands its clients a key of its own, in session
// mode as in transaction mode: such a connection is taken as pooled. The
// answer is cached on the connection; the first call costs one round trip.
func directSession(ctx context.Context, conn *pgx.Conn) (bool, error) {
	pc := conn.PgConn()
	data := pc.CustomData()
	switch data[sessionKindKey] {
	case "direct":
		return true, nil
	case "pooled":
		return false, nil
	}
	var pid uint32
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.pg_backend_pid()`).Scan(&pid); err != nil {
		return false, fmt.Errorf("check the session: %w", err)
	}
	direct := pid == pc.PID()
	if direct {
		data[sessionKindKey] = "direct"
	} else {
		data[sessionKindKey] = "pooled"
	}
	return direct, nil
}
