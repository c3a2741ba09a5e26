package writestrategy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
)

// Resolver decides where an output goes; *sink.Resolver satisfies it.
type Resolver interface {
	Resolve(ctx context.Context, writerID, datasetID string) (sink.Decision, error)
	ResolvePair(ctx context.Context, writerID, firstDatasetID, secondDatasetID string) (sink.PairDecision, error)
}

// Beginner begins transactions; a *pgxpool.Pool (or a *pgx.Conn) satisfies
// it. The dispatcher never closes it.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// DispatchConfig configures a Dispatcher.
type DispatchConfig struct {
	// Ledger records the intents. Required.
	Ledger *ledger.Ledger
	// Resolver decides the sink per output. Required.
	Resolver Resolver
	// Lakehouse writes Iceberg outputs and reads native datasets. Required
	// when any output resolves to Iceberg or any dataset read lives there.
	// When its staged writes can commit into a transaction
	// (facade.TxStaged: a facade on facade.PostgresCatalog), the catalog
	// must live in the database of db: the snapshots and the ledger then
	// commit in one transaction.
	Lakehouse facade.Lakehouse
	// Workspace is recorded in every snapshot summary.
	Workspace string
	// Cursor configures the compute stream (batch size, guards, allocator,
	// and the default numeric policy of the Iceberg path: Numeric rounds by
	// default, cursor.NumericStrict refuses; see Preflight). Its Mode must
	// be cursor.Direct (the default).
	Cursor *cursor.Options
	// MaxCrossJoinRows: see Env.
	MaxCrossJoinRows int64
	// RecoverAfter: before opening an intent, open intents of the output
	// older than this are reconciled (ledger.Recover): rolled forward when
	// their write landed, aborted when provably absent. Default 15 minutes;
	// make it longer than your slowest write.
	RecoverAfter time.Duration
	// Logger receives one Info record per output written. Default discard.
	Logger *slog.Logger
	// Observer sees the phases of every Write (resolve, open, compute,
	// stream, check, commits, maintenance) with their durations and
	// errors, and, when it is a ProgressObserver, the rows an Iceberg
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
	db  Beginner
	cfg DispatchConfig
	log *slog.Logger
	// described: output queries' descriptions (see applySpeculative).
	described *descriptions
	// predicted: each writer's last resolved sink (see openPredicted).
	predicted predictions
	lostTx    sync.Once // warnLostTxCommit
}

// NewDispatcher returns a Dispatcher writing through db (the pool holding
// the row store and the control plane).
func NewDispatcher(db Beginner, cfg *DispatchConfig) (*Dispatcher, error) {
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
	return &Dispatcher{db: db, cfg: c, log: c.Logger, described: &descriptions{}}, nil
}

// Request is one output write.
type Request struct {
	// WriterID is the flag namespace, e.g. "pipeline.output".
	WriterID string
	Strategy WriteStrategy
	// ReadMode requested for the sources: incremental.ReadSnapshot (default)
	// or incremental.ReadDelta with Delta set. An Iceberg sink clamps it to
	// a snapshot read.
	ReadMode incremental.ReadMode
	// Delta: see Env.Delta; used only when the read mode stays delta.
	Delta map[string][]string
	// SourceFilter: see Env.SourceFilter; applies in either read mode.
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
	// nothing and returns those earlier results with Replayed set; when an
	// earlier attempt is still open, Write waits for it (a live writer) or
	// reconciles it (a dead one) first. The key is recorded on the ledger
	// intent; choose one per logical write (e.g. the job run id). Empty:
	// every call writes.
	IdempotencyKey string
}

