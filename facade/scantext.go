package facade

import (
	"context"
	"iter"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// textCond is a condition of a scan on a text column, applied to the rows
// read by the facade itself: iceberg-go's row-level filtering of text
// columns drops matching rows of some files (non-ASCII values), while its
// file pruning by the manifests' bounds is exact.
type textCond struct {
	col        string
	in         map[string]bool // an In (nil: a Range)
	null       bool            // the In holds NULL
	lo, hi     *string
	loEx, hiEx bool
}

// splitText returns opts without its conditions on text columns (to read
// with iceberg-go), those conditions, and the columns added to the read to
// evaluate them (dropped from the batches returned).
func splitText(isc *iceberg.Schema, opts ScanOptions) (ScanOptions, []textCond, []string) {
	isText := func(col string) bool {
		fld, ok := isc.FindFieldByName(col)
		_, text := fld.Type.(iceberg.StringType)
		return ok && text
	}
	var conds []textCond
	read := opts
	read.Filter, read.In = nil, nil
	for _, r := range opts.Filter {
		lo, loOK := r.Min.(string)
		hi, hiOK := r.Max.(string)
		if !isText(r.Column) || (r.Min != nil && !loOK) || (r.Max != nil && !hiOK) {
			read.Filter = append(read.Filter, r)
			continue
		}
		c := textCond{col: r.Column, loEx: r.MinExclusive, hiEx: r.MaxExclusive}
		if r.Min != nil {
			c.lo = &lo
		}
		if r.Max != nil {
			c.hi = &hi
		}
		conds = append(conds, c)
	}
	for _, in := range opts.In {
		if !isText(in.Column) || slices.ContainsFunc(in.Values, func(v any) bool { _, s := v.(string); return v != nil && !s }) {
			read.In = append(read.In, in)
			continue
		}
		c := textCond{col: in.Column, in: map[string]bool{}}
		for _, v := range in.Values {
			if v == nil {
				c.null = true
			} else {
				c.in[v.(string)] = true
			}
		}
		conds = append(conds, c)
	}
	var extra []string
	if read.Columns != nil {
		read.Columns = slices.Clone(read.Columns)
		for _, c := range conds {
			if !slices.Contains(read.Columns, c.col) && !slices.Contains(extra, c.col) {
				extra = append(extra, c.col)
				read.Columns = append(read.Columns, c.col)
			}
		}
	}
	return read, conds, extra
}

// keep reports whether value v (null: NULL) satisfies c.
func (c textCond) keep(v string, null bool) bool {
	if c.in != nil {
		if null {
			return c.null
		}
		return c.in[v]
	}
	if null {
		return false
	}
	if c.lo != nil && (v < *c.lo || c.loEx && v == *c.lo) {
		return false
	}
	return c.hi == nil || v < *c.hi || !c.hiEx && v == *c.hi
}

// readText reads tasks (planned by a scan with every condition) with scan
// (without the text ones: its tasks' residuals are dropped, the scan's own
// filter holds the rest), keeping the rows that satisfy conds and dropping
// the extra columns.
func readText(ctx context.Context, scan *table.Scan, tasks []table.FileScanTask, conds []textCond, extra []string) (iter.Seq2[arrow.RecordBatch, error], error) {
	tasks = slices.Clone(tasks)
	for i := range tasks {
		tasks[i].Residual = nil
	}
	_, recs, err := scan.ReadTasks(ctx, tasks)
	if err != nil {
		return nil, err
	}
	return func(yield func(arrow.RecordBatch, error) bool) {
		for rec, err := range recs {
			if err != nil {
				yield(nil, err)
				return
			}
			out, err := filterText(ctx, rec, conds, extra)
			rec.Release()
			if err != nil {
				yield(nil, err)
				return
			}
			if out == nil {
				continue
			}
			more := yield(out, nil)
			out.Release()
			if !more {
				return
			}
		}
	}, nil
}

// filterText is the rows of rec satisfying conds, without the columns
// extra (nil when no row is left).
func filterText(ctx context.Context, rec arrow.RecordBatch, conds []textCond, extra []string) (arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	mask := make([]bool, n)
	for i := range mask {
		mask[i] = true
	}
	kept := n
	for _, c := range conds {
		idx := rec.Schema().FieldIndices(c.col)
		if len(idx) == 0 {
			continue
		}
		col := rec.Column(idx[0])
		value := textValue(col)
		for i := range n {
			if mask[i] {
				v, null := value(i)
				if !c.keep(v, null) {
					mask[i] = false
					kept--
				}
			}
		}
	}
	if kept == 0 {
		return nil, nil
	}
	out := rec
	out.Retain()
	if kept < n {
		mem := compute.GetAllocator(ctx)
		if mem == nil {
			mem = memory.DefaultAllocator
		}
		b := array.NewBooleanBuilder(mem)
		b.AppendValues(mask, nil)
		m := b.NewBooleanArray()
		b.Release()
		filtered, err := compute.FilterRecordBatch(ctx, rec, m, compute.DefaultFilterOptions())
		m.Release()
		out.Release()
		if err != nil {
			return nil, err
		}
		out = filtered
	}
	if len(extra) == 0 {
		return out, nil
	}
	var fields []arrow.Field
	var cols []arrow.Array
	for i, f := range out.Schema().Fields() {
		if !slices.Contains(extra, f.Name) {
			fields, cols = append(fields, f), append(cols, out.Column(i))
		}
	}
	md := out.Schema().Metadata()
	proj := array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, out.NumRows())
	out.Release()
	return proj, nil
}

// textValue reads the strings of a text column (string, large string or
// their dictionary).
func textValue(a arrow.Array) func(int) (string, bool) {
	switch x := a.(type) {
	case *array.String:
		return func(i int) (string, bool) { return x.Value(i), x.IsNull(i) }
	case *array.LargeString:
		return func(i int) (string, bool) { return x.Value(i), x.IsNull(i) }
	case *array.StringView:
		return func(i int) (string, bool) { return x.Value(i), x.IsNull(i) }
	case *array.Dictionary:
		d := textValue(x.Dictionary())
		return func(i int) (string, bool) {
			if x.IsNull(i) {
				return "", true
			}
			return d(x.GetValueIndex(i))
		}
	}
	return func(i int) (string, bool) { return a.ValueStr(i), a.IsNull(i) }
}
