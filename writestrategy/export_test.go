package writestrategy

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/sink"
)

// EnvWithMaxCrossJoin returns an Env whose cross-join preflight limit is n.
func EnvWithMaxCrossJoin(n int64) *Env { return &Env{maxCrossJoinRows: n} }

// DatasetChecksum is d.datasetChecksum.
func DatasetChecksum(ctx context.Context, d *Dispatcher, id string) (facade.Checksum, error) {
	return d.datasetChecksum(ctx, id)
}

// PlannedSQL is the SELECT of each output of s as prepare plans it inside
// tx for a write to sink to.
func PlannedSQL(ctx context.Context, tx pgx.Tx, s WriteStrategy, to sink.Sink) ([]string, error) {
	ps, err := prepare(ctx, tx, &Env{}, s, to)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.sql
	}
	return out, nil
}

// PostgresSQL is the statement the Postgres path plans for s in tx, with
// each source in delta (when not nil) read as the rows of its ledger
// transactions, and its arguments.
func PostgresSQL(ctx context.Context, tx pgx.Tx, s WriteStrategy, delta map[string][]string) (string, []any, error) {
	env := &Env{}
	if delta != nil {
		var outs []incremental.Output
		for _, o := range s.Outputs() {
			outs = append(outs, incremental.Output{Decision: sink.Decision{DatasetID: o, Sink: sink.Postgres}, Previous: sink.Postgres})
		}
		env.delta, env.deltaReq = delta, &deltaRequest{outputs: outs}
	}
	ps, err := prepare(ctx, tx, env, s, sink.Postgres)
	if err != nil {
		return "", nil, err
	}
	return ps[0].sql, ps[0].args, nil
}

// SetTrimEvery sets how often d trims a change source's log (trimConsumed).
func SetTrimEvery(d *Dispatcher, every time.Duration) { d.trims.every = every }
