package cursor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is the connection source a stream runs on. *pgxpool.Pool, *pgx.Conn,
// *pgxpool.Conn and pgx.Tx all satisfy it:
//
//   - a pool (anything with Acquire(ctx) (*pgxpool.Conn, error)): a connection
//     is acquired for the stream, used in its own transaction(s) and released
//     to the pool when the stream ends;
//   - a *pgx.Conn or *pgxpool.Conn that is not inside a transaction: the
//     stream begins and ends its own transaction(s) on it;
//   - a pgx.Tx: the stream runs inside a savepoint of the caller's transaction
//     (direct mode only). The savepoint is released when the stream completes
//     and rolled back to on error or early stop, so the caller's transaction
//     stays usable; the caller's transaction is never committed or rolled
//     back. (A cancelled context or a lost connection does kill the caller's
//     transaction, as with any pgx call.)
//
// Any other Begin-er is used in direct mode only: the stream calls Begin and
// ends that transaction itself.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

type acquirer interface {
	Acquire(ctx context.Context) (*pgxpool.Conn, error)
}

// session is the connection side of one run: which connection, which
// transaction, and how to give them back.
type session struct {
	conn     *pgx.Conn
	poolConn *pgxpool.Conn // acquired by us, released at the end
	callerTx pgx.Tx        // the caller's tx (savepoint mode)
	beginner DB            // generic Begin-er
}

// acquire binds the session to a connection according to the kind of db.
func acquire(ctx context.Context, db DB, mode StreamMode) (*session, error) {
	switch v := db.(type) {
	case pgx.Tx:
		if mode == Staged {
			return nil, errStagedNeedsSession
		}
		return &session{conn: v.Conn(), callerTx: v}, nil
	case *pgx.Conn:
		if v.PgConn().TxStatus() != 'I' {
			return nil, errConnInTransaction
		}
		return &session{conn: v}, nil
	case *pgxpool.Conn:
		if v.Conn().PgConn().TxStatus() != 'I' {
			return nil, errConnInTransaction
		}
		return &session{conn: v.Conn()}, nil
	case acquirer:
		pc, err := v.Acquire(ctx)
		if err != nil {
			return nil, &QueryError{Op: "acquire", err: err}
		}
		return &session{conn: pc.Conn(), poolConn: pc}, nil
	default:
		if mode == Staged {
			return nil, errStagedNeedsSession
		}
		return &session{beginner: db}, nil
	}
}

// begin starts the transaction the query runs in: a savepoint in the
// caller's transaction, or a new transaction we own.
func (s *session) begin(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	switch {
	case s.callerTx != nil:
		return s.callerTx.Begin(ctx) // SAVEPOINT
	case s.beginner != nil:
		tx, err := s.beginner.Begin(ctx)
		if err == nil {
			s.conn = tx.Conn()
		}
		return tx, err
	default:
		return s.conn.BeginTx(ctx, opts)
	}
}

// release gives the connection back. When broken is true and we acquired
// the connection, it is taken out of the pool and closed here, synchronously
// (the pool would otherwise destroy it in a goroutine of its own), so that
// any temporary table or half-ended transaction dies with the session.
func (s *session) release(ctx context.Context, broken bool) {
	if s.poolConn == nil {
		return
	}
	pc := s.poolConn
	s.poolConn = nil
	if broken {
		_ = pc.Hijack().Close(ctx)
		return
	}
	pc.Release()
}

func stageTableName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "lakewrite_stage_" + hex.EncodeToString(b[:])
}

func cleanupContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

// wrapErr converts an error at the pgx boundary: limit causes win, context
// errors stay matchable with errors.Is, everything else is a *QueryError.
func wrapErr(op string, err error, qctx context.Context) error {
	if err == nil {
		return nil
	}
	if qctx != nil {
		if cause := context.Cause(qctx); cause != nil {
			var le *limitError
			if errors.As(cause, &le) {
				return le
			}
			if !errors.Is(err, cause) {
				err = errors.Join(cause, err)
			}
		}
	}
	var qe *QueryError
	if errors.As(err, &qe) {
		return err
	}
	return &QueryError{Op: op, err: err}
}
