package writestrategy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
)

// CleanupBound bounds the clean-up of a failed write (rolling back its
// transaction, aborting its intents, deleting its staged
// files): it runs under context.WithoutCancel of the caller's context, so
// that a cancelled or expired write still cleans up, and ends at the
// latest CleanupBound after the caller's deadline (or after the failure,
// without a deadline). A Write returns at most that long after its
// context's deadline. The clean-up needs no connection the write does not
// already hold: a failed write's intents are aborted on their own held
// sessions once its transaction has ended, or, for a session the deadline
// broke, on a connection opened in its place (ledger.Ledger.Abort). What
// the bound cuts short (say the server does not answer) is left to
// reconciliation (the next write of the dataset, Sweep).
const CleanupBound = 5 * time.Second

// minCleanup is the least time a clean-up is given.
const minCleanup = time.Second

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// cleanupContext is the context of a failed write's clean-up (see
// CleanupBound): every clean-up step of one call shares its end.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	now := time.Now()
	end := now.Add(CleanupBound)
	if dl, ok := ctx.Deadline(); ok && dl.Add(CleanupBound).Before(end) {
		end = dl.Add(CleanupBound)
	}
	// A step that overran the deadline still leaves its clean-up a chance.
	end = maxTime(end, now.Add(minCleanup))
	return context.WithDeadline(context.WithoutCancel(ctx), end)
}

// abortAll aborts the intents of a failed write, within the clean-up
// bound (cleanupContext), each on its own held session when it has one.
func (d *Dispatcher) abortAll(ctx context.Context, intents map[string]*ledger.Intent, cause error) {
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	for _, in := range intents {
		_ = d.cfg.Ledger.Abort(cctx, in, cause)
	}
}

// beginWait bounds how long a write waits for the pool connection of its
// transaction.
const beginWait = 30 * time.Second

// poolBegin begins a transaction with settings (none when empty) on a
// connection of db: the wait for a free connection is bounded, so that a
// pool too small for the writes running at once fails them with a clear
// error instead of leaving them waiting on each other. A db without
// BeginTx gets the settings in a statement of their own.
func poolBegin(ctx context.Context, db ledger.DB, settings string) (pgx.Tx, error) {
	bctx, cancel := context.WithTimeout(ctx, beginWait)
	defer cancel()
	var tx pgx.Tx
	var err error
	if bt, ok := db.(interface {
		BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
	}); ok {
		tx, err = bt.BeginTx(bctx, beginOptions(settings))
	} else if tx, err = db.Begin(bctx); err == nil && settings != "" {
		if _, err = tx.Exec(ctx, settings); err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			tx, err = nil, queryError("configure transaction", err)
		}
	}
	if err != nil && ctx.Err() == nil && bctx.Err() != nil {
		return nil, fmt.Errorf("no database connection within %s for the write's transaction: size the pool for the writes running at once: per write, one connection per output with liveness (each open intent holds one, and the write's transaction runs on one of those), one without, plus one when the Iceberg catalog shares the pool: %w", beginWait, err)
	}
	return tx, err
}

// catalogNoConnection makes a write whose catalog gave no answer within
// its bound (facade.ErrCatalogTimeout, from Stage, WriteOrder, the Scan of
// a native source or the Lookup of an open intent: with the catalog on the
// writers' pool, no free connection) match ledger.ErrNoConnection too.
func catalogNoConnection(err error) error {
	if errors.Is(err, facade.ErrCatalogTimeout) && !errors.Is(err, ledger.ErrNoConnection) {
		return &catalogTimeoutError{err: err}
	}
	return err
}

// catalogTimeoutError is a write failed by facade.ErrCatalogTimeout; it
// matches ledger.ErrNoConnection.
type catalogTimeoutError struct{ err error }

func (e *catalogTimeoutError) Error() string {
	return "writestrategy: no answer from the catalog in time (a catalog sharing the pool needs a connection beside the ones the write's intents hold: size the pool for it): " + e.err.Error()
}

func (e *catalogTimeoutError) Is(target error) bool { return target == ledger.ErrNoConnection }

func (e *catalogTimeoutError) Unwrap() error { return e.err }
