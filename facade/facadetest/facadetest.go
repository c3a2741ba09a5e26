package facadetest

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/internal/identity"
	"github.com/lakewrite/lakewrite/internal/vocab"
)

// Config configures the double; the zero value is usable.
type Config struct {
	// Allocator for stamped batches. Default memory.DefaultAllocator.
	Allocator memory.Allocator
	// Lifecycle is the maintenance policy of every dataset. The double
	// honours Disabled, KeepLast and EveryCommits (expiry, and
	// CommitResult.MaintenanceDue when EveryCommits snapshots are
	// expirable); it holds no files, so it has no grace, orphans or
	// compaction.
	Lifecycle facade.Lifecycle
	// SchemaPolicy and SchemaPolicyFor restrict schema changes as
	// facade.Config's fields of the same names do.
	SchemaPolicy    facade.SchemaPolicy
	SchemaPolicyFor func(datasetID string) (policy facade.SchemaPolicy, ok bool)
}

// Snapshot is one committed snapshot of a dataset: its id and its summary
// (the facade.Summary* keys).
type Snapshot struct {
	ID          int64
	Summary     map[string]string
	committedAt time.Time
	schema      *arrow.Schema
	batches     []arrow.RecordBatch // the whole table at this snapshot
	added       []facade.DataFile
	checksum    facade.Checksum
}

type dataset struct {
	schema    *arrow.Schema // nil until the first write
	snapshots []*Snapshot
	nextIndex int64
}

func (d *dataset) current() *Snapshot {
	if len(d.snapshots) == 0 {
		return nil
	}
	return d.snapshots[len(d.snapshots)-1]
}

// Lakehouse is the in-memory double. Safe for concurrent use.
type Lakehouse struct {
	mem       memory.Allocator
	now       func() time.Time
	pol       facade.Lifecycle
	schema    facade.SchemaPolicy
	schemaFor func(string) (facade.SchemaPolicy, bool)

	mu       sync.Mutex
	datasets map[string]*dataset
	nextID   int64
	writes   int64
}

var (
	_ facade.Lakehouse  = (*Lakehouse)(nil)
	_ facade.Maintainer = (*Lakehouse)(nil)
)

// New returns an empty double.
func New(cfg *Config) *Lakehouse {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Allocator == nil {
		c.Allocator = memory.DefaultAllocator
	}
	pol := c.Lifecycle
	if pol.KeepLast <= 0 {
		pol.KeepLast = identity.DefaultKeepLast
	}
	if pol.EveryCommits <= 0 {
		pol.EveryCommits = identity.DefaultEveryCommits
	}
	return &Lakehouse{mem: c.Allocator, now: time.Now, pol: pol, schema: c.SchemaPolicy, schemaFor: c.SchemaPolicyFor,
		datasets: map[string]*dataset{}}
}

// Snapshots returns the dataset's snapshots, oldest first.
func (l *Lakehouse) Snapshots(datasetID string) []Snapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Snapshot
	if d := l.datasets[datasetID]; d != nil {
		for _, s := range d.snapshots {
			c := *s
			c.batches = nil
			c.Summary = maps.Clone(s.Summary)
			out = append(out, c)
		}
	}
	return out
}

// Close releases every batch held.
func (l *Lakehouse) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range l.datasets {
		for _, s := range d.snapshots {
			for _, b := range s.batches {
				b.Release()
			}
		}
	}
	l.datasets = map[string]*dataset{}
}

// Write is Stage then Commit.
func (l *Lakehouse) Write(ctx context.Context, target facade.Target, req facade.WriteRequest) (facade.CommitResult, error) {
	st, err := l.Stage(ctx, target, req)
	if err != nil {
		return facade.CommitResult{}, err
	}
	return st.Commit(ctx)
}

