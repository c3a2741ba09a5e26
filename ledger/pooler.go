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
// its unlock runs on another), or a pooled session's backend already held
// another client's intent lock (the server connections are shared). Open
// refuses such a session before it locks or inserts anything. Working configurations: connect the ledger
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
//
// A pooler in transaction mode with one server connection (or one that
// keeps handing a client the same one) passes that check: the two
// statements share the one backend, which every other client shares too.
// So a session freshly taken from a pool (fresh) also checks, in its first
// statement, that its backend holds no lock of an open intent of table:
// such a session holds none of its own, and a session-mode pooler gives
// each client a backend of its own, so such a lock is another client's,
// left on the backend they share. The first hold on a shared backend
// cannot be told apart this way; the next one, while the first is held or
// after its writer died holding it, is refused.
func checkSession(ctx context.Context, conn *pgx.Conn, table string, fresh bool) error {
	pc := conn.PgConn()
	data := pc.CustomData()
	if data[sessionKindKey] == "direct" {
		return nil
	}
	probe := NewID()
	var pid1 uint32
	var foreign bool
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid(), set_config('lakewrite.session_probe', $1, false),
		$2::pg_catalog.bool AND EXISTS (SELECT 1 FROM pg_catalog.pg_locks k JOIN `+table+` t
			ON t.lock_key = ((k.classid::pg_catalog.int8 << 32) | k.objid::pg_catalog.int8)
			WHERE k.pid = pg_catalog.pg_backend_pid() AND k.locktype = 'advisory' AND k.objsubid = 1 AND k.granted
			  AND t.status = 'open')`, probe, fresh).Scan(&pid1, nil, &foreign); err != nil {
		return fmt.Errorf("check the session: %w", err)
	}
	if pid1 == pc.PID() {
		data[sessionKindKey] = "direct"
		return nil
	}
	if foreign {
		return fmt.Errorf("%w (server backend %d already holds the lock of another client's open intent)", ErrTransactionPooling, pid1)
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
