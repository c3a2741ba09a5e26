package facade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade/internal/identity"
	"github.com/lakewrite/lakewrite/internal/scanfiles"
)

// Facade is the iceberg-go implementation of Lakehouse. It is safe for
// concurrent use; it starts no goroutine that outlives a call.
type Facade struct {
	cat catalog.Catalog
	s   settings
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
	return &Facade{cat: cat, s: s}, nil
}

// Catalog returns the catalog the facade writes through.
func (f *Facade) Catalog() catalog.Catalog { return f.cat }

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
	return nil
}

// Stage writes the data files of req and prepares its snapshot. Input
// errors, a failing stream and context cancellation leave the table
// untouched and delete the files written so far. The first write of a
// dataset creates its table (with no snapshot) before writing; on a
// PostgresCatalog its commit creates it, with its snapshot.
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
	tbl, create, createNS, err := f.loadOrCreate(ctx, target.DatasetID, ident, cols)
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
			return &replayStaged{info: StageInfo{DatasetID: target.DatasetID, TxnID: req.TxnID, Mode: req.Mode,
				Rows: res.Rows, DataFiles: res.DataFiles, Schema: res.Schema, Checksum: res.Checksum, Replay: &res}}, nil
		}
	}
	if err := checkRowIDVersion(target.DatasetID, tbl.Properties()); err != nil {
		return nil, err
	}
	txn := tbl.NewTransaction()
	if _, err := f.prepareSchema(txn, tbl.Schema(), target.DatasetID, req.Mode, cols); err != nil {
		return nil, err
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
	var rowBase int64
	if req.Mode == Append {
		if rowBase, err = nextRowIndex(ctx, tbl); err != nil {
			return nil, err
		}
	}
	createdAt := f.s.Now().UTC().Truncate(time.Microsecond)
	writeID := uuid.New()
	st := identity.NewStamper(f.s.Allocator, target.DatasetID, req.Schema, writeSchema, required, rowIDIdx, createdIdx,
		rowBase, createdAt.UnixMicro(), f.s.OrdinalSlots)

	files, err := f.writeFiles(ctx, stagedTbl.Table, writeSchema, rows, st, writeID)
	if err != nil {
		f.deleteFiles(tbl, files)
		return nil, err
	}
	info := StageInfo{
		DatasetID: target.DatasetID, TxnID: req.TxnID, WriteID: writeID.String(), Mode: req.Mode,
		Rows: st.Checksum().Rows, BaseSnapshotID: -1, Schema: identity.WithPgMetadata(writeSchema, stagedTbl.Schema()),
		Checksum: Checksum(st.Checksum()), CreatedAt: createdAt,
	}
	if snap := tbl.CurrentSnapshot(); snap != nil {
		info.BaseSnapshotID = snap.SnapshotID
	}
	for _, df := range files {
		info.DataFiles = append(info.DataFiles, DataFile{Path: df.FilePath(), Rows: df.Count(), SizeBytes: df.FileSizeBytes()})
	}
	staged := &icebergStaged{
		f: f, target: target, ident: ident, req: req, cols: cols, base: tbl, rowBase: rowBase,
		files: files, info: info, props: f.summary(target, req, info, rowBase, tbl.CurrentSnapshot()),
		create: create, createNS: createNS,
	}
	if tc, ok := f.cat.(TxCatalog); ok {
		staged.info.CommitsInTx = true
		return &icebergTxStaged{icebergStaged: staged, cat: tc}, nil
	}
	return staged, nil
}

