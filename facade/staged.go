package facade

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade/internal/identity"
	"github.com/lakewrite/lakewrite/internal/scanfiles"
	"github.com/lakewrite/lakewrite/internal/vocab"
)

// observedCatalog records whether CommitTable ran and how it ended, so a
// commit error can be told apart: not sent (nothing committed), clean
// conflict, or unknown outcome.
type observedCatalog struct {
	catalog.Catalog
	mu     sync.Mutex
	called bool
	err    error
}

func (o *observedCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	m, loc, err := o.Catalog.CommitTable(ctx, ident, reqs, updates)
	o.mu.Lock()
	o.called, o.err = true, err
	o.mu.Unlock()
	return m, loc, err
}

func (o *observedCatalog) outcome() (bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.called, o.err
}

// isConflict: the catalog refused the commit before changing anything.
// iceberg-go's SQL catalog reports a failed requirement (branch moved) as
// a plain "requirement failed" error, not ErrCommitFailed.
func isConflict(err error) bool {
	return errors.Is(err, table.ErrCommitFailed) || strings.HasPrefix(strings.ToLower(err.Error()), "requirement failed")
}

type icebergStaged struct {
	f       *Facade
	target  Target
	ident   table.Identifier
	req     WriteRequest
	cols    []identity.Column
	base    *table.Table
	rowBase int64
	files   []iceberg.DataFile
	info    StageInfo
	// checksum of the rows staged; baseSnapshotID the table's snapshot
	// they were staged against (-1: none)
	checksum       Checksum
	baseSnapshotID int64
	props          iceberg.Properties
	merge          bool // a merge by key: files holds data and position delete files
	// supersede: the live deletion vectors the merge's deletion vectors
	// replace, removed in its snapshot.
	supersede []iceberg.DataFile
	// cow: the merge is copy-on-write (see cowRewrite).
	cow *cowRewrite

	change     identity.SchemaChange // of the last attempt (build)
	fromSchema int                   // the schema id it changed

	// create: base is a pending table (see pendingTable) that the commit
	// creates, in the namespace createNS of this catalog.
	create   *postgresCatalog
	createNS string

	mu   sync.Mutex
	done bool
	// inTx: committed into a caller's transaction that may still roll
	// back (see TxStaged).
	inTx bool
}

func (s *icebergStaged) Info() StageInfo { return s.info }

func (s *icebergStaged) finish() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return ErrAlreadyFinished
	}
	s.done = true
	return nil
}

func (s *icebergStaged) Abort(context.Context) error {
	if s.abortAfterTx() {
		s.f.deleteFiles(s.base, s.files)
		return nil
	}
	if err := s.finish(); err != nil {
		return err
	}
	s.f.deleteFiles(s.base, s.files)
	return nil
}