// Write resolves the sink, clamps the read mode, opens the ledger intent(s),
// and runs the arm of the sink:
//
//   - Postgres: Apply and the ledger commit in one transaction;
//   - Iceberg: ComputeRows in a compute transaction, one facade write per
//     output carrying the transaction id, then the ledger commit with the
//     commit result (row count, snapshot id, committed-at as watermark).
//     When the catalog commits into a transaction (facade.TxStaged), every
//     output's pointer swap and ledger commit run in the compute
//     transaction and commit together: no snapshot is ever visible with its
//     intent open, and a split pair lands whole or not at all.
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
	w := &writeInfo{writerID: req.WriterID, outs: outs}
	ctx, wph := d.observe(ctx, w, PhaseWrite, outs)
	started := time.Now()
	defer func() { err = d.writeError(ctx, started, outs, err); wph.end(resultRows(results), err) }()
	if req.IdempotencyKey != "" {
		if res, ok, err := d.replay(ctx, outs, req.IdempotencyKey); err != nil || ok {
			return res, err
		}
	}
	// The intent of a write whose sink is predictable opens first, with
	// the reads that resolve its sink (openPredicted).
	op, predicted, err := d.openPredicted(ctx, w, req)
	if err != nil {
		return nil, err
	}
	if !predicted {
		if err := d.recoverOutputs(ctx, w); err != nil {
			return nil, err
		}
	}
	// 1. Resolve the sink, before anything else is written.
	run, decision, err := d.resolve(ctx, w, req)
	if err == nil {
		err = d.guardSink(ctx, w, op, decision) // see sinkguard.go
	}
	if predicted && (err != nil || decision.Sink != op.sink) {
		// Opened for another sink (or not to be written): withdrawn, the
		// write runs as usual.
		if werr := d.withdraw(ctx, op); werr != nil {
			return nil, errors.Join(err, werr)
		}
		if err != nil {
			return nil, err
		}
		op, predicted = nil, false
		if err := d.recoverOutputs(ctx, w); err != nil {
			return nil, err
		}
	}
	if err != nil {
		return nil, err
	}
	if len(w.outs) == 1 {
		d.predicted.put(req.WriterID, w.outs[0], decision.Sink)
	}
	w.opened = op
	defer func() {
		// Opened for the write but not taken by its arm (it failed first).
		if w.opened != nil {
			err = errors.Join(err, d.withdraw(ctx, w.opened))
			w.opened = nil
		}
	}()
	// 2. Clamp the read mode: an Iceberg sink forces a full rebuild.
	env := &Env{Schema: d.cfg.Ledger.Schema(), Lakehouse: d.cfg.Lakehouse, MaxCrossJoinRows: d.cfg.MaxCrossJoinRows,
		SourceFilter: req.SourceFilter}
	mode := req.ReadMode
	if mode == "" {
		mode = incremental.ReadSnapshot
	}
	if mode, _ = incremental.ClampReadMode(decision, mode); mode == incremental.ReadDelta {
		env.Delta = req.Delta
	}
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

// resolve resolves the sink of the write's output (or split pair) and
// returns the runner of its arm.
func (d *Dispatcher) resolve(ctx context.Context, w *writeInfo, req Request) (run func(sink.RowSink[[]WriteResult]) ([]WriteResult, error), decision sink.Decision, err error) {
	var pair sink.PairDecision
	outs := w.outs
	rctx, ph := d.observe(ctx, w, PhaseResolve, outs)
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
		// A split whose outputs resolve to different sinks is a
		// *sink.MixedPairError (errors.Is(err, sink.ErrMixedPair)).
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
	if op := w.opened; op != nil && op.sink == sinkName {
		w.opened = nil
		env.read = op.read
		return op.intents, nil, nil
	}
	ctx, ph := d.observe(ctx, w, PhaseOpen, w.outs)
	defer func() { ph.end(0, err) }()
	outs := append([]string(nil), req.Strategy.Outputs()...)
	sort.Strings(outs)
	// Everything that reads the ledger through the pool happens before the
	// first intent is held: an open intent holds a pool connection, and a
	// writer holding one must not wait for another (see boundedBegin).
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
		if i == 0 { // the intent whose session runs the transaction (heldBegin)
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
			TxnID: t.ID, SnapshotID: t.SnapshotID, CommittedAt: t.CommittedAt, Replayed: true})
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

// Lookup is the dispatcher's ledger.Lookup: an open Postgres intent of a
// dead process provably did not land (the row store write and the ledger
// commit share one transaction); an Iceberg intent landed when a snapshot
// carrying its transaction id is in the table's history.
func (d *Dispatcher) Lookup(ctx context.Context, in ledger.Intent) (ledger.Landing, error) {
	if in.Sink != sink.Iceberg {
		return ledger.Landing{}, nil
	}
	if d.cfg.Lakehouse == nil {
		return ledger.Landing{}, fmt.Errorf("%w: cannot look up intent %s: no Lakehouse configured", ErrInvalid, in.ID)
	}
	res, found, err := d.cfg.Lakehouse.FindTxn(ctx, in.DatasetID, in.ID)
	if err != nil || !found {
		return ledger.Landing{}, err
	}
	// A roll-forward stamps what a normal commit stamps: row count,
	// snapshot id, committed-at (and so the watermark) and the declared
	// schema, all read back from the landed snapshot.
	return ledger.Landing{Landed: true, Outcome: ledger.Outcome{RowCount: res.Rows, SnapshotID: res.SnapshotID,
		CommittedAt: res.CommittedAt, Schema: declaredSchema(res.Summary)}}, nil
}