// Stage consumes and stamps the rows; nothing is visible until Commit.
func (l *Lakehouse) Stage(ctx context.Context, target facade.Target, req facade.WriteRequest) (facade.Staged, error) {
	if facade.CheckDatasetID(target.DatasetID) != nil {
		return nil, fmt.Errorf("%w: %q", facade.ErrInvalidDatasetID, target.DatasetID)
	}
	switch {
	case req.Mode != facade.Replace && req.Mode != facade.Append:
		return nil, fmt.Errorf("%w: mode %q", facade.ErrInvalidRequest, req.Mode)
	case req.Schema == nil || req.Rows == nil:
		return nil, fmt.Errorf("%w: schema and rows are required", facade.ErrInvalidRequest)
	case req.Scope != nil && req.Mode != facade.Replace:
		return nil, fmt.Errorf("%w: a Scope needs mode %q", facade.ErrInvalidRequest, facade.Replace)
	case req.Scope != nil:
		if err := identity.CheckScope(req.Schema, req.Scope.Columns, req.Scope.Keys); err != nil {
			return nil, err
		}
	}
	if req.Mode == facade.Append && req.TxnID != "" {
		res, found, err := l.FindTxn(ctx, target.DatasetID, req.TxnID)
		if err != nil {
			return nil, err
		}
		if found {
			res.Replayed = true
			return &staged{l: l, replay: &res, info: facade.StageInfo{DatasetID: target.DatasetID,
				Rows: res.Rows, Replay: &res}}, nil
		}
	}
	l.mu.Lock()
	d := l.datasets[target.DatasetID]
	var cur *arrow.Schema
	var read *Snapshot // a scoped replace's: the snapshot it reads
	var readRows []arrow.RecordBatch
	base := int64(0)
	if d != nil {
		cur = d.schema
		if req.Mode == facade.Append || req.Scope != nil {
			base = d.nextIndex
		}
		if read = d.current(); read != nil && req.Scope != nil {
			for _, b := range read.batches {
				b.Retain()
				readRows = append(readRows, b)
			}
		}
	}
	l.writes++
	writeID := fmt.Sprintf("write-%d", l.writes)
	l.mu.Unlock()

	pol := l.schema
	if l.schemaFor != nil {
		if p, ok := l.schemaFor(target.DatasetID); ok {
			pol = p
		}
	}
	defer release(readRows)
	sc, plan, err := identity.PlanSchema(target.DatasetID, req.Mode, identity.SchemaPolicy(pol), cur, req.Schema)
	if err != nil {
		return nil, err
	}
	createdAt := l.now().UTC().Truncate(time.Microsecond)
	st, err := identity.NewTableStamper(l.mem, target.DatasetID, req.Schema, sc, base, createdAt)
	if err != nil {
		return nil, err
	}
	if req.Scope != nil {
		s := &staged{l: l, target: target, req: req, base: base, schema: sc, from: cur, change: plan, scoped: true, read: read,
			info: facade.StageInfo{DatasetID: target.DatasetID, WriteID: writeID, CreatedAt: createdAt}}
		if err := l.stageScoped(ctx, s, st, readRows); err != nil {
			return nil, err
		}
		return s, nil
	}
	var out []arrow.RecordBatch
	release := func() {
		for _, b := range out {
			b.Release()
		}
	}
	for rec, err := range req.Rows {
		if err == nil {
			err = context.Cause(ctx)
		}
		if err != nil {
			release()
			return nil, err
		}
		if rec.NumRows() == 0 {
			continue
		}
		b, err := st.Stamp(rec)
		if err != nil {
			release()
			return nil, err
		}
		out = append(out, b)
	}
	if err := context.Cause(ctx); err != nil {
		release()
		return nil, err
	}
	sum := facade.Checksum(st.Checksum())
	files := []facade.DataFile{}
	if sum.Rows > 0 {
		files = append(files, facade.DataFile{Path: "mem://" + target.DatasetID + "/" + writeID, Rows: sum.Rows})
	}
	return &staged{l: l, target: target, req: req, batches: out, base: base, next: st.Next(), schema: sc,
		from: cur, change: plan,
		checksum: sum, info: facade.StageInfo{DatasetID: target.DatasetID, WriteID: writeID,
			Rows: sum.Rows, DataFiles: files, CreatedAt: createdAt}}, nil
}