func (f *Facade) summary(target Target, req WriteRequest, info StageInfo, rowBase int64, parent *table.Snapshot) iceberg.Properties {
	p := iceberg.Properties{}
	for k, v := range req.Metadata {
		p[SummaryMetaPrefix+k] = v
	}
	refs, _ := json.Marshal(append([]string{}, req.SourceRefs...))
	maps.Copy(p, iceberg.Properties{
		SummaryTxnID:      req.TxnID,
		SummaryWriterID:   target.WriterID,
		SummaryWorkspace:  target.Workspace,
		SummarySourceRefs: string(refs),
		SummaryMode:       string(req.Mode),
		SummaryWriteID:    info.WriteID,
		SummaryCreatedAt:  info.CreatedAt.Format(time.RFC3339Nano),
		SummaryRows:       strconv.FormatInt(info.Rows, 10),
		SummaryChecksum:   info.Checksum.String(),
		// an append commits only while the table still continues at
		// rowBase (see Commit), so this stays true across retries
		SummaryNextRowIndex: strconv.FormatInt(rowBase+info.Rows, 10),
		summaryCompactBase:  compactBase(parent, req.Mode, len(info.DataFiles)),
		SummaryRowIDVersion: RowIDVersion,
	})
	if req.Rounded != nil {
		p[SummaryNumericRounded] = strconv.FormatInt(req.Rounded(), 10)
	}
	return p
}