// summarySchemaKey is the request metadata key under which the Iceberg arm
// records the output's declared schema in the snapshot summary (as
// facade.SummaryMetaPrefix + summarySchemaKey), so that a write rolled
// forward after a crash stamps the same dataset schema as a normal commit.
const summarySchemaKey = "lakewrite-declared-schema"

func withDeclaredSchema(meta map[string]string, cols Schema) map[string]string {
	out := make(map[string]string, len(meta)+1)
	maps.Copy(out, meta)
	out[summarySchemaKey] = string(cols.JSON())
	return out
}

func declaredSchema(summary map[string]string) json.RawMessage {
	raw, ok := summary[facade.SummaryMetaPrefix+summarySchemaKey]
	if !ok {
		return nil
	}
	if _, err := ParseSchema(json.RawMessage(raw)); err != nil {
		return nil
	}
	return json.RawMessage(raw)
}

// checkPlannedModes is checkModes for planned outputs.
func checkPlannedModes(ps []projection, intents map[string]*ledger.Intent) error {
	rs := make([]WriteResult, len(ps))
	for i, p := range ps {
		rs[i] = WriteResult{DatasetID: p.output, Mode: p.mode}
	}
	return checkModes(rs, intents)
}

func checkModes(ps []WriteResult, intents map[string]*ledger.Intent) error {
	for _, r := range ps {
		if in := intents[r.DatasetID]; in != nil && in.WriteMode != r.Mode {
			return fmt.Errorf("%w: output %q (planned %s, opened %s)", ErrSinkChanged, r.DatasetID, r.Mode, in.WriteMode)
		}
	}
	return nil
}

// postgres is the Postgres arm: Apply and the ledger commits in one
// transaction.
func (d *Dispatcher) postgres(ctx context.Context, w *writeInfo, req Request, env *Env) ([]WriteResult, error) {
	intents, replay, err := d.openIntents(ctx, w, req, sink.Postgres, env)
	if err != nil || replay != nil {
		return replay, err
	}
	defer releaseAll(intents)
	env.TxnIDs = map[string]string{}
	for o, in := range intents {
		env.TxnIDs[o] = in.ID
	}
	var results []WriteResult
	// The ledger commit phase ends with the transaction's commit.
	actx, aph := d.observe(ctx, w, PhaseApply, w.outs)
	var lph phase
	// The transaction begins with its settings (tunedBegin) in one round
	// trip; Apply then need not read extra_float_digits.
	env.floatsExact = true
	hb := &heldBegin{intents: intents, pool: boundedBegin{d.db}}
	err = func() error {
		tx, pipe, err := hb.beginPipelined(actx)
		if err != nil {
			return err
		}
		env.pipe, env.described = pipe, d.described
		defer func() { // a no-op once committed
			cctx, cancel := cleanupContext(ctx)
			defer cancel()
			_ = tx.Rollback(cctx)
		}()
		ps, err := prepare(actx, tx, env, req.Strategy, sink.Postgres)
		if err != nil {
			return err
		}
		if err := checkPlannedModes(ps, intents); err != nil {
			return err
		}
		// One output replaced on its intent's session: the write and the
		// ledger commit in one round trip (PhaseApply holds both).
		var done bool
		if len(ps) == 1 {
			if results, done, err = d.oneTrip(actx, tx, env, req.Strategy, ps, intents[ps[0].output]); done {
				if err == nil {
					aph.end(resultRows(results), nil)
					_, lph = d.observe(ctx, w, PhaseLedgerCommit, w.outs)
				}
				return err
			}
		}
		if results, err = applyPlanned(actx, tx, env, req.Strategy, ps); err != nil {
			return err
		}
		if err := checkModes(results, intents); err != nil {
			return err
		}
		aph.end(resultRows(results), nil)
		var lctx context.Context
		lctx, lph = d.observe(ctx, w, PhaseLedgerCommit, w.outs)
		if len(results) == 0 {
			return tx.Commit(lctx)
		}
		// The ledger commits, the last one with the transaction's commit
		// (the intent whose session runs the transaction last, so that
		// its ledger commit and the COMMIT share a round trip). The commit
		// time is the database clock at the first ledger commit (stamped
		// by it, without a round trip of its own); every output of the
		// write shares it.
		order := make([]int, 0, len(results))
		for _, own := range []bool{false, true} {
			for i, r := range results {
				if (intents[r.DatasetID] == hb.owner) == own {
					order = append(order, i)
				}
			}
		}
		var now time.Time
		for k, i := range order {
			r := &results[i]
			in := intents[r.DatasetID]
			o := ledger.Outcome{RowCount: r.Rows, CommittedAt: now, Schema: r.Columns.JSON()}
			switch {
			case k == len(order)-1:
				now, err = d.cfg.Ledger.CommitTxEnd(lctx, tx, in, o)
			case now.IsZero():
				now, err = d.cfg.Ledger.CommitTxNow(lctx, tx, in, o)
			default:
				err = d.cfg.Ledger.CommitTx(lctx, tx, in, o)
			}
			if err != nil {
				return err
			}
			r.TxnID = in.ID
		}
		for i := range results {
			results[i].CommittedAt = now
		}
		return nil
	}()
	aph.end(0, err) // when Apply failed (a no-op otherwise)
	lph.end(resultRows(results), err)
	if err != nil {
		// The transaction rolled back: nothing landed, the intents abort.
		d.abortAll(ctx, intents, err)
		return nil, err
	}
	d.logResults(ctx, req, results)
	return results, nil
}

