package facadetest

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func newBatch(sc *arrow.Schema, cols []arrow.Array, n int64) arrow.RecordBatch {
	return array.NewRecordBatch(sc, cols, n)
}

// project returns b (borrowed) under sc by column name: a column b lacks
// reads NULL, a promoted one is cast to its wider type.
func project(ctx context.Context, mem memory.Allocator, b arrow.RecordBatch, sc *arrow.Schema) (arrow.RecordBatch, error) {
	n := int(b.NumRows())
	cols := make([]arrow.Array, 0, sc.NumFields())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	cctx := compute.WithAllocator(context.WithoutCancel(ctx), mem)
	for _, f := range sc.Fields() {
		idx := b.Schema().FieldIndices(f.Name)
		if len(idx) == 0 {
			cols = append(cols, array.MakeArrayOfNull(mem, f.Type, n))
			continue
		}
		c := b.Column(idx[0])
		if arrow.TypeEqual(c.DataType(), f.Type) {
			c.Retain()
			cols = append(cols, c)
			continue
		}
		out, err := compute.CastArray(cctx, c, compute.SafeCastOptions(f.Type))
		if err != nil {
			return nil, err
		}
		cols = append(cols, out)
	}
	return array.NewRecordBatch(sc, cols, int64(n)), nil
}