// loadOrCreate loads the dataset's table or creates it. On a
// PostgresCatalog a new table is only pending (see pendingTable): create
// is then the catalog and createNS the namespace key its commit needs.
func (f *Facade) loadOrCreate(ctx context.Context, datasetID string, ident table.Identifier, cols []identity.Column) (tbl *table.Table, create *PostgresCatalog, createNS string, err error) {
	pc, _ := f.cat.(*PostgresCatalog)
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
		PropertyRowIDVersion:      RowIDVersion,
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
	// the lifecycle policy owns the metadata retention properties
	maps.Copy(props, lifecycleProps(nil, f.policy(datasetID), f.s.Now()))
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

// prepareSchema evolves the table schema in txn for the write's business
// columns (as identity.PlanChange decides, under the dataset's
// SchemaPolicy), keeps the table's schema.name-mapping.default current,
// and returns what changed.
//
// A replace keeps a column's field id when its type is promoted the way
// Iceberg allows (int to long, float to double, decimal precision
// widening); any other type change deletes the column and adds it again
// under a new field id (a replace rewrites every row), unless the
// SchemaPolicy refuses it. The business columns end up in the write's
// order, before the identity columns, except incompatibly retyped ones,
// which land after them. An append promotes in place and adds the columns
// the table lacks as optional columns, before the identity columns.
func (f *Facade) prepareSchema(txn *table.Transaction, cur *iceberg.Schema, dataset string, mode WriteMode, cols []identity.Column) (SchemaChange, error) {
	plan, err := identity.PlanChange(dataset, mode, identity.SchemaPolicy(f.schemaPolicy(dataset)), identity.IcebergCols(cur), cols)
	ch := SchemaChange(plan)
	if err != nil {
		return ch, err
	}
	want := map[string]identity.Column{}
	for _, c := range cols {
		want[c.Field.Name] = c
	}
	if mode == Append {
		var missing []string
		for _, id := range identity.IdentityFields() {
			if _, ok := cur.FindFieldByName(id.Name); !ok {
				missing = append(missing, id.Name)
			}
		}
		if len(missing) > 0 {
			return ch, &SchemaMismatchError{Dataset: dataset, Columns: missing, Detail: "identity columns missing from the table (replace first)"}
		}
		if !ch.Empty() {
			upd := txn.UpdateSchema(true, false)
			for _, name := range ch.Promoted {
				c := want[name]
				upd.UpdateColumn([]string{name}, table.ColumnUpdate{
					FieldType: iceberg.Optional[iceberg.Type]{Val: c.Type, Valid: true},
					Doc:       iceberg.Optional[string]{Val: identity.DocFor(c), Valid: true},
				})
			}
			for _, name := range ch.Added {
				c := want[name]
				// optional: the rows already in the table read NULL
				upd.AddColumn([]string{name}, c.Type, identity.DocFor(c), false, nil)
				upd.MoveBefore([]string{name}, []string{ColRowIndex})
			}
			if err := upd.Commit(); err != nil {
				return ch, fmt.Errorf("facade: evolve schema of %q: %w", dataset, err)
			}
		}
		return ch, f.syncNameMapping(txn, dataset)
	}
	readd := map[string]bool{}
	for _, name := range ch.Retyped {
		readd[name] = true
	}

	// The order the update leaves without moves: the table's fields less
	// the deleted ones, then the added ones in the write's order.
	var identityMissing bool
	var order []string
	for _, fld := range cur.Fields() {
		_, ok := want[fld.Name]
		if identity.IsIdentity(fld.Name) || (ok && !readd[fld.Name]) {
			order = append(order, fld.Name)
		}
	}
	for _, c := range cols {
		if _, ok := cur.FindFieldByName(c.Field.Name); !ok || readd[c.Field.Name] {
			order = append(order, c.Field.Name)
		}
	}
	for _, id := range identity.IdentityFields() {
		if _, ok := cur.FindFieldByName(id.Name); !ok {
			order = append(order, id.Name)
			identityMissing = true
		}
	}
	target := make([]string, 0, len(cols)+3)
	for _, c := range cols {
		target = append(target, c.Field.Name)
	}
	for _, fld := range cur.Fields() {
		if identity.IsIdentity(fld.Name) {
			target = append(target, fld.Name)
		}
	}
	for _, id := range identity.IdentityFields() {
		if _, ok := cur.FindFieldByName(id.Name); !ok {
			target = append(target, id.Name)
		}
	}
	reorder := !slices.Equal(order, target)

	upd := txn.UpdateSchema(true, true)
	changed := false
	for _, name := range ch.Dropped {
		upd.DeleteColumn([]string{name})
		changed = true
	}
	for _, name := range ch.Retyped {
		upd.DeleteColumn([]string{name})
		changed = true
	}
	for _, name := range ch.Promoted {
		c := want[name]
		u := table.ColumnUpdate{
			FieldType: iceberg.Optional[iceberg.Type]{Val: c.Type, Valid: true},
			Doc:       iceberg.Optional[string]{Val: identity.DocFor(c), Valid: true},
		}
		if fld, _ := cur.FindFieldByName(name); fld.Required && !c.Required {
			u.Required = iceberg.Optional[bool]{Val: false, Valid: true}
		}
		upd.UpdateColumn([]string{name}, u)
		changed = true
	}
	for _, name := range ch.Relaxed {
		upd.UpdateColumn([]string{name}, table.ColumnUpdate{Required: iceberg.Optional[bool]{Val: false, Valid: true}})
		changed = true
	}
	for _, c := range cols {
		if _, ok := cur.FindFieldByName(c.Field.Name); ok && !readd[c.Field.Name] {
			continue
		}
		upd.AddColumn([]string{c.Field.Name}, c.Type, identity.DocFor(c), c.Required, nil)
		changed = true
	}
	if identityMissing {
		for _, id := range identity.IdentityFields() {
			if _, ok := cur.FindFieldByName(id.Name); !ok {
				upd.AddColumn([]string{id.Name}, id.Type, id.Doc, true, nil)
			}
		}
		changed = true
	}
	// iceberg-go cannot move (or move next to) a column deleted and added
	// again under the same name in one update, and a second update in the
	// same transaction asserts the staged schema id, which the catalog
	// rejects. So a retyped column stays where the update adds it: after
	// the identity columns; every other column takes its place.
	if reorder {
		movable := slices.DeleteFunc(slices.Clone(target), func(n string) bool { return readd[n] })
		moveTo(upd, movable)
		changed = true
	}
	if changed {
		if err := upd.Commit(); err != nil {
			return ch, fmt.Errorf("facade: evolve schema of %q: %w", dataset, err)
		}
	}
	return ch, f.syncNameMapping(txn, dataset)
}

// moveTo orders the top-level columns as target.
func moveTo(upd *table.UpdateSchema, target []string) {
	for i, name := range target {
		if i == 0 {
			upd.MoveFirst([]string{name})
		} else {
			upd.MoveAfter([]string{name}, []string{target[i-1]})
		}
	}
}

// syncNameMapping sets schema.name-mapping.default to the mapping of the
// schema staged in txn when it differs.
func (f *Facade) syncNameMapping(txn *table.Transaction, dataset string) error {
	staged, err := txn.StagedTable()
	if err != nil {
		return fmt.Errorf("facade: stage schema of %q: %w", dataset, err)
	}
	nm, err := nameMappingJSON(staged.Schema())
	if err != nil {
		return err
	}
	if staged.Properties()[table.DefaultNameMappingKey] == nm {
		return nil
	}
	if err := txn.SetProperties(iceberg.Properties{table.DefaultNameMappingKey: nm}); err != nil {
		return fmt.Errorf("facade: set name mapping of %q: %w", dataset, err)
	}
	return nil
}

// nextRowIndex is the __row_index an append to the current snapshot
// starts at: SummaryNextRowIndex of the head snapshot (O(1)), or, for a
// head without it, max(__row_index)+1 from the live data files' upper
// bounds (falling back to the snapshot's total-records when a file has no
// bound).
func nextRowIndex(ctx context.Context, tbl *table.Table) (int64, error) {
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return 0, nil
	}
	if snap.Summary != nil {
		if v, ok := snap.Summary.Properties[SummaryNextRowIndex]; ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
				return n, nil
			}
		}
	}
	fld, ok := tbl.Schema().FindFieldByName(ColRowIndex)
	if !ok {
		return 0, fmt.Errorf("facade: table has no %s column", ColRowIndex)
	}
	tasks, err := scanfiles.Plan(ctx, tbl.Scan(table.WithSnapshotID(snap.SnapshotID)))
	if err != nil {
		return 0, fmt.Errorf("facade: plan files: %w", err)
	}
	next := int64(0)
	for _, t := range tasks {
		if t.File.Count() == 0 {
			continue
		}
		b, ok := t.File.UpperBoundValues()[fld.ID]
		if !ok || len(b) != 8 {
			total, _ := strconv.ParseInt(snap.Summary.Properties["total-records"], 10, 64)
			return total, nil
		}
		v := int64(uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56)
		next = max(next, v+1)
	}
	return next, nil
}