// build prepares the snapshot of this write on tbl.
func (s *icebergStaged) build(ctx context.Context, tbl *table.Table) (*table.Transaction, error) {
	if err := checkRowIDVersion(s.target.DatasetID, tbl.Properties()); err != nil {
		return nil, err
	}
	txn := tbl.NewTransaction()
	change, err := s.f.prepareSchema(txn, tbl.Schema(), s.target.DatasetID, s.req.Mode, s.cols)
	if err != nil {
		return nil, err
	}
	s.change, s.fromSchema = change, tbl.Schema().ID
	if err := s.f.evolveLayout(txn, s.target.DatasetID); err != nil {
		return nil, err
	}
	if err := s.f.upgradeFormat(txn, s.target.DatasetID); err != nil {
		return nil, err
	}
	if err := sameSpec(txn, s.files); err != nil && !s.merge {
		return nil, err
	}
	summary := maps.Clone(s.props)
	delete(summary, vocab.SummarySchemaChange)
	if !change.Empty() {
		summary[vocab.SummarySchemaChange] = change.String()
	}
	// Tables written before the lifecycle existed get its properties (and
	// manifest merging, which bounds the manifest list: see compact.go) in
	// this same commit.
	props := lifecycleProps(tbl.Properties(), s.f.policy(s.target.DatasetID), s.f.s.now())
	if p := missingManifestProperties(tbl.Properties()); len(p) > 0 {
		if props == nil {
			props = iceberg.Properties{}
		}
		maps.Copy(props, p)
	}
	if _, ok := tbl.Properties()[propertyRowIDVersion]; !ok {
		// a table written before the version was recorded: same function
		if props == nil {
			props = iceberg.Properties{}
		}
		props[propertyRowIDVersion] = RowIDVersion
	}
	if len(props) > 0 {
		if err := txn.SetProperties(props); err != nil {
			return nil, fmt.Errorf("facade: set table properties: %w", err)
		}
	}
	if s.merge {
		if err := s.buildMerge(ctx, tbl, txn, summary); err != nil {
			return nil, fmt.Errorf("facade: prepare snapshot: %w", err)
		}
		return txn, nil
	}
	var old, oldDeletes []iceberg.DataFile
	if s.req.Mode == Replace && tbl.CurrentSnapshot() != nil {
		// keyed by path: a file over the split size is planned as several tasks
		tasks, err := tbl.Scan().PlanFiles(ctx)
		if err != nil {
			return nil, fmt.Errorf("facade: plan files: %w", err)
		}
		old = scanfiles.DataFiles(tasks)
		// A replace removes every data file, so every delete file and
		// deletion vector goes with them.
		if len(old) > 0 {
			if oldDeletes, err = liveDeletes(ctx, tbl, tbl.CurrentSnapshot()); err != nil {
				return nil, fmt.Errorf("facade: plan delete files: %w", err)
			}
		}
	}
	switch {
	case stagedVersion(txn) >= 3:
		err = addV3(ctx, txn, old, oldDeletes, s.files, summary)
	case len(oldDeletes) > 0:
		err = txn.ReplaceFiles(ctx, old, s.files, oldDeletes, summary)
	case len(old) > 0:
		err = txn.ReplaceDataFilesWithDataFiles(ctx, old, s.files, summary)
	case len(s.files) > 0:
		// The files were just written under this write's unique id: the
		// duplicate check, which reads every live manifest, cannot fail.
		err = txn.AddDataFiles(ctx, s.files, summary, table.WithoutDuplicateCheck())
	default:
		err = emptySnapshot(ctx, txn, summary)
	}
	if err != nil {
		return nil, fmt.Errorf("facade: prepare snapshot: %w", err)
	}
	return txn, nil
}

// Commit commits the staged snapshot, retrying clean conflicts against the
// refreshed table (a replace always; an append only while the table's row
// indices still continue where the staged rows begin).
func (s *icebergStaged) Commit(ctx context.Context) (CommitResult, error) {
	if err := s.finish(); err != nil {
		return CommitResult{}, err
	}
	return s.commit(ctx, s.f.cat, nil)
}

// commit runs the commit attempts through cat; with a caller's transaction
// tx (cat then commits into it, see TxStaged) no error leaves the outcome
// unknown: nothing is visible before the caller commits tx.
func (s *icebergStaged) commit(ctx context.Context, cat catalog.Catalog, tx pgx.Tx) (CommitResult, error) {
	f := s.f
	tbl := s.base
	var lastErr error
	attempts := 0
	for attempt := 0; attempt <= f.s.CommitRetries; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, backoff(attempt, f.s.RetryMinWait, f.s.RetryMaxWait)); err != nil {
				f.deleteFiles(s.base, s.files)
				return CommitResult{}, err
			}
			r, err := f.refreshForRetry(ctx, s)
			if r.replay != nil {
				f.deleteFiles(s.base, s.files)
				return *r.replay, err
			}
			if err != nil {
				f.deleteFiles(s.base, s.files)
				return CommitResult{}, err
			}
			if r.unsound != nil {
				lastErr = r.unsound
				break
			}
			tbl = r.table
		}
		attempts++
		obs := &observedCatalog{Catalog: cat}
		if s.create != nil && tbl == s.base {
			obs.Catalog = creatingCatalog{Catalog: cat, pc: s.create, tx: tx, base: tbl.Metadata()}
		} else if pc, ok := f.cat.(*postgresCatalog); ok && tbl.MetadataLocation() != "" {
			obs.Catalog = swappingCatalog{Catalog: cat, pc: pc, tx: tx, loc: tbl.MetadataLocation(), base: tbl.Metadata()}
		}
		t := table.New(s.ident, tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, obs)
		txn, err := s.build(ctx, t)
		if err != nil {
			f.deleteFiles(s.base, s.files)
			return CommitResult{}, err
		}
		newTbl, err := txn.Commit(ctx)
		called, cerr := obs.outcome()
		switch {
		case tx != nil && called && cerr != nil && !isConflict(cerr):
			// Inside the caller's transaction: nothing is visible.
			f.deleteFiles(s.base, s.files)
			return CommitResult{}, fmt.Errorf("facade: commit %q in transaction: %w", s.target.DatasetID, cerr)
		case tx != nil && called && cerr == nil && (newTbl == nil || newTbl.CurrentSnapshot() == nil):
			f.deleteFiles(s.base, s.files)
			return CommitResult{}, fmt.Errorf("facade: commit %q in transaction: no snapshot: %w", s.target.DatasetID, err)
		case called && cerr == nil:
			if newTbl == nil || newTbl.CurrentSnapshot() == nil {
				return f.reconcile(ctx, s, attempts, err)
			}
			s.logSchemaChange(newTbl.Schema().ID)
			return s.result(newTbl, newTbl.CurrentSnapshot())
		case !called:
			// nothing reached the catalog: nothing committed
			f.deleteFiles(s.base, s.files)
			return CommitResult{}, fmt.Errorf("facade: commit %q: %w", s.target.DatasetID, err)
		case isAuthError(cerr):
			// refused before the catalog acted on it: nothing committed
			f.deleteFiles(s.base, s.files)
			return CommitResult{}, authError("commit "+strings.Join(s.ident, "."), cerr)
		case isConflict(cerr):
			lastErr = cerr
			f.s.Logger.Info("facade: commit conflict", "dataset", s.target.DatasetID, "attempt", attempts, "err", cerr)
			continue
		default:
			return f.reconcile(ctx, s, attempts, cerr)
		}
	}
	f.deleteFiles(s.base, s.files)
	return CommitResult{}, identity.CommitError(ErrCommitConflict, s.target.DatasetID, attempts, lastErr)
}