// iceberg is the Iceberg arm: compute, one facade write per output with the
// transaction id, then the ledger commit from the commit result.
func (d *Dispatcher) iceberg(ctx context.Context, w *writeInfo, req Request, env *Env) ([]WriteResult, error) {
	intents, replay, err := d.openIntents(ctx, w, req, sink.Iceberg, env)
	if err != nil || replay != nil {
		return replay, err
	}
	defer releaseAll(intents)
	pending := map[string]*ledger.Intent{}
	for k, v := range intents {
		pending[k] = v
	}
	endCompute := func() {} // the compute transaction's end, once begun
	fail := func(err error) ([]WriteResult, error) {
		endCompute() // first: the intents abort on the session it ran on
		d.abortAll(ctx, pending, err)
		return nil, err
	}
	cctx, cph := d.observe(ctx, w, PhaseCompute, w.outs)
	// The compute transaction begins with its settings (see tuneTx) in
	// the same round trip, on the session holding one of the intents
	// (heldBegin) when there is one: the write needs no other connection,
	// and on a catalog in the ledger's database the owner's ledger commit,
	// its unlock and the COMMIT share a round trip (commitInTx).
	hb := &heldBegin{intents: intents, pool: boundedBegin{d.db}}
	tx, err := hb.BeginTx(cctx, pgx.TxOptions{BeginQuery: computeBegin})
	if err != nil {
		err = queryError("begin compute", err)
		cph.end(0, err)
		return fail(err)
	}
	endCompute = func() {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		_ = tx.Rollback(cctx) // the compute transaction writes nothing; a no-op once ended
	}
	defer endCompute()
	err = d.writeOrder(cctx, env, intents)
	var computed []Computed
	if err == nil {
		computed, err = ComputeRows(cctx, tx, env, req.Strategy, d.cursorOptions(req))
	}
	results := make([]WriteResult, len(computed))
	for i, c := range computed {
		results[i] = WriteResult{DatasetID: c.DatasetID, Sink: sink.Iceberg, Mode: c.Mode, Columns: c.Columns}
	}
	if err == nil {
		err = checkModes(results, intents)
	}
	cph.end(0, err)
	if err != nil {
		return fail(err)
	}
	// Stage every output (a split pair has two) and ask the ledger's
	// expectations about each before any snapshot is committed: a failing
	// stream, a staging error or a veto in either output leaves both tables
	// as they were.
	staged := make([]facade.Staged, 0, len(computed))
	due := map[string]bool{}
	abortFrom := func(i int) {
		for _, st := range staged[i:] {
			_ = abortStaged(ctx, st) // best effort: unreferenced files at worst
		}
	}
	for i := range computed {
		c := &computed[i]
		sctx, sph := d.observe(ctx, w, PhaseStream, []string{c.DatasetID})
		st, err := d.cfg.Lakehouse.Stage(sctx, facade.Target{DatasetID: c.DatasetID, WriterID: req.WriterID, Workspace: d.cfg.Workspace},
			facade.WriteRequest{
				Mode:       facade.WriteMode(c.Mode),
				Schema:     c.Stream.Schema(),
				Rows:       d.progress(sctx, w, c.DatasetID, c.Batches()),
				SourceRefs: req.Strategy.Sources(),
				Metadata:   withDeclaredSchema(req.Metadata, c.Columns),
				TxnID:      intents[c.DatasetID].ID,
				Rounded:    c.Stream.Rounded,
			})
		if err != nil {
			sph.end(0, err)
			abortFrom(0)
			return fail(err)
		}
		sph.end(st.Info().Rows, nil)
		staged = append(staged, st)
	}
	d.warnLostTxCommit(ctx, staged) // see wrapcheck.go
	if txs, ok := allTxStaged(staged); ok {
		return d.commitInTx(ctx, w, req, tx, hb.owner, intents, computed, txs, results, fail)
	}
	// Every row is staged: the compute transaction is done. Ending it
	// frees the session it may run on (an intent's held session) for the
	// checks, Alive and the ledger commits below, which need it.
	endCompute()
	kctx, kph := d.observe(ctx, w, PhaseCheck, w.outs)
	for i := range computed {
		c := &computed[i]
		if err := checkStaged(kctx, d.cfg.Ledger, intents[c.DatasetID], staged[i], c.Columns.JSON()); err != nil {
			kph.end(0, err)
			abortFrom(0)
			return fail(err)
		}
	}
	kph.end(0, nil)
	if ac, ok := d.cfg.Lakehouse.(atomicCommitter); ok && len(staged) > 1 && ac.SupportsAtomicCommit() {
		return d.commitAtomic(ctx, w, req, ac, intents, pending, computed, staged, results, fail)
	}
	for i := range computed {
		c := &computed[i]
		in := intents[c.DatasetID]
		ids := []string{c.DatasetID}
		kctx, kph := d.observe(ctx, w, PhaseCatalogCommit, ids)
		// Still the holder of the dataset? A writer whose hold was lost
		// (its connection broke, so another process may have reconciled
		// the intent) must not make its snapshot visible.
		if err := in.Alive(kctx); err != nil {
			kph.end(0, err)
			abortFrom(i)
			return fail(err)
		}
		res, err := staged[i].Commit(kctx)
		kph.end(res.Rows, err)
		if err != nil {
			abortFrom(i + 1)
			if errors.Is(err, facade.ErrCommitStateUnknown) {
				// Never retried or aborted blindly: Recover reconciles it
				// (at once, once this writer no longer holds it).
				delete(pending, c.DatasetID)
				in.Release()
				return fail(fmt.Errorf("%w: %w", ledger.ErrOutcomeUnknown, err))
			}
			return fail(err)
		}
		if res.MaintenanceDue {
			due[c.DatasetID] = true
		}
		r := &results[i]
		r.Rows, r.Skipped, r.Preserved, r.Rounded = res.Rows, c.Skipped(res.Rows), c.Preserved, c.Stream.Rounded()
		r.TxnID, r.SnapshotID, r.CommittedAt, r.Replayed = in.ID, res.SnapshotID, res.CommittedAt, res.Replayed
		// The snapshot landed: from here on the intent is rolled forward,
		// never aborted.
		delete(pending, c.DatasetID)
		lctx, lph := d.observe(ctx, w, PhaseLedgerCommit, ids)
		err = d.cfg.Ledger.Commit(lctx, in, ledger.Outcome{RowCount: res.Rows, SnapshotID: res.SnapshotID,
			CommittedAt: res.CommittedAt, Schema: c.Columns.JSON()})
		lph.end(res.Rows, err)
		if err != nil {
			abortFrom(i + 1)
			if errors.Is(err, ledger.ErrVetoed) {
				return fail(err)
			}
			// Left open: Recover finds the snapshot and rolls it forward.
			return fail(fmt.Errorf("%w: snapshot %d of %q landed but the ledger commit failed: %w", ledger.ErrOutcomeUnknown, res.SnapshotID, c.DatasetID, err))
		}
	}
	d.logResults(ctx, req, results)
	d.maintainAfterWrite(ctx, w, results, due)
	return results, nil
}

