package ledger

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// renewSQL renews the lease of an open intent held with its attempt, and
// tells why it did not: the row's status and attempt as they were. It does
// not wait for a transaction holding the row (a CommitTx that has not
// committed yet): the lock is refused at once (NOWAIT), and the renewal is
// tried again at the next beat.
func renewSQL(table string) string {
	return `WITH c AS (SELECT id FROM ` + table + ` WHERE id = $1 AND status = 'open' AND attempt = $2 AND lease_until IS NOT NULL FOR UPDATE NOWAIT),
	r AS (UPDATE ` + table + ` t SET lease_until = clock_timestamp() + $3::pg_catalog.int8 * interval '1 microsecond'
		FROM c WHERE t.id = c.id RETURNING 1)
	SELECT status, attempt, EXISTS (SELECT 1 FROM r) FROM ` + table + ` WHERE id = $1`
}

// renew renews the lease of intent id held with attempt, on db. It returns
// an error matching ErrNotOpen, ErrFenced or ErrIntentNotFound when the
// intent is not this writer's any more, and the query's error otherwise.
func (st *intentState) renew(ctx context.Context, db DB, id string, attempt int64) error {
	var status string
	var at int64
	var renewed bool
	err := db.QueryRow(ctx, renewSQL(st.table), id, attempt, st.lease.Microseconds()).Scan(&status, &at, &renewed)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return &stateError{id: id, kind: ErrIntentNotFound}
	case err != nil:
		return err
	case renewed:
		return nil
	case status != string(StatusOpen):
		return &stateError{id: id, status: status, attempt: at, kind: ErrNotOpen}
	default:
		return &stateError{id: id, status: status, attempt: at, kind: ErrFenced}
	}
}

// Renew renews the intent's lease, when it is held by one (see the package
// documentation), for another Config.Lease from now (database clock). It
// returns an error matching ErrFenced, ErrNotOpen or ErrIntentNotFound
// when another process took the intent over (or it ended): the write must
// then not be published. For an intent held by a session lock, or without
// liveness, it does nothing and returns nil. Writers that compose Open and
// Commit themselves call it (or run their write under KeepAlive) more
// often than Config.Lease; With, WithTx and Alive renew on their own.
func (l *Ledger) Renew(ctx context.Context, in *Intent) error {
	if err := in.validate(); err != nil {
		return err
	}
	if in.st == nil || !in.st.leased {
		return nil
	}
	return in.st.renew(ctx, l.db, in.ID, in.attempt)
}

// KeepAlive renews the leases of the intents among ins that are held by one,
// every Config.Lease/3, until stop is called, and returns stop. Call stop
// (it is idempotent) before the call that opened the intents returns: it
// ends the renewals and waits for them, so no goroutine outlives it. With
// no leased intent among ins it starts nothing.
//
// The renewals run on the ledger's pool (or, when the ledger's DB is a
// *pgx.Conn, on a connection of their own opened from its configuration),
// never on the write's connections: a long statement of the write (a
// server-side compute before its first row, a long catalog commit) does not
// hold them up. An intent that another process took over stops being
// renewed; its commit is then refused (the attempt fence). A renewal that
// fails otherwise (a network blip) is tried again at the next beat.
func (l *Ledger) KeepAlive(ctx context.Context, ins ...*Intent) (stop func()) {
	var leased []*Intent
	for _, in := range ins {
		if in != nil && in.st != nil && in.st.leased {
			leased = append(leased, in)
		}
	}
	if len(leased) == 0 {
		return func() {}
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.heartbeat(rctx, leased)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			wg.Wait()
		})
	}
}

// heartbeat renews the leases of ins every Config.Lease/3 until ctx ends.
func (l *Ledger) heartbeat(ctx context.Context, ins []*Intent) {
	every := l.cfg.Lease / 3
	t := time.NewTicker(every)
	defer t.Stop()
	db := l.db
	var own *pgx.Conn // the renewals' connection, for a *pgx.Conn DB
	defer func() {
		if own != nil {
			closeConn(own, l.cfg.cleanupTimeout)
		}
	}()
	for len(ins) > 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if c, ok := l.db.(*pgx.Conn); ok && own == nil {
			var err error
			if own, err = pgx.ConnectConfig(ctx, c.Config()); err != nil {
				l.log.WarnContext(ctx, "lakewrite lease renewal: connect", "error", err)
				own = nil
				continue
			}
			db = own
		}
		kept := ins[:0]
		for _, in := range ins {
			if db == nil { // the renewals' own connection broke: next beat
				kept = append(kept, in)
				continue
			}
			bctx, cancel := context.WithTimeout(ctx, every)
			err := in.st.renew(bctx, db, in.ID, in.attempt)
			cancel()
			var se *stateError
			switch {
			case errors.As(err, &se):
				// Ended, or taken over: nothing left to renew.
				l.log.InfoContext(ctx, "lakewrite lease not renewed", "txn_id", in.ID, "dataset_id", in.DatasetID, "error", err)
				continue
			case err != nil && ctx.Err() == nil && !lockBusy(err):
				l.log.WarnContext(ctx, "lakewrite lease renewal failed", "txn_id", in.ID, "dataset_id", in.DatasetID, "error", err)
			}
			if own != nil && own.IsClosed() {
				own, db = nil, nil
			}
			kept = append(kept, in)
		}
		ins = kept
	}
}

// lockBusy reports a renewal refused because a transaction holds the
// intent's row (its commit is under way).
func lockBusy(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgLockNotAvailable
}