type staged struct {
	l        *Lakehouse
	target   facade.Target
	req      facade.WriteRequest
	batches  []arrow.RecordBatch
	base     int64
	next     int64
	schema   *arrow.Schema
	from     *arrow.Schema // the table schema the write was planned on
	change   identity.SchemaChange
	info     facade.StageInfo
	checksum facade.Checksum
	replay   *facade.CommitResult
	// scoped: a scoped replace of the snapshot read (nil: none), batches
	// the whole table after it
	scoped bool
	read   *Snapshot

	mu   sync.Mutex
	done bool
}

func (s *staged) Info() facade.StageInfo { return s.info }

func (s *staged) finish() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return facade.ErrAlreadyFinished
	}
	s.done = true
	return nil
}

func (s *staged) Abort(context.Context) error {
	if err := s.finish(); err != nil {
		return err
	}
	for _, b := range s.batches {
		b.Release()
	}
	return nil
}

func (s *staged) Commit(ctx context.Context) (facade.CommitResult, error) {
	if err := s.finish(); err != nil {
		return facade.CommitResult{}, err
	}
	if s.replay != nil {
		return *s.replay, nil
	}
	drop := func() {
		for _, b := range s.batches {
			b.Release()
		}
	}
	if err := context.Cause(ctx); err != nil {
		drop()
		return facade.CommitResult{}, err
	}
	l := s.l
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.datasets[s.target.DatasetID]
	if d == nil {
		d = &dataset{}
		l.datasets[s.target.DatasetID] = d
	}
	cur := d.current()
	if s.from != nil && !s.from.Equal(d.schema) {
		drop()
		return facade.CommitResult{}, identity.CommitError(facade.ErrCommitConflict, s.target.DatasetID, 1, errors.New("table schema changed concurrently"))
	}
	if s.scoped && cur != s.read {
		drop()
		return facade.CommitResult{}, identity.CommitError(facade.ErrCommitConflict, s.target.DatasetID, 1, errors.New("the table changed since the scoped replace read it"))
	}
	if s.req.Mode == facade.Append {
		if d.nextIndex != s.base {
			drop()
			return facade.CommitResult{}, identity.CommitError(facade.ErrCommitConflict, s.target.DatasetID, 1, errors.New("a concurrent append moved __row_index"))
		}
	}
	l.nextID++
	snap := &Snapshot{ID: l.nextID, committedAt: l.now().UTC().Truncate(time.Millisecond), schema: s.schema,
		Summary: summary(s.target, s.req, s.info, s.checksum, s.change), added: s.info.DataFiles, checksum: s.checksum}
	if s.req.Mode == facade.Append && cur != nil {
		for _, b := range cur.batches {
			if s.change.Empty() {
				b.Retain()
				snap.batches = append(snap.batches, b)
				continue
			}
			// the rows already in the table, read under the new schema
			p, err := project(ctx, l.mem, b, s.schema)
			if err != nil {
				drop()
				for _, b := range snap.batches {
					b.Release()
				}
				return facade.CommitResult{}, fmt.Errorf("facadetest: evolve %q: %w", s.target.DatasetID, err)
			}
			snap.batches = append(snap.batches, p)
		}
	}
	snap.batches = append(snap.batches, s.batches...)
	d.snapshots = append(d.snapshots, snap)
	d.schema = s.schema
	d.nextIndex = s.next
	res := result(s.target.DatasetID, snap)
	res.MaintenanceDue = !l.pol.Disabled && len(d.snapshots)-l.pol.KeepLast >= l.pol.EveryCommits
	return res, nil
}

