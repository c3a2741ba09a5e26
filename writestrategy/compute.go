package writestrategy

import (
	"context"
	"iter"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/cursor"

	"github.com/lakewrite/lakewrite/facade"

	"github.com/lakewrite/lakewrite/sink"
)

// Computed is one output as the lakehouse path writes it: the same SELECT
// as Apply's, streamed instead of written.
type Computed struct {
	DatasetID string
	// Mode is facade.Replace or facade.Append.
	Mode facade.WriteMode
	// Columns are the output's business columns (the declared schema).
	Columns Schema

	// stream yields the rows as Arrow batches, from the compute
	// transaction; read through Batches. For an append_new over a native
	// target it may hold every deduplicated source row: Batches drops
	// those whose key the target holds.
	stream *cursor.Stream
	// preserved output rows that keep their identity (snapshot_replace).
	preserved int64

	sourceRows int64
	skips      bool
	mergeKey   []string      // see merge.go
	scope      *facade.Scope // an incremental run's scoped replace (refresh.go, model.go)
	probe      *keyProbe     // see keyprobe.go

	slice         *sliceOf // see slicing.go
	sliceNote     string
	slicedRounded *int64
}

// Schema is the Arrow schema of the batches. For a snapshot_replace over a
// native target it also carries nullable "__row_id" and "__created_at":
// the identity of unchanged rows, kept by the facade.
func (c *Computed) Schema() *arrow.Schema { return c.stream.Schema() }

// Batches yields the rows as Arrow batches from the compute transaction,
// as a borrowed sequence, the convention of facade.WriteRequest.Rows and
// facade.ChecksumBatches: each batch is valid during the yield and
// released right after it. Single-use: consume it before the transaction
// ends.
func (c *Computed) Batches() iter.Seq2[arrow.RecordBatch, error] {
	if c.probe != nil {
		return c.probe.filter(c.batches())
	}
	return c.batches()
}

func (c *Computed) batches() iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for rec, err := range c.stream.All() {
			var out arrow.RecordBatch = rec
			if rec != nil && (c.mergeKey != nil || c.scope != nil) {
				out = &mergeBatch{RecordBatch: rec, c: c}
			}
			more := yield(out, err)
			if rec != nil {
				rec.Release()
			}
			if !more {
				return
			}
		}
	}
}

// skipped returns the source rows left out, given the rows the write
// committed (the commit result's count, never a recount).
func (c *Computed) skipped(rowsWritten int64) int64 {
	if !c.skips {
		return 0
	}
	return c.sourceRows - rowsWritten
}

// ComputeRows runs s on the lakehouse path: inside tx (the compute
// transaction, which must stay open while the streams are consumed) it
// resolves and hydrates the sources and returns one Computed per output,
// whose rows are the same SELECT that Apply writes. Nothing is written.
// opts configures the cursor; its Mode must be cursor.Direct (the compute
// transaction is the caller's).
func ComputeRows(ctx context.Context, tx pgx.Tx, env *Env, s WriteStrategy, opts *cursor.Options) ([]Computed, error) {
	if env == nil {
		env = &Env{}
	}
	ps, err := prepare(ctx, tx, env, s, sink.Iceberg)
	if err != nil {
		return nil, err
	}
	out := make([]Computed, len(ps))
	for i, p := range ps {
		cols, oids, types, err := describeTypes(ctx, tx, p.sql, p.builtinVisible)
		if err != nil {
			return nil, p.locate(err, p.sql)
		}
		if err := checkOrderKeys(p.output, cols, oids, types, env.orderBy[p.output]); err != nil {
			return nil, err
		}
		if err := checkDependsOutput(p, cols); err != nil {
			return nil, err
		}
		var scope *facade.Scope
		if rr := env.refresh; p.depends != nil && rr != nil && rr.Output == p.output {
			if p, scope, err = rr.icebergPlan(ctx, tx, p, cols, opts); err != nil {
				return nil, err
			}
		}
		c := Computed{DatasetID: p.output, Mode: p.mode, Columns: cols, skips: p.countSQL != "", mergeKey: p.mergeKey, probe: p.probe,
			slice: p.slice, sliceNote: p.sliceNote, scope: scope}
		if keys := env.orderBy[p.output]; len(keys) > 0 && c.slice != nil {
			c.slice, c.sliceNote = orderedSlices(c.slice, keys, env.ctlSchema(), kindsOf(cols, oids, types), cols)
		}
		if p.probe != nil { // counted with the source's key range
			c.sourceRows, c.skips = p.probe.sourceRows, true
		} else if c.sourceRows, err = count(ctx, tx, p.countSQL, p.countArgs); err != nil {
			return nil, err
		}
		if c.preserved, err = count(ctx, tx, p.preserveSQL, p.preserveArgs); err != nil {
			return nil, err
		}
		if p.scope != "" { // a Model's incremental run replaces its touched keys' rows
			if c.scope, err = env.modelRun.scope(ctx, tx); err != nil {
				return nil, err
			}
		}
		sql, args := p.sql, p.args
		if p.identitySQL != "" {
			sql, args = p.identitySQL, p.identityArgs
		}
		sql = orderedSQL(sql, env.orderBy[p.output], env.ctlSchema(), kindsOf(cols, oids, types))
		if c.stream, err = cursor.Batches(ctx, tx, sql, args, opts); err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}