// atomicCommitter is a Lakehouse whose catalog commits several tables in
// one request (facade.Facade on a REST catalog with multi-table
// transactions).
type atomicCommitter interface {
	SupportsAtomicCommit() bool
	CommitAll(ctx context.Context, staged ...facade.Staged) ([]facade.CommitResult, error)
}

// commitAtomic commits the staged outputs of one write (a split pair) in
// one catalog transaction, then their intents: both snapshots land or
// neither does. An ambiguous catalog failure leaves every intent open for
// Recover, which finds all of them landed or none.
func (d *Dispatcher) commitAtomic(ctx context.Context, w *writeInfo, req Request, ac atomicCommitter, intents, pending map[string]*ledger.Intent,
	computed []Computed, staged []facade.Staged, results []WriteResult, fail func(error) ([]WriteResult, error)) ([]WriteResult, error) {
	kctx, kph := d.observe(ctx, w, PhaseCatalogCommit, w.outs)
	for i := range computed {
		if err := intents[computed[i].DatasetID].Alive(kctx); err != nil {
			kph.end(0, err)
			for _, st := range staged {
				_ = abortStaged(ctx, st)
			}
			return fail(err)
		}
	}
	res, err := ac.CommitAll(kctx, staged...) // finishes every staged write
	var rows int64
	for _, r := range res {
		rows += r.Rows
	}
	kph.end(rows, err)
	if err != nil {
		if errors.Is(err, facade.ErrCommitStateUnknown) {
			for id, in := range pending {
				delete(pending, id)
				in.Release()
			}
			return fail(fmt.Errorf("%w: %w", ledger.ErrOutcomeUnknown, err))
		}
		return fail(err)
	}
	// Every snapshot landed: from here on the intents are rolled forward,
	// never aborted.
	for id := range pending {
		delete(pending, id)
	}
	due := map[string]bool{}
	lctx, lph := d.observe(ctx, w, PhaseLedgerCommit, w.outs)
	for i := range computed {
		c := &computed[i]
		in := intents[c.DatasetID]
		if res[i].MaintenanceDue {
			due[c.DatasetID] = true
		}
		r := &results[i]
		r.Rows, r.Skipped, r.Preserved, r.Rounded = res[i].Rows, c.Skipped(res[i].Rows), c.Preserved, c.Stream.Rounded()
		r.TxnID, r.SnapshotID, r.CommittedAt, r.Replayed = in.ID, res[i].SnapshotID, res[i].CommittedAt, res[i].Replayed
		if err := d.cfg.Ledger.Commit(lctx, in, ledger.Outcome{RowCount: res[i].Rows, SnapshotID: res[i].SnapshotID,
			CommittedAt: res[i].CommittedAt, Schema: c.Columns.JSON()}); err != nil {
			lph.end(0, err)
			// Left open (the caller releases the holds): Recover finds the
			// snapshots and rolls them forward.
			return nil, fmt.Errorf("%w: the snapshots of %s landed but the ledger commit of %q failed: %w",
				ledger.ErrOutcomeUnknown, strings.Join(req.Strategy.Outputs(), ", "), c.DatasetID, err)
		}
	}
	lph.end(rows, nil)
	d.logResults(ctx, req, results)
	d.maintainAfterWrite(ctx, w, results, due)
	return results, nil
}

