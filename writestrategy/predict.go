package writestrategy

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
)

// A write of one output that replaces it, whose writer's flags are not
// cached, opens its intent for the sink its last write (or, for an output
// not written before, its writer's last write) resolved to, and reads the flags in the intent's round trip (with the datasets
// rows it plans from): the sink is then resolved from them, with no round
// trip of its own. When the flags say another sink, the intent is
// withdrawn (deleted: it wrote nothing) and the write runs as it would
// have, reading the output's row and open intents first. An open intent
// of a gone writer, or one without liveness older than RecoverAfter, is
// reconciled by the ledger's Open itself, as it would be for any write.

// maxPredictions bounds the sinks a Dispatcher remembers.
const maxPredictions = 8192

// predictions remembers the sink each writer's last single-output write
// resolved to, for each output and for the writer as a whole: an output
// written before is predicted its own last sink (a canary keeps its flip),
// a new one its writer's last.
type predictions struct {
	mu sync.Mutex
	m  map[string]sink.Sink
}

func (p *predictions) get(writer, output string) (sink.Sink, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.m[writer+"\x00"+output]; ok {
		return s, true
	}
	s, ok := p.m[writer]
	return s, ok
}

func (p *predictions) put(writer, output string, s sink.Sink) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil || len(p.m) >= maxPredictions {
		p.m = map[string]sink.Sink{} // forget all: predictions only save round trips
	}
	p.m[writer] = s
	p.m[writer+"\x00"+output] = s
}

// opened is an intent opened before its write's sink was resolved.
type opened struct {
	intents map[string]*ledger.Intent
	sink    sink.Sink
	read    *datasetsRead
}

// openPredicted opens the intent of a qualifying write for its predicted
// sink (see above); ok false means it did not (the write opens its intent
// after resolving, as usual).
func (d *Dispatcher) openPredicted(ctx context.Context, w *writeInfo, req Request) (op *opened, ok bool, err error) {
	if len(w.outs) != 1 || req.IdempotencyKey != "" || appends(req.Strategy) {
		return nil, false, nil
	}
	predicted, ok := d.predicted.get(req.WriterID, w.outs[0])
	if !ok || (predicted != sink.Postgres && predicted != sink.Iceberg) {
		return nil, false, nil
	}
	pf, ok := d.cfg.Resolver.(prefetcher)
	if !ok {
		return nil, false, nil
	}
	f := pf.Prefetch(req.WriterID, w.outs...)
	if f == nil {
		return nil, false, nil // cached: resolving costs nothing
	}
	scratch := &pgx.Batch{}
	readFlags := f(scratch)
	if scratch.Len() != 1 {
		return nil, false, nil
	}
	q := scratch.QueuedQueries[0]
	flags := ledger.Read{SQL: q.SQL, Args: q.Arguments, Scan: func(rows pgx.Rows) error { return readFlags(oneRows{rows}) }}
	read := &datasetsRead{ids: datasetIDs(req.Strategy)}
	octx, ph := d.observe(ctx, w, PhaseOpen, w.outs)
	in, err := d.cfg.Ledger.Open(octx, ledger.OpenParams{DatasetID: w.outs[0], WriterID: req.WriterID, Sink: predicted,
		WriteMode: facade.Replace, Lookup: d.Lookup, RecoverAfter: d.cfg.RecoverAfter, Reads: []ledger.Read{
			{SQL: datasetsSQL((&Env{Schema: d.cfg.Ledger.Schema()}).ctlSchema()), Args: []any{read.ids}, Scan: read.scan}, flags}})
	ph.end(0, err)
	if err != nil {
		return nil, false, err
	}
	op = &opened{intents: map[string]*ledger.Intent{w.outs[0]: in}, sink: predicted, read: read}
	if read.done && read.err == nil {
		if rerr := refuseRelationOutputs(read.rows, w.outs); rerr != nil {
			return nil, false, errors.Join(rerr, d.withdraw(ctx, op))
		}
	}
	return op, true, nil
}

// withdraw deletes the intents of op (see ledger.Ledger.Withdraw).
func (d *Dispatcher) withdraw(ctx context.Context, op *opened) error {
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	var errs []error
	for _, in := range op.intents {
		if err := d.cfg.Ledger.Withdraw(cctx, in); err != nil {
			errs = append(errs, fmt.Errorf("writestrategy: withdraw the intent opened for %s: %w", op.sink, err))
		}
	}
	return errors.Join(errs...)
}

// oneRows is the results of a batch of one query, rows (a Resolver's
// prefetch reader reads them as a batch's).
type oneRows struct{ rows pgx.Rows }

func (o oneRows) Exec() (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errors.New("not a query")
}
func (o oneRows) Query() (pgx.Rows, error) { return o.rows, nil }
func (o oneRows) QueryRow() pgx.Row        { return o.rows }
func (o oneRows) Close() error             { return nil }
func (o oneRows) Tx() pgx.Tx               { return nil }