// logSchemaChange logs the schema change of the committed write, if any.
func (s *icebergStaged) logSchemaChange(toSchema int) {
	if s.change.Empty() {
		return
	}
	s.f.s.Logger.Info("facade: schema change", "dataset", s.target.DatasetID, "mode", string(s.req.Mode),
		"from_schema_id", s.fromSchema, "to_schema_id", toSchema, "change", s.change.String())
}

// reconcile looks for this write's snapshot after an ambiguous commit
// error: found means committed; otherwise the outcome stays unknown and
// the files are kept.
func (f *Facade) reconcile(ctx context.Context, s *icebergStaged, attempts int, cause error) (CommitResult, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if tbl, err := f.cat.LoadTable(rctx, s.ident); err == nil {
		if snap := findInAncestry(tbl, vocab.SummaryWriteID, s.info.WriteID); snap != nil {
			if snap.SchemaID != nil {
				s.logSchemaChange(*snap.SchemaID)
			}
			return s.result(tbl, snap)
		}
	}
	return CommitResult{}, identity.CommitError(ErrCommitStateUnknown, s.target.DatasetID, attempts, cause)
}

func (s *icebergStaged) result(tbl *table.Table, snap *table.Snapshot) (CommitResult, error) {
	if snap.Summary == nil || snap.Summary.Properties[vocab.SummaryWriteID] != s.info.WriteID {
		return CommitResult{}, identity.CommitError(ErrCommitStateUnknown, s.target.DatasetID, 1, errors.New("the committed head is not this write's snapshot"))
	}
	return CommitResult{
		TxnID: s.req.TxnID, Rows: s.info.Rows,
		SnapshotID: snap.SnapshotID, CommittedAt: time.UnixMilli(snap.TimestampMs).UTC(),
		Schema: snapshotSchema(tbl, snap), DataFiles: s.info.DataFiles, Checksum: s.checksum,
		Summary:        maps.Clone(map[string]string(snap.Summary.Properties)),
		MaintenanceDue: maintenanceDue(tbl.Metadata(), s.f.policy(s.target.DatasetID), s.f.s.now()),
	}, nil
}

type replayStaged struct {
	info StageInfo
	mu   sync.Mutex
	done bool
}

func (r *replayStaged) Info() StageInfo { return r.info }

func (r *replayStaged) Commit(context.Context) (CommitResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return CommitResult{}, ErrAlreadyFinished
	}
	r.done = true
	return *r.info.Replay, nil
}

func (r *replayStaged) Abort(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return ErrAlreadyFinished
	}
	r.done = true
	return nil
}

// emptySnapshot adds to txn a snapshot that adds and removes no file (a
// write of no row still commits one: it carries the write's id). It skips
// iceberg-go's duplicate check, which reads the entries of every live
// manifest to look for files among none: its cost grows with the table's
// history while the check cannot fail.
func emptySnapshot(ctx context.Context, txn *table.Transaction, summary iceberg.Properties) error {
	return txn.AddFiles(ctx, nil, summary, true)
}
