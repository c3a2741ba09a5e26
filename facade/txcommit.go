package facade

import (
	"context"
	"fmt"

	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"
)

// TxStaged is a staged write that can commit inside a caller's Postgres
// transaction. Facade.Stage returns one when its catalog is the one
// NewPostgresCatalog returns, and for a replayed append with any catalog (a replay
// commits nothing). Find it by type assertion on the Staged.
//
// CommitTx is Commit inside tx: the new metadata (and the manifests the
// snapshot needs) are written at once, the table's metadata pointer is
// swapped in tx, and the returned CommitResult describes the snapshot that
// becomes visible when the caller commits tx. Several staged writes (of
// different datasets) can commit into one tx, together with the caller's
// own statements (a ledger commit): all of them land, or none. Clean
// conflicts are retried inside tx as Commit retries them; any error leaves
// nothing visible (never ErrCommitStateUnknown), deletes the staged files,
// and obliges the caller to roll tx back.
//
// After a CommitTx that returned nil, the caller either commits tx (done),
// or rolls it back and may then call Abort, which deletes the staged data
// files (the metadata and manifests written for it stay as unreferenced
// files, removed by the lifecycle's orphan pass). When committing tx itself
// fails, the outcome is unknown until the caller reads it back (the ledger
// committed in tx says it): do not call Abort then unless tx is known to
// have rolled back.
//
// A Lakehouse wrapper (tracing, metrics) keeps the one-transaction commit
// only if the Staged its Stage returns implements TxStaged whenever the
// wrapped one does: wrap a TxStaged in a type that also has CommitTx (see
// the example of TxStaged; facadetest.Wrap does the same). The write
// dispatch detects a wrapper that hides it (StageInfo.CommitsInTx on a
// Staged that is not a TxStaged) and refuses the write
// (writestrategy.ErrTxCommitLost) unless told to accept committing the
// snapshot and the ledger in two steps, which a crash between them leaves
// to be rolled forward (writestrategy.DispatchConfig.AcceptTwoCommits).
type TxStaged interface {
	Staged
	CommitTx(ctx context.Context, tx pgx.Tx) (CommitResult, error)
}

var (
	_ TxStaged = (*icebergTxStaged)(nil)
	_ TxStaged = (*replayStaged)(nil)
)

// icebergTxStaged is a staged write on a txCatalog.
type icebergTxStaged struct {
	*icebergStaged
	cat txCatalog
}

func (s *icebergTxStaged) CommitTx(ctx context.Context, tx pgx.Tx) (CommitResult, error) {
	if tx == nil {
		return CommitResult{}, fmt.Errorf("%w: CommitTx needs a transaction", ErrInvalidRequest)
	}
	if err := s.finish(); err != nil {
		return CommitResult{}, err
	}
	res, err := s.commit(ctx, txBoundCatalog{txCatalog: s.cat, tx: tx}, tx)
	if err == nil && !res.Replayed {
		s.mu.Lock()
		s.inTx = true
		s.mu.Unlock()
	}
	return res, err
}

// abortAfterTx reports (once) that the staged write was committed into a
// transaction, so that Abort, called after that transaction rolled back,
// deletes its files.
func (s *icebergStaged) abortAfterTx() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.inTx
	s.inTx = false
	return was
}

// CommitTx of a replay returns the earlier result: nothing to commit.
func (r *replayStaged) CommitTx(ctx context.Context, _ pgx.Tx) (CommitResult, error) {
	return r.Commit(ctx)
}

// txBoundCatalog commits into tx; everything else goes to the catalog.
type txBoundCatalog struct {
	txCatalog
	tx pgx.Tx
}

func (c txBoundCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	return c.CommitTableTx(ctx, c.tx, ident, reqs, updates)
}
