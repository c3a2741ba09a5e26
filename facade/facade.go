package facade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/lakewrite/lakewrite/facade/internal/keycache"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/lakewrite/lakewrite/facade/internal/identity"
	"github.com/lakewrite/lakewrite/internal/vocab"
)

// Facade is the iceberg-go implementation of Lakehouse. It is safe for
// concurrent use; it starts no goroutine that outlives a call.
type Facade struct {
	cat catalog.Catalog
	s   settings
	// keys holds the scope indexes of data files (Config.ScopeIndexBytes).
	keys *keycache.Cache
}

var _ Lakehouse = (*Facade)(nil)

// New returns a Facade writing through cat. A nil cfg means all defaults.
func New(cat catalog.Catalog, cfg *Config) (*Facade, error) {
	if cat == nil {
		return nil, errors.New("facade: New needs a catalog (see OpenSQLCatalog, OpenRESTCatalog)")
	}
	s, err := cfg.settings()
	if err != nil {
		return nil, err
	}
	return &Facade{cat: cat, s: s, keys: keycache.New(s.ScopeIndexBytes)}, nil
}

// TableIdentifier returns the table identifier of a dataset.
func (f *Facade) TableIdentifier(datasetID string) (table.Identifier, error) {
	return f.s.Naming(datasetID)
}

// LoadTable loads the table of a dataset (ErrTableNotFound when absent).
func (f *Facade) LoadTable(ctx context.Context, datasetID string) (*table.Table, error) {
	ident, err := f.s.Naming(datasetID)
	if err != nil {
		return nil, err
	}
	return f.load(ctx, datasetID, ident)
}

func (f *Facade) load(ctx context.Context, datasetID string, ident table.Identifier) (*table.Table, error) {
	tbl, err := f.cat.LoadTable(ctx, ident)
	if errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace) {
		return nil, fmt.Errorf("%w: %q (table %s)", ErrTableNotFound, datasetID, strings.Join(ident, "."))
	}
	if err != nil {
		return nil, authError("load table "+strings.Join(ident, "."), fmt.Errorf("facade: load table %s: %w", strings.Join(ident, "."), err))
	}
	return tbl, nil
}

// Write stages and commits one write: one snapshot, or an error and nothing
// visible.
func (f *Facade) Write(ctx context.Context, target Target, req WriteRequest) (CommitResult, error) {
	st, err := f.Stage(ctx, target, req)
	if err != nil {
		return CommitResult{}, err
	}
	return st.Commit(ctx)
}

func validateRequest(req WriteRequest) error {
	switch req.Mode {
	case Replace, Append:
	default:
		return fmt.Errorf("%w: mode %q (want %q or %q)", ErrInvalidRequest, req.Mode, Replace, Append)
	}
	if req.Schema == nil {
		return fmt.Errorf("%w: no schema", ErrInvalidRequest)
	}
	if req.Rows == nil {
		return fmt.Errorf("%w: no rows (use an empty sequence for an empty write)", ErrInvalidRequest)
	}
	return validateScope(req)
}