func summary(t facade.Target, req facade.WriteRequest, info facade.StageInfo, sum facade.Checksum, change identity.SchemaChange) map[string]string {
	m := map[string]string{}
	for k, v := range req.Metadata {
		m[facade.SummaryMetaPrefix+k] = v
	}
	refs := "["
	for i, r := range req.SourceRefs {
		if i > 0 {
			refs += ","
		}
		refs += fmt.Sprintf("%q", r)
	}
	maps.Copy(m, map[string]string{
		facade.SummaryTxnID: req.TxnID, vocab.SummaryWriterID: t.WriterID, vocab.SummaryWorkspace: t.Workspace,
		vocab.SummarySourceRefs: refs + "]", vocab.SummaryMode: string(req.Mode), vocab.SummaryWriteID: info.WriteID,
		vocab.SummaryCreatedAt: info.CreatedAt.Format(time.RFC3339Nano), vocab.SummaryRows: fmt.Sprint(info.Rows),
		vocab.SummaryChecksum: sum.String(), vocab.SummaryRowIDVersion: facade.RowIDVersion,
	})
	if req.Rounded != nil {
		m[vocab.SummaryNumericRounded] = fmt.Sprint(req.Rounded())
	}
	if !change.Empty() {
		m[vocab.SummarySchemaChange] = change.String()
	}
	return m
}

func result(datasetID string, s *Snapshot) facade.CommitResult {
	return facade.CommitResult{
		TxnID: s.Summary[facade.SummaryTxnID],
		Rows:  rowsOf(s), SnapshotID: s.ID, CommittedAt: s.committedAt, Schema: s.schema,
		DataFiles: slices.Clone(s.added), Checksum: s.checksum, Summary: maps.Clone(s.Summary),
	}
}

func rowsOf(s *Snapshot) int64 {
	var n int64
	_, _ = fmt.Sscan(s.Summary[vocab.SummaryRows], &n)
	return n
}

