package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ErrTransactionPooling: the ledger's sessions go through a pooler in
// transaction mode (PgBouncer pool_mode=transaction): two statements of
// one session ran on different server connections, so a session lock
// would not hold (it stays on whichever server connection took it, and
// its unlock runs on another). Open refuses such a session before it
// locks or inserts anything. Working configurations: connect the ledger
// directly to PostgreSQL, or through a pooler in session mode; or keep
// transaction mode and set Config.Liveness = LivenessOff (intents are then
// recovered by age: OpenParams.RecoverAfter, Sweep, Recover).
var ErrTransactionPooling = errors.New("ledger: the connection goes through a pooler in transaction mode, which cannot hold a session lock: connect directly or through a pooler in session mode, or set Config.Liveness = LivenessOff")

// sessionKind is what a held session's connection is, as cached on it.
const sessionKindKey = "lakewrite.ledger.session"

// checkSession makes sure the session conn can hold a session lock. A
// connection whose backend is the one it connected to (its startup
// BackendKeyData names the backend's pid) is direct: checked once, in one
// round trip, for the connection's life. Behind a pooler (the pid it was
// given is not its backend's) every hold checks, in one more round trip,
// that a session setting made in one statement is seen by the next on the
// same backend; a pooler in transaction mode fails that as soon as the two
// statements land on different server connections.
func checkSession(ctx context.Context, conn *pgx.Conn) error {
	pc := conn.PgConn()
	data := pc.CustomData()
	if data[sessionKindKey] == "direct" {
		return nil
	}
	probe := NewID()
	var pid1 uint32
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid(), set_config('lakewrite.session_probe', $1, false)`, probe).Scan(&pid1, nil); err != nil {
		return fmt.Errorf("check the session: %w", err)
	}
	if pid1 == pc.PID() {
		data[sessionKindKey] = "direct"
		return nil
	}
	var pid2 uint32
	var seen *string
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid(), current_setting('lakewrite.session_probe', true)`).Scan(&pid2, &seen); err != nil {
		return fmt.Errorf("check the session: %w", err)
	}
	if pid2 != pid1 || seen == nil || *seen != probe {
		return fmt.Errorf("%w (two statements of one session ran on server backends %d and %d)", ErrTransactionPooling, pid1, pid2)
	}
	return nil
}
