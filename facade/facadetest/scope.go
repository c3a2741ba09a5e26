package facadetest

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/internal/identity"
)

// stageScoped stages the scoped replace s (see facade.Scope) of the table
// read (its batches, borrowed): the table rows in the scope whose row
// hash no request row matches are left out, the matched ones kept with
// their identity, the request rows left unmatched stamped by st as new
// rows; s.batches becomes the whole table after the write.
func (l *Lakehouse) stageScoped(ctx context.Context, s *staged, st *identity.Stamper, read []arrow.RecordBatch) error {
	req := s.req
	if len(read) > 0 {
		if err := identity.ScopeKeepsColumns(s.change); err != nil {
			return err
		}
	}
	fields := make([]arrow.Field, len(req.Scope.Columns))
	for i, c := range req.Scope.Columns {
		fields[i] = req.Schema.Field(req.Schema.FieldIndices(c)[0])
	}
	set, err := identity.NewKeySet(req.Scope.Columns, fields, req.Scope.Keys)
	if err != nil {
		return err
	}
	// The table's rows in the scope (dropped unless a request row keeps
	// them), by row hash in table order.
	drop := make([][]bool, len(read))
	byHash := map[uint64][][2]int{}
	var h []uint64
	for bi, b := range read {
		if h, err = identity.RowHashes(b, h); err == nil {
			err = set.Bind(b)
		}
		drop[bi] = make([]bool, len(h))
		for i := 0; i < len(h) && err == nil; i++ {
			drop[bi][i], err = set.Has(i)
			if drop[bi][i] {
				byHash[h[i]] = append(byHash[h[i]], [2]int{bi, i})
			}
		}
		if err != nil {
			return err
		}
	}
	var out []arrow.RecordBatch
	fail := func(err error) error {
		release(out)
		return err
	}
	var preserved int64
	done, batches := func(int64) {}, 0
	for rec, err := range req.Rows {
		if err == nil {
			err = context.Cause(ctx)
		}
		if err != nil {
			return fail(err)
		}
		if m, ok := rec.(interface{ MergeDone(int64) }); ok && batches == 0 {
			done = m.MergeDone // as the facade: the first batch's
		}
		batches++
		if h, err = identity.RowHashes(rec, h); err == nil {
			err = set.Bind(rec)
		}
		write := make([]bool, len(h))
		for i := 0; i < len(h) && err == nil; i++ {
			var in bool
			if in, err = set.Has(i); err == nil && !in {
				err = fmt.Errorf("%w: scoped replace: a row is outside the scope", facade.ErrInvalidRequest)
			}
			if q := byHash[h[i]]; len(q) > 0 {
				drop[q[0][0]][q[0][1]], byHash[h[i]] = false, q[1:]
				preserved++
			} else {
				write[i] = true
			}
		}
		var w, b arrow.RecordBatch
		if err == nil {
			w, err = keepRows(ctx, l.mem, rec, write)
		}
		if err == nil && w.NumRows() > 0 {
			b, err = st.Stamp(w)
			out = append(out, b)
		}
		if w != nil {
			w.Release()
		}
		if err != nil {
			return fail(err)
		}
	}
	written := st.Checksum().Rows
	table := make([]arrow.RecordBatch, 0, len(read)+len(out))
	for bi, b := range read {
		for i := range drop[bi] {
			drop[bi][i] = !drop[bi][i]
		}
		kb, err := keepRows(ctx, l.mem, b, drop[bi])
		if err == nil && !kb.Schema().Equal(s.schema) {
			var p arrow.RecordBatch
			p, err = project(ctx, l.mem, kb, s.schema)
			kb.Release()
			kb = p
		}
		if err != nil {
			release(table)
			return fail(err)
		}
		table = append(table, kb)
	}
	s.batches = append(table, out...)
	sum, err := facade.ChecksumBatches(func(yield func(arrow.RecordBatch, error) bool) {
		for _, b := range s.batches {
			if !yield(b, nil) {
				return
			}
		}
	})
	if err != nil {
		release(s.batches)
		return err
	}
	s.checksum, s.next, s.info.Rows = sum, st.Next(), sum.Rows
	if written > 0 {
		s.info.DataFiles = []facade.DataFile{{Path: "mem://" + s.target.DatasetID + "/" + s.info.WriteID, Rows: written}}
	}
	done(preserved)
	return nil
}

// keepRows returns the rows of b where keep is true (b itself, retained,
// when all are).
func keepRows(ctx context.Context, mem memory.Allocator, b arrow.RecordBatch, keep []bool) (arrow.RecordBatch, error) {
	all := true
	for _, k := range keep {
		all = all && k
	}
	if all {
		b.Retain()
		return b, nil
	}
	mb := array.NewBooleanBuilder(mem)
	defer mb.Release()
	mb.AppendValues(keep, nil)
	m := mb.NewBooleanArray()
	defer m.Release()
	return compute.FilterRecordBatch(compute.WithAllocator(context.WithoutCancel(ctx), mem), b, m, compute.DefaultFilterOptions())
}

func release(bs []arrow.RecordBatch) {
	for _, b := range bs {
		b.Release()
	}
}
