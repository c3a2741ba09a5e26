package writestrategy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy/sliced"
)

// resolver decides where an output goes; *sink.Resolver satisfies it.
type resolver interface {
	Resolve(ctx context.Context, writerID, datasetID string) (sink.Decision, error)
	ResolvePair(ctx context.Context, writerID, firstDatasetID, secondDatasetID string) (sink.PairDecision, error)
}

// DispatchConfig configures a Dispatcher.
type DispatchConfig struct {
	// Ledger records the intents. Required.
	Ledger *ledger.Ledger
	// Resolver decides the sink per output: a *sink.Resolver. Required.
	Resolver resolver
	// Lakehouse writes Iceberg outputs and reads native datasets. Required
	// when any output resolves to Iceberg or any dataset read lives there.
	// When its staged writes can commit into a transaction
	// (facade.TxStaged: a facade on facade.NewPostgresCatalog), the catalog
	// must live in the database of db: the snapshots and the ledger then
	// commit in one transaction. A wrapper of such a facade (tracing,
	// metrics) must keep that: its staged writes implement
	// facade.TxStaged whenever the wrapped ones do (facadetest.Wrap does).
	// Otherwise every Iceberg write is refused with ErrTxCommitLost before
	// anything is committed, unless AcceptTwoCommits is set.
	Lakehouse facade.Lakehouse
	// AcceptTwoCommits lets the writes go ahead when the Lakehouse hides
	// the one-transaction commit (see Lakehouse): each output's snapshot
	// then commits first and its ledger intent after, as on a catalog that
	// cannot commit in a Postgres transaction, and a crash between the two
	// leaves the intent open until the next write of the dataset (or
	// ledger.Recover) rolls it forward. It changes nothing for a Lakehouse
	// that keeps the one-transaction commit or never had it (a REST or
	// SQL catalog).
	AcceptTwoCommits bool
	// Workspace is recorded in every snapshot summary.
	Workspace string
	// Cursor configures the compute stream (batch size, guards, allocator,
	// and the default numeric policy of the Iceberg path: Numeric rounds by
	// default, cursor.NumericStrict refuses; see Preflight). Its Mode must
	// be cursor.Direct (the default).
	Cursor *cursor.Options
	// MaxCrossJoinRows caps a cross join's estimated rows (else
	// an error matching ErrInvalid): zero means 10,000,000, negative no limit.
	MaxCrossJoinRows int64
	// RecoverAfter: before opening an intent, open intents of the output
	// without liveness (neither a session lock nor a lease: opened through
	// a pgx.Tx, or before liveness existed) older than this are reconciled
	// (ledger.Recover): rolled forward when their write landed, aborted
	// when provably absent. Intents whose writer is gone (its session lock
	// released, its lease lapsed) are reconciled at once, whatever their
	// age. Default 15 minutes; make it longer than your slowest write.
	RecoverAfter time.Duration
	// SliceDeadline bounds a write in slices (Request.Slices) from the
	// export of its snapshot to its last slice; zero: sliced.DefaultDeadline.
	SliceDeadline time.Duration
	// StageSlices, when set, stages a write in slices in place of
	// sliced.Stage, which writes every slice in this process (for
	// example a job system's, writing the slices in other processes).
	// It keeps sliced.Stage's contract: the Staged it returns commits in
	// the coordinator's transaction, with the ledger.
	StageSlices sliced.StageFunc
	// Logger receives one Info record per output written. Default discard.
	Logger *slog.Logger
	// Observer sees the phases of every Write (resolve, open, compute,
	// stream, check, commits, maintenance) with their durations and
	// errors, and, when it has a Progress method, the rows an Iceberg
	// write has streamed so far: for progress bars, metrics and tracing
	// spans. Nil: none, at no cost.
	Observer Observer
	// Shadow configures the shadow writes of datasets flagged sink.Shadow.
	Shadow ShadowConfig
}