// heldBegin begins a write's transaction (the Postgres arm's, the Iceberg
// arm's compute transaction) on the session holding one of the write's
// intents (ledger.Intent.BeginTx), in dataset id order, so that the write
// needs no other connection and the ledger commit gives up that intent's
// hold in its own round trip; on pool when no intent holds a session (no
// liveness).
type heldBegin struct {
	intents map[string]*ledger.Intent
	pool    boundedBegin
	owner   *ledger.Intent // the intent whose session runs the transaction
}

func (h *heldBegin) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	tx, _, err := h.begin(ctx, opts, nil)
	return tx, err
}

// beginPipelined begins a write transaction (tunedBegin) as BeginTx does,
// but, on an intent's session, as a pipelinedTx (returned too), whose
// BEGIN and settings go with the output's description.
func (h *heldBegin) beginPipelined(ctx context.Context) (pgx.Tx, *pipelinedTx, error) {
	return h.begin(ctx, pgx.TxOptions{BeginQuery: tunedBegin}, []string{"BEGIN", tunedSettings})
}

func (h *heldBegin) begin(ctx context.Context, opts pgx.TxOptions, pipelined []string) (pgx.Tx, *pipelinedTx, error) {
	ids := make([]string, 0, len(h.intents))
	for id := range h.intents {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		var pt *pipelinedTx
		tx, ok, err := h.intents[id].BeginTxWith(ctx, func(ctx context.Context, c *pgx.Conn) (pgx.Tx, error) {
			if pipelined != nil {
				pt = newPipelinedTx(c, pipelined...)
				return pt, nil
			}
			return c.BeginTx(ctx, opts)
		})
		if ok {
			if err != nil {
				return nil, nil, queryError("begin", err)
			}
			h.owner = h.intents[id]
			return tx, pt, nil
		}
	}
	tx, err := h.pool.BeginTx(ctx, opts)
	return tx, nil, err
}

