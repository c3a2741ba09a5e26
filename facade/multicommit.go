package facade

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/lakewrite/lakewrite/facade/internal/identity"
	"github.com/lakewrite/lakewrite/internal/vocab"
)

// SupportsAtomicCommit reports whether the facade's catalog commits several
// tables in one atomic request (iceberg-go's catalog.TransactionalCatalog:
// the REST catalog's POST /v1/{prefix}/transactions/commit, or one
// Postgres transaction on the catalog of NewPostgresCatalog), so that
// CommitAll is available.
func (f *Facade) SupportsAtomicCommit() bool {
	_, ok := f.cat.(catalog.TransactionalCatalog)
	return ok
}

// CommitAll commits staged writes of different datasets (e.g. the two
// outputs of a split) in one catalog transaction: every snapshot lands or
// none does. It needs SupportsAtomicCommit; otherwise it is an
// ErrInvalidRequest and nothing is committed or deleted.
//
// The outcomes are those of Staged.Commit, for the set as a whole: clean
// conflicts are retried against the refreshed tables (Config.CommitRetries;
// a replace is re-planned, an append only while its table's row indices
// still continue at its staged rows), an append whose txn id already
// landed counts as committed (Replayed), a refused credential is an
// error matching ErrCatalogAuth, and an ambiguous failure is reconciled by looking up
// every write's snapshot: all found means committed, otherwise the result
// is ErrCommitStateUnknown with every staged file kept (reconcile each
// dataset with FindTxn). On success the results are in the order of
// staged. Every staged write is finished by CommitAll, whatever its
// outcome.
//
// A multi-table commit runs no per-table post-commit hooks: metadata
// files that fall out of a table's metadata log in it are not deleted
// (the next single-table commit or maintenance bounds the log again).
func (f *Facade) CommitAll(ctx context.Context, staged ...Staged) ([]CommitResult, error) {
	tc, ok := f.cat.(catalog.TransactionalCatalog)
	if !ok {
		return nil, fmt.Errorf("%w: catalog %T has no multi-table commits", ErrInvalidRequest, f.cat)
	}
	// A staged write that can also commit into a transaction (on a
	// postgresCatalog) is committed here as a plain one.
	staged = slices.Clone(staged)
	for i, st := range staged {
		if ts, ok := st.(*icebergTxStaged); ok {
			staged[i] = ts.icebergStaged
		}
	}
	results := make([]CommitResult, len(staged))
	var writes []*icebergStaged
	var idx []int
	seen := map[string]bool{}
	for i, st := range staged {
		switch s := st.(type) {
		case *icebergStaged:
			if s.f != f {
				return nil, fmt.Errorf("%w: CommitAll: staged write %d belongs to another facade", ErrInvalidRequest, i)
			}
			k := strings.Join(s.ident, ".")
			if seen[k] {
				return nil, fmt.Errorf("%w: CommitAll: table %s staged twice", ErrInvalidRequest, k)
			}
			seen[k] = true
			writes, idx = append(writes, s), append(idx, i)
		case *replayStaged:
		default:
			return nil, fmt.Errorf("%w: CommitAll: staged write %d (%T) is not this facade's", ErrInvalidRequest, i, st)
		}
	}
	// Finish them all: a replay's result is its earlier commit.
	var finished []*icebergStaged
	for i, st := range staged {
		var err error
		switch s := st.(type) {
		case *icebergStaged:
			if err = s.finish(); err == nil {
				finished = append(finished, s)
			}
		case *replayStaged:
			results[i], err = s.Commit(ctx)
		}
		if err != nil {
			f.deleteAll(finished)
			return nil, err
		}
	}
	if len(writes) == 0 {
		return results, nil
	}
	res, err := f.commitAll(ctx, tc, writes)
	if err != nil {
		return nil, err
	}
	for j, r := range res {
		results[idx[j]] = r
	}
	return results, nil
}

func (f *Facade) deleteAll(ws []*icebergStaged) {
	for _, s := range ws {
		f.deleteFiles(s.base, s.files)
	}
}

func datasetsOf(ws []*icebergStaged) string {
	ids := make([]string, len(ws))
	for i, s := range ws {
		ids[i] = s.target.DatasetID
	}
	return strings.Join(ids, ",")
}