// Stage writes the data files of req and prepares its snapshot. Input
// errors, a failing stream and context cancellation leave the table
// untouched and delete the files written so far. The first write of a
// dataset creates its table (with no snapshot) before writing; on the
// catalog of NewPostgresCatalog its commit creates it, with its snapshot.
func (f *Facade) Stage(ctx context.Context, target Target, req WriteRequest) (Staged, error) {
	ident, err := f.s.Naming(target.DatasetID)
	if err != nil {
		return nil, err
	}
	if err := validateRequest(req); err != nil {
		return nil, err
	}
	cols, rowIDIdx, createdIdx, err := identity.RequestColumns(req.Schema)
	if err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("%w: no business columns", ErrInvalidRequest)
	}
	var tbl *table.Table
	var create *postgresCatalog
	var createNS string
	err = f.withCatalogWait(ctx, func(ctx context.Context) (err error) {
		tbl, create, createNS, err = f.loadOrCreate(ctx, target.DatasetID, ident, cols)
		return err
	})
	if err != nil {
		return nil, err
	}
	if req.Mode == Append && req.TxnID != "" {
		// An append whose txn id is in the table's history is replayed (as
		// FindTxn finds it, on the table just loaded).
		if snap := findInAncestry(tbl, SummaryTxnID, req.TxnID); snap != nil {
			res, err := f.resultFromSnapshot(ctx, tbl, target.DatasetID, snap, true)
			if err != nil {
				return nil, err
			}
			res.Replayed = true
			return &replayStaged{info: StageInfo{DatasetID: target.DatasetID,
				Rows: res.Rows, DataFiles: res.DataFiles, Replay: &res}}, nil
		}
	}
	if err := checkRowIDVersion(target.DatasetID, tbl.Properties()); err != nil {
		return nil, err
	}
	txn := tbl.NewTransaction()
	if _, err := f.prepareSchema(txn, tbl.Schema(), target.DatasetID, req.Mode, cols); err != nil {
		return nil, err
	}
	var scope *probeRun
	if req.Scope != nil {
		// The scope's rows in the table are read while the source's first
		// rows are computed (a GROUP BY yields none before its last input).
		scope = startProbe(ctx, func(ctx context.Context) (*mergePlan, error) {
			return f.probeScope(ctx, tbl, target.DatasetID, req)
		})
		defer scope.abandon()
	}
	// Peek at the first batch to choose the columns written without a
	// dictionary (see stagedWriteProps); the writer sees the whole stream.
	rows, stop, first, firstErr := peekFirst(req.Rows)
	defer stop()
	if firstErr == nil {
		if props := stagedWriteProps(first, tbl.Properties()); len(props) > 0 {
			if err := txn.SetProperties(props); err != nil {
				return nil, fmt.Errorf("facade: stage writer properties: %w", err)
			}
		}
	}
	if err := f.evolveLayout(txn, target.DatasetID); err != nil {
		return nil, err
	}
	if err := f.upgradeFormat(txn, target.DatasetID); err != nil {
		return nil, err
	}
	stagedTbl, err := txn.StagedTable()
	if err != nil {
		return nil, fmt.Errorf("facade: stage schema: %w", err)
	}
	writeSchema, err := table.SchemaToArrowSchema(stagedTbl.Schema(), nil, true, false)
	if err != nil {
		return nil, fmt.Errorf("facade: table schema to arrow: %w", err)
	}
	required := map[string]bool{}
	for _, fld := range stagedTbl.Schema().Fields() {
		if fld.Required && !identity.IsIdentity(fld.Name) {
			required[fld.Name] = true
		}
	}
	mp, mr, rows, stopMerge, err := f.mergeOf(ctx, tbl, req, scope, rows, first, firstErr)
	if err != nil {
		return nil, err
	}
	defer stopMerge()
	var rowBase int64
	if req.Mode == Append || mp != nil {
		if rowBase, err = nextRowIndex(ctx, tbl); err != nil {
			return nil, err
		}
	}
	createdAt := f.s.now().UTC().Truncate(time.Microsecond)
	writeID := uuid.New()
	st := identity.NewStamper(f.s.Allocator, target.DatasetID, req.Schema, writeSchema, required, rowIDIdx, createdIdx,
		rowBase, createdAt.UnixMicro(), f.s.ordinalSlots)

	var changes *afterRows
	if mp != nil {
		// The merge's delete files are written once its rows are read,
		// while the data files are still being finished.
		changes = &afterRows{}
		rows = changes.wrap(mp.filter(ctx, rows, mr.MergeDone), func() ([]iceberg.DataFile, error) {
			return mp.writeChanges(ctx, f, tbl, stagedTbl.Table, writeID)
		})
	}
	files, err := f.writeFiles(ctx, stagedTbl.Table, writeSchema, rows, st, writeID)
	if mp != nil {
		dels, derr := changes.wait(err == nil)
		files = append(files, dels...)
		if err == nil {
			err = derr
		}
	}
	if err != nil {
		f.deleteFiles(tbl, files)
		return nil, err
	}
	info := StageInfo{
		DatasetID: target.DatasetID, WriteID: writeID.String(), Rows: st.Checksum().Rows, CreatedAt: createdAt,
	}
	sum, baseSnapshotID := Checksum(st.Checksum()), int64(-1)
	if snap := tbl.CurrentSnapshot(); snap != nil {
		baseSnapshotID = snap.SnapshotID
	}
	for _, df := range files {
		if df.ContentType() == iceberg.EntryContentData {
			info.DataFiles = append(info.DataFiles, DataFile{Path: df.FilePath(), Rows: df.Count(), SizeBytes: df.FileSizeBytes()})
		}
	}
	if mp != nil {
		info.Rows, sum = mp.rows, Checksum(mp.sum)
	}
	staged := &icebergStaged{
		f: f, target: target, ident: ident, req: req, cols: cols, base: tbl, rowBase: rowBase,
		files: files, info: info, checksum: sum, baseSnapshotID: baseSnapshotID,
		props:  f.summary(target, req, info, sum, rowBase, tbl.CurrentSnapshot()),
		create: create, createNS: createNS, merge: mp != nil,
	}
	if mp != nil {
		staged.supersede, staged.cow = mp.superseded, mp.cow
		mp.summarize(staged.props, rowBase, tbl.CurrentSnapshot(), len(info.DataFiles))
		staged.info.Merge = mergeMode(mp, stagedTbl.Metadata().Version())
	}
	if tc, ok := f.cat.(txCatalog); ok {
		staged.info.CommitsInTx = true
		return &icebergTxStaged{icebergStaged: staged, cat: tc}, nil
	}
	return staged, nil
}