// Dispatcher is the write dispatch: one call per output (or split pair)
// composing sink, incremental, ledger, cursor and facade: intent, compute,
// write, commit (see the package documentation). It owns no goroutine and
// no pool.
type Dispatcher struct {
	db    ledger.DB
	cfg   DispatchConfig
	log   *slog.Logger
	trims *logTrims
}

// NewDispatcher returns a Dispatcher writing through db (the pool holding
// the row store and the control plane).
func NewDispatcher(db ledger.DB, cfg *DispatchConfig) (*Dispatcher, error) {
	if db == nil || cfg == nil || cfg.Ledger == nil || cfg.Resolver == nil {
		return nil, fmt.Errorf("%w: NewDispatcher needs a db, a Ledger and a Resolver", ErrInvalid)
	}
	c := *cfg
	if c.RecoverAfter <= 0 {
		c.RecoverAfter = 15 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return &Dispatcher{db: db, cfg: c, log: c.Logger, trims: &logTrims{every: trimEvery, last: map[string]time.Time{}}}, nil
}

// Request is one output write.
type Request struct {
	// WriterID is the flag namespace, e.g. "pipeline.output".
	WriterID string
	Strategy WriteStrategy
	// ReadMode requested for the sources: incremental.ReadSnapshot (default)
	// or incremental.ReadDelta with Delta set. Each source is read as a
	// delta only where incremental.ChooseReadMode allows it, else whole.
	ReadMode incremental.ReadMode
	// Delta maps a source dataset id to the ledger transactions of its delta
	// window (incremental.Reader.Next), whose rows only are read in delta
	// mode: from the row store, or the rows their append snapshots added
	// to the source's Iceberg table. An id the ledger does not know is
	// refused.
	Delta map[string][]string
	// SourceFilter maps a source dataset id to the column ranges
	// (facade.Range) its rows are read within, in either read mode.
	SourceFilter map[string][]facade.Range
	// Metadata is recorded in the snapshot summary.
	Metadata map[string]string
	// Numeric overrides DispatchConfig.Cursor.Numeric for this write (its
	// output, or split pair) on the Iceberg path: cursor.NumericRound or
	// cursor.NumericStrict; cursor.NumericDefault (zero) keeps the
	// configured policy.
	Numeric cursor.NumericPolicy
	// IdempotencyKey makes retries of this write safe. A caller that does
	// not know whether an earlier Write landed (a timeout, a lost
	// response, a restarted job) retries with the same key: when every
	// output already has a committed write with this key, Write writes
	// nothing and returns those earlier results; when an
	// earlier attempt is still open, Write waits for it (a live writer) or
	// reconciles it (a dead one) first. The key is recorded on the ledger
	// intent; choose one per logical write (e.g. the job run id). Empty:
	// every call writes.
	IdempotencyKey string
	// Slices > 1 writes the output on the Iceberg path with that many
	// readers under one snapshot, committed once (package
	// writestrategy/sliced: which outputs, identity, failures). A
	// Transform whose Depends maps its source is cut into buckets of that
	// key; any other output is declared row-wise over its source and cut
	// into ranges of it. WriteResult.SliceNote says why a write ran as one
	// stream.
	Slices int
}

// Write writes the output (or split pair) of req.Strategy, in this order:
//
//  1. it looks at each output once (recoverOutputs): its row, its stale
//     intents reconciled, the writer's flags read in the same round trip;
//  2. it resolves the sink from the flags, before anything is written, and
//     applies the sink guard (sinkguard.go);
//  3. it records the read mode (incremental.ChooseReadMode decides each
//     delta source's read when the write's transaction plans it);
//  4. it runs the arm of the sink, which opens the ledger intent(s)
//     (openIntents) and begins the write's transaction on the session one
//     of them holds (beginTx):
//     - Postgres (postgres.go): Apply and the ledger commits in one
//     transaction;
//     - Iceberg (iceberg.go): ComputeRows in a compute transaction, one
//     facade write per output carrying the transaction id, then the
//     ledger commit with the commit result (row count, snapshot id,
//     committed-at as watermark). When the catalog commits into a
//     transaction (facade.TxStaged), every output's pointer swap and
//     ledger commit run in the compute transaction and commit together:
//     no snapshot is ever visible with its intent open, and a split pair
//     lands whole or not at all.
//
// Any failure aborts the intents whose writes did not land and leaves their
// targets as they were. A facade error whose outcome is unknown leaves the
// intent open for Recover (the error matches ledger.ErrOutcomeUnknown).
func (d *Dispatcher) Write(ctx context.Context, req Request) (results []WriteResult, err error) {
	s := req.Strategy
	if s == nil || req.WriterID == "" {
		return nil, fmt.Errorf("%w: Request needs a WriterID and a Strategy", ErrInvalid)
	}
	outs := s.Outputs()
	for _, o := range outs {
		if err := checkDatasetID("output", o); err != nil {
			return nil, err
		}
	}
	if len(outs) != 1 && len(outs) != 2 {
		return nil, fmt.Errorf("%w: strategy has %d outputs", ErrInvalid, len(outs))
	}
	w := &writeInfo{writerID: req.WriterID, kind: s.Kind(), readMode: req.ReadMode, outs: outs}
	if w.readMode == "" {
		w.readMode = incremental.ReadSnapshot
	}
	ctx, wph := d.observe(ctx, w, PhaseWrite, outs)
	started := time.Now()
	defer func() { err = d.writeError(ctx, started, outs, err); wph.endWrite(resultRows(results), err, results) }()
	if req.IdempotencyKey != "" {
		if res, ok, err := d.replay(ctx, outs, req.IdempotencyKey); err != nil || ok {
			return res, err
		}
	}
	// 1. Look at the outputs.
	if err := d.recoverOutputs(ctx, w); err != nil {
		return nil, err
	}
	// 2. Resolve the sink, before anything else is written.
	run, decision, err := d.resolve(ctx, w, req)
	if err != nil {
		return nil, err
	}
	if err := d.guardSink(ctx, w, decision); err != nil {
		return nil, err
	}
	if err := d.registerSources(ctx, req.Strategy); err != nil {
		return nil, err
	}
	// 3. The read mode: a delta is decided per source (deltaread.go).
	env := &Env{Schema: d.cfg.Ledger.Schema(), Lakehouse: d.cfg.Lakehouse, maxCrossJoinRows: d.cfg.MaxCrossJoinRows,
		sourceFilter: req.SourceFilter, refreshes: true}
	env.setDelta(w, req, decision)
	env.modelProgress = d.modelProgress(ctx)
	if _, ok := s.(Model); ok {
		env.modelRun = &modelRun{}
		defer func() {
			env.modelRun.report(results)
			d.saveModelPosition(ctx, env.modelRun, results, err)
		}()
	}
	// 4. Run the arm of the sink.
	return run(sink.RowSink[[]WriteResult]{
		Postgres: func(ctx context.Context) ([]WriteResult, error) {
			w.sink = sink.Postgres
			res, err := d.postgres(ctx, w, req, env)
			return d.shadowAfter(ctx, w, req, time.Since(started), res, err)
		},
		Iceberg: func(ctx context.Context) ([]WriteResult, error) {
			if d.cfg.Lakehouse == nil {
				return nil, fmt.Errorf("%w: output resolved to Iceberg but DispatchConfig.Lakehouse is nil", ErrInvalid)
			}
			w.sink = sink.Iceberg
			return d.iceberg(ctx, w, req, env)
		},
	})
}

// prefetcher is a resolver that can read the flags of a resolution in a
// batch of other queries; *sink.Resolver is one.
type prefetcher interface {
	Prefetch(writerID string, datasetIDs ...string) func(b *pgx.Batch) func(pgx.BatchResults) error
}

// recoverOutputs looks once at each output, before any intent is opened
// and before the sink is resolved: in one round trip per output
// (ledger.Ledger.RecoverDataset) it reads the output's row and its open
// intents, reconciles those whose writer is gone (and, without liveness,
// those older than RecoverAfter), and refuses a registered relation. The
// rows of the registered outputs are kept in w (outputs not registered are
// left to the ledger, whose Open reports them).
func (d *Dispatcher) recoverOutputs(ctx context.Context, w *writeInfo) error {
	outs := append([]string(nil), w.outs...)
	sort.Strings(outs)
	w.datasets = make(map[string]ledger.Dataset, len(outs))
	// The sink's flags are read in the first of these round trips when
	// the resolver can (sink.Resolver.Prefetch), so that resolving the
	// sink next needs none.
	var with []func(*pgx.Batch) func(pgx.BatchResults) error
	if p, ok := d.cfg.Resolver.(prefetcher); ok {
		if f := p.Prefetch(w.writerID, w.outs...); f != nil {
			with = append(with, f)
		}
	}
	for i, o := range outs {
		if i == 1 {
			with = nil
		}
		ds, _, err := d.cfg.Ledger.RecoverDataset(ctx, o, d.cfg.RecoverAfter, d.Lookup, with...)
		if errors.Is(err, ledger.ErrDatasetNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if ds.Sink == sink.Relation {
			return fmt.Errorf("%w: %q", ErrRelationDataset, o)
		}
		w.datasets[o] = ds
	}
	return nil
}

// resolve resolves the sink of the write's output (or split pair) and
// returns the runner of its arm.
func (d *Dispatcher) resolve(ctx context.Context, w *writeInfo, req Request) (run func(sink.RowSink[[]WriteResult]) ([]WriteResult, error), decision sink.Decision, err error) {
	var pair sink.PairDecision
	outs := w.outs
	rctx, ph := d.observe(ctx, w, phaseResolve, outs)
	defer func() {
		if err == nil {
			w.sink, w.shadow = decision.Sink, shadowed(decision, pair)
		}
		ph.end(0, err)
	}()
	if len(outs) == 1 {
		dec, err := d.cfg.Resolver.Resolve(rctx, req.WriterID, outs[0])
		if err != nil {
			return nil, sink.Decision{}, err
		}
		return func(rs sink.RowSink[[]WriteResult]) ([]WriteResult, error) { return rs.Run(ctx, dec) }, dec, nil
	}
	pair, err = d.cfg.Resolver.ResolvePair(rctx, req.WriterID, outs[0], outs[1])
	if err != nil {
		// A split whose outputs resolve to different sinks matches
		// sink.ErrMixedPair.
		return nil, sink.Decision{}, err
	}
	return func(rs sink.RowSink[[]WriteResult]) ([]WriteResult, error) { return rs.RunPair(ctx, pair) }, pair.First, nil
}

func resultRows(rs []WriteResult) int64 {
	var n int64
	for _, r := range rs {
		n += r.Rows
	}
	return n
}

// openIntents opens one intent per output, in dataset id order. The
// outputs' stale intents were recovered before (recoverOutputs); an open
// intent of a dead writer found now is reconciled by Open itself (its
// Lookup).
//
// With an idempotency key, a write that committed with the key while this
// one waited for the dataset is found again under the intents: the intents
// are then aborted and replay holds the earlier results.
//
// The first intent's round trip also reads the datasets rows the write's
// transaction plans from (env.read), on the session that transaction then
// runs on (prepare reads them itself when it runs elsewhere).
func (d *Dispatcher) openIntents(ctx context.Context, w *writeInfo, req Request, sinkName sink.Sink, env *Env) (intents map[string]*ledger.Intent, replay []WriteResult, err error) {
	ctx, ph := d.observe(ctx, w, phaseOpen, w.outs)
	defer func() { ph.end(0, err) }()
	outs := append([]string(nil), req.Strategy.Outputs()...)
	sort.Strings(outs)
	// Everything that reads the ledger through the pool happens before the
	// first intent is held: an open intent holds a pool connection, and a
	// writer holding one must not wait for another (see poolBegin).
	modes := make(map[string]facade.WriteMode, len(outs))
	for _, o := range outs {
		if modes[o], err = d.writeMode(ctx, w, req.Strategy, o, sinkName); err != nil {
			return nil, nil, err
		}
	}
	// Writers of several outputs each holding some of their intents'
	// connections on a pool too small for all of them would all fail
	// together: one that could not get a connection for a later intent
	// gives back what it holds and tries again after a random pause, so
	// that one of them gets all it needs and the others follow.
	deadline := time.Now().Add(beginWait)
	for attempt := 1; ; attempt++ {
		env.read = &datasetsRead{ids: datasetIDs(req.Strategy)}
		intents, err = d.openAll(ctx, req, outs, modes, sinkName, ledger.Read{SQL: datasetsSQL(env.ctlSchema()),
			Args: []any{env.read.ids}, Scan: env.read.scan})
		if err == nil || !errors.Is(err, ledger.ErrNoConnection) || len(outs) < 2 || time.Now().After(deadline) {
			break
		}
		pause := time.Duration(rand.Int64N(int64(min(attempt, 8)) * int64(50*time.Millisecond)))
		select {
		case <-ctx.Done():
			return nil, nil, err
		case <-time.After(pause):
		}
	}
	if err != nil {
		return nil, nil, err
	}
	if req.IdempotencyKey != "" {
		// Bounded, as the compute transaction's connection is: the intents
		// are held while this asks.
		rctx, cancel := context.WithTimeout(ctx, beginWait)
		res, ok, err := d.replay(rctx, req.Strategy.Outputs(), req.IdempotencyKey)
		cancel()
		if err != nil || ok {
			d.abortAll(ctx, intents, errReplayed)
			return nil, res, err
		}
	}
	return intents, nil, nil
}

var errReplayed = errors.New("replayed: a write with the same idempotency key had committed")

// openAll opens the intents of outs in order; on an error it aborts those
// it opened.
func (d *Dispatcher) openAll(ctx context.Context, req Request, outs []string, modes map[string]facade.WriteMode, sinkName sink.Sink, first ledger.Read) (map[string]*ledger.Intent, error) {
	intents := map[string]*ledger.Intent{}
	for i, o := range outs {
		var reads []ledger.Read
		if i == 0 { // the intent whose session runs the transaction (beginTx)
			reads = []ledger.Read{first}
		}
		in, err := d.cfg.Ledger.Open(ctx, ledger.OpenParams{DatasetID: o, WriterID: req.WriterID, Sink: sinkName,
			WriteMode: modes[o], IdempotencyKey: req.IdempotencyKey, Lookup: d.Lookup, RecoverAfter: d.cfg.RecoverAfter, Reads: reads})
		if err != nil {
			d.abortAll(ctx, intents, err)
			return nil, err
		}
		intents[o] = in
	}
	return intents, nil
}

// replay returns the committed results of an earlier write with key, when
// every output has one.
func (d *Dispatcher) replay(ctx context.Context, outs []string, key string) ([]WriteResult, bool, error) {
	res := make([]WriteResult, 0, len(outs))
	for _, o := range outs {
		t, ok, err := d.cfg.Ledger.FindByKey(ctx, o, key)
		if err != nil || !ok {
			return nil, false, err
		}
		res = append(res, WriteResult{DatasetID: o, Sink: t.Sink, Mode: t.WriteMode, Rows: t.RowCount,
			TxnID: t.ID, SnapshotID: t.SnapshotID, CommittedAt: t.CommittedAt, replayed: true})
	}
	return res, true, nil
}

// releaseAll gives up this writer's hold on the intents (those committed or
// aborted are released already); an intent still open is then reconciled by
// the next writer of its dataset at once.
func releaseAll(intents map[string]*ledger.Intent) {
	for _, in := range intents {
		in.Release()
	}
}

// keepAlive renews the leases of the intents held by one while the write
// runs (ledger.KeepAlive); the returned stop ends the renewals before the
// write returns.
func (d *Dispatcher) keepAlive(ctx context.Context, intents map[string]*ledger.Intent) (stop func()) {
	return d.cfg.Ledger.KeepAlive(ctx, slices.Collect(maps.Values(intents))...)
}

// writeMode is the ledger write mode of an output: append for the append
// deploys, unless the output is moving to another sink (then the whole
// target is rewritten: a replace).
func (d *Dispatcher) writeMode(ctx context.Context, w *writeInfo, s WriteStrategy, output string, sinkName sink.Sink) (facade.WriteMode, error) {
	if !appends(s) {
		return facade.Replace, nil
	}
	ds, ok := w.datasets[output] // read before the sink was resolved
	if !ok {
		var err error
		if ds, err = d.cfg.Ledger.Dataset(ctx, output); err != nil {
			return "", err
		}
	}
	if ds.Sink != "" && ds.Sink != sinkName {
		return facade.Replace, nil
	}
	return facade.Append, nil
}

// beginTx begins a write's transaction (the Postgres arm's, the Iceberg
// arm's compute transaction, a shadow write's) with its settings (none
// when empty; SET TRANSACTION and set_config statements), BEGIN and
// settings in one round trip (one simple-protocol query). It runs on
// the session held by the first of the write's intents in dataset id order
// that holds one (ledger.Intent.BeginTx), returned as owner: the write
// needs no other connection, and owner's ledger commit, its unlock and the
// COMMIT share a round trip. When no intent holds a session (no liveness)
// it runs on a pool connection (poolBegin) and owner is nil.
func (d *Dispatcher) beginTx(ctx context.Context, intents map[string]*ledger.Intent, settings string) (tx pgx.Tx, owner *ledger.Intent, err error) {
	opts := beginOptions(settings)
	for _, id := range slices.Sorted(maps.Keys(intents)) {
		tx, ok, err := intents[id].BeginTx(ctx, opts)
		if ok {
			if err != nil {
				return nil, nil, queryError("begin", err)
			}
			return tx, intents[id], nil
		}
	}
	tx, err = poolBegin(ctx, d.db, settings)
	return tx, nil, err
}

// beginOptions begins a transaction with settings in one query.
func beginOptions(settings string) pgx.TxOptions {
	if settings == "" {
		return pgx.TxOptions{}
	}
	return pgx.TxOptions{BeginQuery: "BEGIN; " + settings}
}

// writeSettings are the transaction-local settings of the Postgres arm's
// transaction: those of computeSettings, and float text forms exact
// (extra_float_digits at least 1, which the row store's encoding needs).
const writeSettings = `SELECT set_config('jit', 'off', true), set_config('extra_float_digits', greatest(current_setting('extra_float_digits')::pg_catalog.int4, 1)::pg_catalog.text, true)`

// computeSettings are the transaction-local settings of the Iceberg arm's
// compute transaction (and Verify's): JIT off (the projections' cost
// estimates run high, and JIT compilation then costs more than it saves on
// these single-pass queries).
const computeSettings = `SELECT set_config('jit', 'off', true)`

func checkModes(ps []WriteResult, intents map[string]*ledger.Intent) error {
	for _, r := range ps {
		if in := intents[r.DatasetID]; in != nil && in.WriteMode != r.Mode {
			return fmt.Errorf("%w: output %q (planned %s, opened %s)", ErrSinkChanged, r.DatasetID, r.Mode, in.WriteMode)
		}
	}
	return nil
}