func (f *Facade) commitAll(ctx context.Context, tc catalog.TransactionalCatalog, ws []*icebergStaged) ([]CommitResult, error) {
	tbls := make([]*table.Table, len(ws))
	// replayed[i]: the append's txn id landed meanwhile; its result.
	replayed := make([]*CommitResult, len(ws))
	for i, s := range ws {
		existed, err := f.createPending(ctx, s)
		if err != nil {
			f.deleteAll(ws)
			return nil, err
		}
		tbls[i] = s.base
		if !existed {
			continue
		}
		// Another write created the table first and may have committed
		// onto it: the same decisions as a retry (a landed txn id is a
		// replay; an append whose __row_index base moved cannot commit).
		r, err := f.refreshForRetry(ctx, s)
		if err != nil {
			f.deleteAll(ws)
			return nil, err
		}
		switch {
		case r.replay != nil:
			replayed[i] = r.replay
			f.deleteFiles(s.base, s.files)
			s.files = nil
		case r.unsound != nil:
			f.deleteAll(ws)
			return nil, identity.CommitError(ErrCommitConflict, datasetsOf(ws), 0, fmt.Errorf("dataset %q: %w: %w", s.target.DatasetID, errRetryUnsound, r.unsound))
		default:
			tbls[i] = r.table
		}
	}
	var lastErr error
	attempts := 0
	for attempt := 0; attempt <= f.s.CommitRetries; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, backoff(attempt, f.s.RetryMinWait, f.s.RetryMaxWait)); err != nil {
				f.deleteAll(ws)
				return nil, err
			}
			stop := false
			for i, s := range ws {
				if replayed[i] != nil {
					continue
				}
				r, err := f.refreshForRetry(ctx, s)
				if err != nil {
					f.deleteAll(ws)
					return nil, err
				}
				if r.replay != nil {
					replayed[i] = r.replay
					f.deleteFiles(s.base, s.files)
					s.files = nil
					continue
				}
				if r.unsound != nil {
					stop, lastErr = true, fmt.Errorf("dataset %q: %w", s.target.DatasetID, errRetryUnsound)
					break
				}
				tbls[i] = r.table
			}
			if stop {
				break
			}
		}
		attempts++
		var commits []table.TableCommit
		for i, s := range ws {
			if replayed[i] != nil {
				continue
			}
			t := table.New(s.ident, tbls[i].Metadata(), tbls[i].MetadataLocation(), tbls[i].FS, f.cat)
			txn, err := s.build(ctx, t)
			if err == nil {
				var c table.TableCommit
				if c, err = txn.TableCommit(); err == nil {
					commits = append(commits, c)
				}
			}
			if err != nil {
				f.deleteAll(ws)
				return nil, err
			}
		}
		var err error
		if len(commits) > 0 {
			err = tc.CommitTransaction(ctx, commits)
		}
		switch {
		case err == nil:
			return f.reconcileAll(ctx, ws, replayed, attempts, nil)
		case isAuthError(err):
			f.deleteAll(ws)
			return nil, authError("commit "+datasetsOf(ws), err)
		case isConflict(err):
			lastErr = err
			f.s.Logger.Info("facade: multi-table commit conflict", "datasets", datasetsOf(ws), "attempt", attempts, "err", err)
			continue
		default:
			return f.reconcileAll(ctx, ws, replayed, attempts, err)
		}
	}
	f.deleteAll(ws)
	return nil, identity.CommitError(ErrCommitConflict, datasetsOf(ws), attempts, lastErr)
}

var errRetryUnsound = errors.New("the table changed so that a retry would be unsound (schema changed, or a concurrent append moved __row_index)")

// retryRefresh is what refreshing a staged write's table for another
// commit attempt found: exactly one of table, replay and unsound is set.
type retryRefresh struct {
	// table is the refreshed table to commit onto.
	table *table.Table
	// replay is the result of an append whose txn id already landed: the
	// write is done (its files are to be deleted).
	replay *CommitResult
	// unsound says why a retry would be unsound (the schema changed, or a
	// concurrent append moved __row_index): stop retrying.
	unsound error
}

// refreshForRetry loads s's table for another attempt: the retry
// decisions shared by Staged.Commit and CommitAll. A replay comes with
// the error of reading its result, if any; any other error means no
// decision.
func (f *Facade) refreshForRetry(ctx context.Context, s *icebergStaged) (retryRefresh, error) {
	fresh, err := f.load(ctx, s.target.DatasetID, s.ident)
	if err != nil {
		return retryRefresh{}, err
	}
	if fresh.Schema().ID != s.base.Schema().ID || (s.create != nil && !samePendingLayout(s.base, fresh)) {
		return retryRefresh{unsound: errors.New("table schema changed concurrently")}, nil
	}
	if s.req.Mode == Append {
		if s.req.TxnID != "" {
			if snap := findInAncestry(fresh, SummaryTxnID, s.req.TxnID); snap != nil {
				res, err := f.resultFromSnapshot(ctx, fresh, s.target.DatasetID, snap, true)
				res.Replayed = true
				return retryRefresh{replay: &res}, err
			}
		}
		next, err := nextRowIndex(ctx, fresh)
		if err != nil {
			return retryRefresh{}, err
		}
		if next != s.rowBase {
			return retryRefresh{unsound: fmt.Errorf("a concurrent append moved __row_index from %d to %d", s.rowBase, next)}, nil
		}
	}
	return retryRefresh{table: fresh}, nil
}

// reconcileAll reads back every write's snapshot after the transaction
// (cause nil: it was acknowledged) or after an ambiguous failure.
func (f *Facade) reconcileAll(ctx context.Context, ws []*icebergStaged, replayed []*CommitResult, attempts int, cause error) ([]CommitResult, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	out := make([]CommitResult, len(ws))
	var missing []string
	for i, s := range ws {
		if replayed[i] != nil {
			out[i] = *replayed[i]
			continue
		}
		tbl, err := f.cat.LoadTable(rctx, s.ident)
		if err != nil {
			missing = append(missing, s.target.DatasetID)
			if cause == nil {
				cause = fmt.Errorf("the transaction was acknowledged but table %s cannot be read back: %w", strings.Join(s.ident, "."), err)
			}
			continue
		}
		snap := findInAncestry(tbl, vocab.SummaryWriteID, s.info.WriteID)
		if snap == nil {
			missing = append(missing, s.target.DatasetID)
			continue
		}
		if out[i], err = s.result(tbl, snap); err != nil {
			return nil, err
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	if cause == nil {
		cause = fmt.Errorf("the transaction was acknowledged but no snapshot of %s is in its table", strings.Join(missing, ","))
	}
	return nil, identity.CommitError(ErrCommitStateUnknown, datasetsOf(ws), attempts, cause)
}
