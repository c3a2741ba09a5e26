package writestrategy

import (
	"context"

	"github.com/lakewrite/lakewrite/facade"
)

// EnvWithMaxCrossJoin returns an Env whose cross-join preflight limit is n.
func EnvWithMaxCrossJoin(n int64) *Env { return &Env{maxCrossJoinRows: n} }

// DatasetChecksum is d.datasetChecksum.
func DatasetChecksum(ctx context.Context, d *Dispatcher, id string) (facade.Checksum, error) {
	return d.datasetChecksum(ctx, id)
}