func (f *Facade) summary(target Target, req WriteRequest, info StageInfo, sum Checksum, rowBase int64, parent *table.Snapshot) iceberg.Properties {
	p := iceberg.Properties{}
	for k, v := range req.Metadata {
		p[SummaryMetaPrefix+k] = v
	}
	refs, _ := json.Marshal(append([]string{}, req.SourceRefs...))
	maps.Copy(p, iceberg.Properties{
		SummaryTxnID:            req.TxnID,
		vocab.SummaryWriterID:   target.WriterID,
		vocab.SummaryWorkspace:  target.Workspace,
		vocab.SummarySourceRefs: string(refs),
		vocab.SummaryMode:       string(req.Mode),
		vocab.SummaryWriteID:    info.WriteID,
		vocab.SummaryCreatedAt:  info.CreatedAt.Format(time.RFC3339Nano),
		vocab.SummaryRows:       strconv.FormatInt(info.Rows, 10),
		vocab.SummaryChecksum:   sum.String(),
		// an append commits only while the table still continues at
		// rowBase (see Commit), so this stays true across retries
		summaryNextRowIndex:       strconv.FormatInt(rowBase+info.Rows, 10),
		summaryCompactBase:        compactBase(parent, req.Mode, len(info.DataFiles)),
		vocab.SummaryRowIDVersion: RowIDVersion,
	})
	if req.Rounded != nil {
		p[vocab.SummaryNumericRounded] = strconv.FormatInt(req.Rounded(), 10)
	}
	return p
}

// withCatalogWait runs fn, a catalog request a write makes before any data
// is written (Stage's load or creation of the table, WriteOrder's and
// Scan's load, FindTxn's), bounded by Config.CatalogWait: the caller may
// hold connections of the catalog's pool while it waits. A request cut
// short by the bound, the caller's context still live, fails with an error
// matching ErrCatalogTimeout.
func (f *Facade) withCatalogWait(ctx context.Context, fn func(context.Context) error) error {
	wctx, cancel := context.WithTimeout(ctx, f.s.CatalogWait)
	defer cancel()
	err := fn(wctx)
	if err != nil && wctx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("%w (%s): %w", ErrCatalogTimeout, f.s.CatalogWait, err)
	}
	return err
}

// loadWithin is LoadTable bounded by Config.CatalogWait (withCatalogWait).
func (f *Facade) loadWithin(ctx context.Context, datasetID string) (tbl *table.Table, err error) {
	err = f.withCatalogWait(ctx, func(ctx context.Context) (err error) {
		tbl, err = f.LoadTable(ctx, datasetID)
		return err
	})
	return tbl, err
}