// writeFiles stamps the rows and writes them as data files, encoded by up to
// WriteWorkers parallel writers that take the stamped batches in turns of
// RowGroupRows rows (the next writer starts only when the stream reaches
// it). Stamping runs on the caller's goroutine, in stream order, so row ids
// and the checksum do not depend on the number of writers.
//
// The streams handed to iceberg-go never carry an error and never see the
// caller's cancellation: on any failure they simply end, so every file the
// writers produced is returned (and deleted by the caller) instead of
// leaking as an orphan (iceberg-go can leave a complete data file behind
// when its input fails mid-stream).
func (f *Facade) writeFiles(ctx context.Context, tbl *table.Table, sc *arrow.Schema,
	rows iter.Seq2[arrow.RecordBatch, error], st *identity.Stamper, writeID uuid.UUID) ([]iceberg.DataFile, error) {
	wctx := compute.WithAllocator(context.WithoutCancel(ctx), f.s.Allocator)
	// A partitioned table is written by one clustered writer (partition.go).
	cc, err := newClusterCheck(datasetOf(tbl), tbl)
	if err != nil {
		return nil, err
	}
	nWorkers, layoutOpt := f.s.WriteWorkers, table.WithMaxWriteWorkers(1)
	if cc != nil {
		nWorkers, layoutOpt = 1, table.WithClusteredWrite()
	}
	failed := make(chan struct{})
	var failOnce sync.Once
	var workers []*fileWorker
	defer func() {
		// Every started worker ends before writeFiles returns: no goroutine
		// outlives the call.
		for _, w := range workers {
			w.finish()
		}
	}()
	native := cc == nil && nativeWritable(tbl, sc)
	start := func() error {
		id := writeID
		if len(workers) > 0 {
			// Distinct file names per writer: iceberg-go numbers files per call.
			id = uuid.NewSHA1(writeID, []byte{byte(len(workers))})
		}
		fail := func() { failOnce.Do(func() { close(failed) }) }
		if native {
			nf, err := newNativeFiles(wctx, tbl, sc, f.s.RowGroupRows, f.s.TargetFileSize, f.s.Allocator, id)
			if err != nil {
				return err
			}
			w := &fileWorker{in: make(chan arrow.RecordBatch, f.s.WriteQueue), done: make(chan struct{})}
			go w.runNative(nf, fail)
			workers = append(workers, w)
			return nil
		}
		w := &fileWorker{in: make(chan arrow.RecordBatch), done: make(chan struct{})}
		go w.run(wctx, tbl, sc, fail,
			table.WithWriteUUID(id),
			table.WithRecordBatchBufferSize(f.s.WriteQueue),
			table.WithTargetFileSize(f.s.TargetFileSize),
			table.WithParquetRowGroupLimit(f.s.RowGroupRows),
			layoutOpt,
		)
		workers = append(workers, w)
		return nil
	}

	srcErr := func() error {
		var (
			cur   int   // index of the worker taking batches
			taken int64 // rows it has taken in this turn
		)
		for rec, err := range rows {
			if err != nil {
				return err
			}
			if err := context.Cause(ctx); err != nil {
				return err
			}
			if rec.NumRows() == 0 {
				continue
			}
			out, err := st.Stamp(rec)
			if err != nil {
				return err
			}
			if cc != nil {
				if err := cc.check(out); err != nil {
					out.Release()
					return err
				}
			}
			if taken >= int64(f.s.RowGroupRows) {
				cur, taken = (cur+1)%nWorkers, 0
			}
			if cur == len(workers) {
				if err := start(); err != nil {
					out.Release()
					return err
				}
			}
			taken += out.NumRows()
			select {
			case workers[cur].in <- out:
			case <-failed:
				out.Release()
				return nil // the writer's error is reported below
			}
		}
		return context.Cause(ctx)
	}()

	var (
		files []iceberg.DataFile
		werr  error
	)
	for _, w := range workers {
		w.finish()
		files = append(files, w.files...)
		werr = errors.Join(werr, w.err)
	}
	if srcErr != nil {
		return files, srcErr
	}
	if werr != nil {
		return files, fmt.Errorf("facade: write data files: %w", werr)
	}
	return files, nil
}

