package writestrategy

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade"
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