// loadOrCreate loads the dataset's table or creates it. On a
// postgresCatalog a new table is only pending (see pendingTable): create
// is then the catalog and createNS the namespace key its commit needs.
func (f *Facade) loadOrCreate(ctx context.Context, datasetID string, ident table.Identifier, cols []identity.Column) (tbl *table.Table, create *postgresCatalog, createNS string, err error) {
	pc, _ := f.cat.(*postgresCatalog)
	var probe *namespaceProbe // the namespace, read with the table's row
	if pc != nil {
		tbl, probe, err = pc.loadOrProbe(ctx, ident)
	} else {
		tbl, err = f.cat.LoadTable(ctx, ident)
	}
	if err == nil {
		return tbl, nil, "", nil
	}
	if !errors.Is(err, catalog.ErrNoSuchTable) && !errors.Is(err, catalog.ErrNoSuchNamespace) {
		return nil, nil, "", authError("load table "+strings.Join(ident, "."), fmt.Errorf("facade: load table %s: %w", strings.Join(ident, "."), err))
	}
	props := iceberg.Properties{
		table.PropertyFormatVersion: "2",
		table.ParquetCompressionKey: f.s.Compression,
		// lakewrite retries conflicts itself (see Staged.Commit).
		table.CommitNumRetriesKey: "0",
		"lakewrite.dataset-id":    datasetID,
		propertyRowIDVersion:      RowIDVersion,
		// __row_id and __row_index are unique per row: a dictionary never
		// pays, and the writer would hash the first page-row-limit values of
		// every row group before falling back to PLAIN.
		dictColumnKey + ColRowID:    "false",
		dictColumnKey + ColRowIndex: "false",
	}
	if f.s.CompressionLevel > 0 {
		props[table.ParquetCompressionLevelKey] = strconv.Itoa(f.s.CompressionLevel)
	}
	maps.Copy(props, manifestProperties()) // bounded manifest lists (compact.go)
	maps.Copy(props, f.s.TableProperties)
	if err := f.createFormatProps(props, datasetID); err != nil {
		return nil, nil, "", err
	}
	// the lifecycle policy owns the metadata retention properties
	maps.Copy(props, lifecycleProps(nil, f.policy(datasetID), f.s.now()))
	sc := identity.NewTableSchema(cols)
	opts := []catalog.CreateTableOpt{catalog.WithProperties(props)}
	if p, ok := f.partitioning(datasetID); ok {
		spec, order, err := layout(sc, p)
		if err != nil {
			return nil, nil, "", fmt.Errorf("facade: dataset %q: %w", datasetID, err)
		}
		opts = append(opts, catalog.WithPartitionSpec(spec), catalog.WithSortOrder(order))
	}
	createTable := func() (*table.Table, error) {
		if pc != nil {
			t, ns, err := pc.pendingTable(ctx, ident, sc, probe, opts...)
			create, createNS, probe = pc, ns, nil // a second try reads the namespace again
			return t, err
		}
		return f.cat.CreateTable(ctx, ident, sc, opts...)
	}
	tbl, err = createTable()
	if errors.Is(err, catalog.ErrNoSuchNamespace) {
		// The namespace is created by the first write that needs it.
		ns := catalog.NamespaceFromIdent(ident)
		if err := f.cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
			return nil, nil, "", authError("create namespace "+strings.Join(ns, "."), fmt.Errorf("facade: create namespace %s: %w", strings.Join(ns, "."), err))
		}
		tbl, err = createTable()
	}
	if errors.Is(err, catalog.ErrTableAlreadyExists) {
		tbl, err = f.cat.LoadTable(ctx, ident) // a concurrent first write won
	}
	if err != nil {
		return nil, nil, "", authError("create table "+strings.Join(ident, "."), fmt.Errorf("facade: create table %s: %w", strings.Join(ident, "."), err))
	}
	if pc == nil {
		create, createNS = nil, ""
	}
	return tbl, create, createNS, nil
}

func backoff(attempt int, lo, hi time.Duration) time.Duration {
	ceil := lo << min(attempt-1, 20)
	if ceil > hi || ceil <= 0 {
		ceil = hi
	}
	return lo + rand.N(ceil-lo+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