// fileWorker runs one iceberg-go writer over the batches sent on in.
type fileWorker struct {
	in     chan arrow.RecordBatch
	done   chan struct{}
	closed bool
	files  []iceberg.DataFile
	err    error
}

func (w *fileWorker) run(ctx context.Context, tbl *table.Table, sc *arrow.Schema, fail func(), opts ...table.WriteRecordOption) {
	defer close(w.done)
	feed := func(yield func(arrow.RecordBatch, error) bool) {
		for rec := range w.in {
			if !yield(rec, nil) { // WriteRecords releases rec
				return
			}
		}
	}
	for df, err := range table.WriteRecords(ctx, tbl, sc, feed, opts...) {
		if err != nil {
			w.err = errors.Join(w.err, err)
			continue
		}
		w.files = append(w.files, df)
	}
	if w.err != nil {
		fail()
	}
	// The producer may still be sending until it sees the failure.
	for rec := range w.in {
		rec.Release()
	}
}

// finish ends the worker's input and waits for it; it is idempotent and
// called from the producer's goroutine only.
func (w *fileWorker) finish() {
	if !w.closed {
		w.closed = true
		close(w.in)
	}
	<-w.done
}

func (f *Facade) deleteFiles(tbl *table.Table, files []iceberg.DataFile) {
	if len(files) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fs, err := tbl.FS(ctx)
	if err != nil {
		f.s.Logger.Warn("facade: cannot delete staged files", "err", err, "files", len(files))
		return
	}
	for _, df := range files {
		if err := fs.Remove(df.FilePath()); err != nil {
			f.s.Logger.Warn("facade: cannot delete staged file", "path", df.FilePath(), "err", err)
		}
	}
}

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
	props   iceberg.Properties

	change     SchemaChange // of the last attempt (build)
	fromSchema int          // the schema id it changed

	// create: base is a pending table (see pendingTable) that the commit
	// creates, in the namespace createNS of this catalog.
	create   *PostgresCatalog
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
	if err := sameSpec(txn, s.files); err != nil {
		return nil, err
	}
	summary := maps.Clone(s.props)
	delete(summary, SummarySchemaChange)
	if !change.Empty() {
		summary[SummarySchemaChange] = change.String()
	}
	// Tables written before the lifecycle existed get its properties (and
	// manifest merging, which bounds the manifest list: see compact.go) in
	// this same commit.
	props := lifecycleProps(tbl.Properties(), s.f.policy(s.target.DatasetID), s.f.s.Now())
	if p := missingManifestProperties(tbl.Properties()); len(p) > 0 {
		if props == nil {
			props = iceberg.Properties{}
		}
		maps.Copy(props, p)
	}
	if _, ok := tbl.Properties()[PropertyRowIDVersion]; !ok {
		// a table written before the version was recorded: same function
		if props == nil {
			props = iceberg.Properties{}
		}
		props[PropertyRowIDVersion] = RowIDVersion
	}
	if len(props) > 0 {
		if err := txn.SetProperties(props); err != nil {
			return nil, fmt.Errorf("facade: set table properties: %w", err)
		}
	}
	var old []iceberg.DataFile
	if s.req.Mode == Replace && tbl.CurrentSnapshot() != nil {
		// keyed by path: a file over the split size is planned as several tasks
		tasks, err := tbl.Scan().PlanFiles(ctx)
		if err != nil {
			return nil, fmt.Errorf("facade: plan files: %w", err)
		}
		old = scanfiles.DataFiles(tasks)
	}
	switch {
	case len(old) > 0:
		err = txn.ReplaceDataFilesWithDataFiles(ctx, old, s.files, summary)
	case len(s.files) > 0:
		// The files were just written under this write's unique id: the
		// duplicate check, which reads every live manifest, cannot fail.
		err = txn.AddDataFiles(ctx, s.files, summary, table.WithoutDuplicateCheck())
	default:
		err = txn.AddFiles(ctx, nil, summary, false) // an empty snapshot
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
		} else if pc, ok := f.cat.(*PostgresCatalog); ok && tbl.MetadataLocation() != "" {
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
	return CommitResult{}, &CommitError{Dataset: s.target.DatasetID, Attempts: attempts, Kind: ErrCommitConflict, Err: lastErr}
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
		if snap := findInAncestry(tbl, SummaryWriteID, s.info.WriteID); snap != nil {
			if snap.SchemaID != nil {
				s.logSchemaChange(*snap.SchemaID)
			}
			return s.result(tbl, snap)
		}
	}
	return CommitResult{}, &CommitError{Dataset: s.target.DatasetID, Attempts: attempts, Kind: ErrCommitStateUnknown, Err: cause}
}

func (s *icebergStaged) result(tbl *table.Table, snap *table.Snapshot) (CommitResult, error) {
	if snap.Summary == nil || snap.Summary.Properties[SummaryWriteID] != s.info.WriteID {
		return CommitResult{}, &CommitError{Dataset: s.target.DatasetID, Attempts: 1, Kind: ErrCommitStateUnknown,
			Err: errors.New("the committed head is not this write's snapshot")}
	}
	return CommitResult{
		DatasetID: s.target.DatasetID, TxnID: s.req.TxnID, Mode: s.req.Mode, Rows: s.info.Rows,
		SnapshotID: snap.SnapshotID, CommittedAt: time.UnixMilli(snap.TimestampMs).UTC(),
		Schema: snapshotSchema(tbl, snap), DataFiles: s.info.DataFiles, Checksum: s.info.Checksum,
		Summary:        maps.Clone(map[string]string(snap.Summary.Properties)),
		MaintenanceDue: maintenanceDue(tbl.Metadata(), s.f.policy(s.target.DatasetID), s.f.s.Now()),
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