// Maintain expires the snapshots beyond Config.Lifecycle.KeepLast (the
// current one always kept) once EveryCommits of them are expirable, as the
// Iceberg facade does, and releases their batches. Only SnapshotsExpired
// is counted: the double holds no files.
func (l *Lakehouse) Maintain(ctx context.Context, datasetID string) (facade.MaintenanceReport, error) {
	rep := facade.MaintenanceReport{DatasetID: datasetID, StartedAt: l.now().UTC()}
	if facade.CheckDatasetID(datasetID) != nil {
		return rep, fmt.Errorf("%w: %q", facade.ErrInvalidDatasetID, datasetID)
	}
	if err := context.Cause(ctx); err != nil {
		return rep, err
	}
	if l.pol.Disabled {
		rep.Skipped = "disabled"
		return rep, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.datasets[datasetID]
	switch {
	case d == nil:
		rep.Skipped = "no table"
	case len(d.snapshots)-l.pol.KeepLast >= l.pol.EveryCommits:
		n := len(d.snapshots) - l.pol.KeepLast
		for _, s := range d.snapshots[:n] {
			for _, b := range s.batches {
				b.Release()
			}
		}
		d.snapshots = slices.Delete(d.snapshots, 0, n)
		rep.SnapshotsExpired = n
	default:
		rep.Skipped = "nothing due"
	}
	rep.Duration = l.now().Sub(rep.StartedAt)
	return rep, nil
}

// FindTxn walks the snapshots from the newest.
func (l *Lakehouse) FindTxn(_ context.Context, datasetID, txnID string) (facade.CommitResult, bool, error) {
	if facade.CheckDatasetID(datasetID) != nil {
		return facade.CommitResult{}, false, fmt.Errorf("%w: %q", facade.ErrInvalidDatasetID, datasetID)
	}
	if txnID == "" {
		return facade.CommitResult{}, false, fmt.Errorf("%w: empty txn id", facade.ErrInvalidRequest)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.datasets[datasetID]
	if d == nil {
		return facade.CommitResult{}, false, nil
	}
	for _, s := range slices.Backward(d.snapshots) {
		if s.Summary[facade.SummaryTxnID] == txnID {
			return result(datasetID, s), true, nil
		}
	}
	return facade.CommitResult{}, false, nil
}

// Unchanged reports whether the dataset still holds the rows of snapshot
// snapshotID, as facade.Facade.Unchanged: "" when it is the head (the
// double commits no compaction), else why not.
func (l *Lakehouse) Unchanged(_ context.Context, datasetID string, snapshotID int64) (string, error) {
	if facade.CheckDatasetID(datasetID) != nil {
		return "", fmt.Errorf("%w: %q", facade.ErrInvalidDatasetID, datasetID)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.datasets[datasetID]
	switch {
	case d == nil || len(d.snapshots) == 0:
		return "its table does not exist", nil
	case d.snapshots[len(d.snapshots)-1].ID == snapshotID:
		return "", nil
	case slices.ContainsFunc(d.snapshots, func(s *Snapshot) bool { return s.ID == snapshotID }):
		return fmt.Sprintf("its table has a write after snapshot %d", snapshotID), nil
	}
	return fmt.Sprintf("its table's retained history does not reach snapshot %d", snapshotID), nil
}

// Scan yields the snapshot's batches (valid during the yield only).
func (l *Lakehouse) Scan(ctx context.Context, datasetID string, opts facade.ScanOptions) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		l.mu.Lock()
		d := l.datasets[datasetID]
		var snap *Snapshot
		var err error
		switch {
		case facade.CheckDatasetID(datasetID) != nil:
			err = fmt.Errorf("%w: %q", facade.ErrInvalidDatasetID, datasetID)
		case d == nil:
			err = fmt.Errorf("%w: %q", facade.ErrTableNotFound, datasetID)
		case opts.SnapshotID != 0:
			for _, s := range d.snapshots {
				if s.ID == opts.SnapshotID {
					snap = s
				}
			}
			if snap == nil {
				err = fmt.Errorf("%w: %d", facade.ErrSnapshotNotFound, opts.SnapshotID)
			}
		default:
			snap = d.current()
		}
		var batches []arrow.RecordBatch
		if snap != nil {
			for _, b := range snap.batches {
				b.Retain()
				batches = append(batches, b)
			}
		}
		l.mu.Unlock()
		defer func() {
			for _, b := range batches {
				b.Release()
			}
		}()
		if err != nil {
			yield(nil, err)
			return
		}
		if snap == nil {
			return
		}
		var idx []int
		for i, f := range snap.schema.Fields() {
			if opts.Columns != nil && !slices.Contains(opts.Columns, f.Name) {
				continue
			}
			if opts.ExcludeIdentity && (f.Name == facade.ColRowIndex || f.Name == facade.ColRowID || f.Name == facade.ColCreatedAt) {
				continue
			}
			idx = append(idx, i)
		}
		for _, c := range opts.Columns {
			if len(snap.schema.FieldIndices(c)) == 0 {
				yield(nil, fmt.Errorf("%w: no column %q", facade.ErrInvalidRequest, c))
				return
			}
		}
		filter, err := bindFilter(snap.schema, opts.Filter, opts.In)
		if err != nil {
			yield(nil, fmt.Errorf("dataset %q: %w", datasetID, err))
			return
		}
		fields := make([]arrow.Field, len(idx))
		for j, i := range idx {
			fields[j] = snap.schema.Field(i)
		}
		outSchema := arrow.NewSchema(fields, nil)
		for k, b := range batches {
			if err := context.Cause(ctx); err != nil {
				yield(nil, err)
				return
			}
			if len(filter) > 0 {
				fb, err := filterBatch(ctx, l.mem, b, filter)
				if err != nil {
					yield(nil, err)
					return
				}
				b.Release() // the filtered batch replaces b, released by the deferred loop
				b, batches[k] = fb, fb
			}
			cols := make([]arrow.Array, len(idx))
			for j, i := range idx {
				cols[j] = b.Column(i)
			}
			out := newBatch(outSchema, cols, b.NumRows())
			ok := yield(out, nil)
			out.Release()
			if !ok {
				return
			}
		}
	}
}

// Checksum is facade.ChecksumBatches over the snapshot.
func (l *Lakehouse) Checksum(ctx context.Context, datasetID string, snapshotID int64) (facade.Checksum, error) {
	return facade.ChecksumBatches(l.Scan(ctx, datasetID, facade.ScanOptions{SnapshotID: snapshotID, ExcludeIdentity: true}))
}