// beginWait bounds how long a write waits for the pool connection of its
// transaction.
const beginWait = 30 * time.Second

// boundedBegin begins the transaction of a write whose intents hold no
// session (heldBegin's fallback) on a pool connection: the wait for a free
// connection is bounded, so that a pool too small for the writes running
// at once fails them with a clear error instead of leaving them waiting on
// each other.
type boundedBegin struct{ db Beginner }

func (b boundedBegin) Begin(ctx context.Context) (pgx.Tx, error) {
	return b.BeginTx(ctx, pgx.TxOptions{})
}

// BeginTx is Begin with options: the db's own BeginTx when it has one (a
// pool, a connection); otherwise Begin, then the settings of tunedBegin
// or computeBegin when one of those is asked for.
func (b boundedBegin) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	bctx, cancel := context.WithTimeout(ctx, beginWait)
	defer cancel()
	var tx pgx.Tx
	var err error
	if bt, ok := b.db.(interface {
		BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
	}); ok {
		tx, err = bt.BeginTx(bctx, opts)
	} else if tx, err = b.db.Begin(bctx); err == nil && (opts.BeginQuery == tunedBegin || opts.BeginQuery == computeBegin) {
		settings := tunedSettings
		if opts.BeginQuery == computeBegin {
			settings = `SELECT set_config('jit', 'off', true)`
		}
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

func (d *Dispatcher) logResults(ctx context.Context, req Request, rs []WriteResult) {
	for _, r := range rs {
		d.log.InfoContext(ctx, "lakewrite output written", "writer_id", req.WriterID, "dataset_id", r.DatasetID,
			"strategy", string(req.Strategy.Kind()), "sink", r.Sink, "mode", r.Mode, "rows", r.Rows,
			"skipped", r.Skipped, "preserved", r.Preserved, "rounded", r.Rounded, "txn_id", r.TxnID, "snapshot_id", r.SnapshotID)
	}
}

// tunedSettings are the transaction-local settings of a write
// transaction: JIT off (see tuneTx), and float text forms exact
// (extra_float_digits at least 1, which the row store's encoding needs).
const tunedSettings = `SELECT set_config('jit', 'off', true), set_config('extra_float_digits', greatest(current_setting('extra_float_digits')::pg_catalog.int4, 1)::pg_catalog.text, true)`

// tunedBegin begins a write transaction with tunedSettings, in one round
// trip (a simple-protocol query of two statements).
const tunedBegin = `BEGIN; ` + tunedSettings

// computeBegin begins the Iceberg arm's compute transaction with the
// settings of tuneTx, in one round trip.
const computeBegin = `BEGIN; SELECT set_config('jit', 'off', true)`

// tuneTx sets transaction-local settings for the compute: JIT off (the
// projections' cost estimates run high, and JIT compilation then costs
// more than it saves on these single-pass queries).
func tuneTx(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `SELECT set_config('jit', 'off', true)`); err != nil {
		return queryError("configure compute transaction", err)
	}
	return nil
}
