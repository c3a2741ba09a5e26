package facadetest

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/vocab"
)

// rangeFilter is a facade.Range bound to a column of a batch schema.
type rangeFilter struct {
	r   facade.Range
	col int
	min any // bound in the column's comparable form: int64, float64, string
	max any
	// in, for a facade.In, holds its values in comparable form (isIn set);
	// null says whether NULL is among them.
	in         map[any]bool
	isIn, null bool
}

// bindFilter checks ranges and ins against sc by the rules of
// facade.Range and facade.In.
func bindFilter(sc *arrow.Schema, ranges []facade.Range, ins []facade.In) ([]rangeFilter, error) {
	out := make([]rangeFilter, 0, len(ranges)+len(ins))
	for _, in := range ins {
		is := sc.FieldIndices(in.Column)
		if len(is) != 1 {
			return nil, fmt.Errorf("%w: filter on unknown column %q", facade.ErrInvalidRequest, in.Column)
		}
		rf := rangeFilter{col: is[0], in: map[any]bool{}, isIn: true}
		for _, v := range in.Values {
			if v == nil {
				rf.null = true
				continue
			}
			k, err := boundValue(sc.Field(is[0]).Type, v)
			if err != nil {
				return nil, fmt.Errorf("%w: filter %s in set: %w", facade.ErrInvalidRequest, in.Column, err)
			}
			rf.in[k] = true
		}
		out = append(out, rf)
	}
	for _, r := range ranges {
		is := sc.FieldIndices(r.Column)
		if len(is) != 1 {
			return nil, fmt.Errorf("%w: filter on unknown column %q", facade.ErrInvalidRequest, r.Column)
		}
		if r.Min == nil && r.Max == nil {
			return nil, fmt.Errorf("%w: filter %s has no bound", facade.ErrInvalidRequest, r)
		}
		rf := rangeFilter{r: r, col: is[0]}
		var err error
		if r.Min != nil {
			if rf.min, err = boundValue(sc.Field(is[0]).Type, r.Min); err != nil {
				return nil, fmt.Errorf("%w: filter %s: %w", facade.ErrInvalidRequest, r, err)
			}
		}
		if r.Max != nil {
			if rf.max, err = boundValue(sc.Field(is[0]).Type, r.Max); err != nil {
				return nil, fmt.Errorf("%w: filter %s: %w", facade.ErrInvalidRequest, r, err)
			}
		}
		out = append(out, rf)
	}
	return out, nil
}

// boundValue converts a bound to the comparable form of a column of type dt:
// int64 for integers, timestamps (microseconds) and dates (days), float64
// for floating point, string for text.
func boundValue(dt arrow.DataType, v any) (any, error) {
	bad := fmt.Errorf("a %T bound does not compare with a %s column", v, dt)
	switch dt.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64:
		switch x := v.(type) {
		case int:
			return int64(x), nil
		case int32:
			return int64(x), nil
		case int64:
			return x, nil
		}
	case arrow.FLOAT32:
		if x, ok := v.(float64); ok {
			return float64(float32(x)), nil // compared at the column's precision, as Iceberg does
		}
	case arrow.FLOAT64:
		if x, ok := v.(float64); ok {
			return x, nil
		}
	case arrow.STRING, arrow.LARGE_STRING:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case arrow.TIMESTAMP:
		if t, ok := v.(time.Time); ok {
			return t.UnixMicro(), nil
		}
	case arrow.DATE32:
		if t, ok := v.(time.Time); ok {
			if !vocab.DayStart(t) {
				return nil, fmt.Errorf("a date bound must be midnight UTC, got %s", t.UTC().Format(time.RFC3339Nano))
			}
			return t.Unix() / 86400, nil
		}
	}
	return nil, bad
}

// cellValue is row i of arr in the comparable form of boundValue; ok is
// false for NULL.
func cellValue(arr arrow.Array, i int) (any, bool) {
	if arr.IsNull(i) {
		return nil, false
	}
	switch a := arr.(type) {
	case *array.Int8:
		return int64(a.Value(i)), true
	case *array.Int16:
		return int64(a.Value(i)), true
	case *array.Int32:
		return int64(a.Value(i)), true
	case *array.Int64:
		return a.Value(i), true
	case *array.Float32:
		return float64(a.Value(i)), true
	case *array.Float64:
		return a.Value(i), true
	case *array.String:
		return a.Value(i), true
	case *array.LargeString:
		return a.Value(i), true
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return a.Value(i).ToTime(unit).UnixMicro(), true
	case *array.Date32:
		return int64(a.Value(i)), true
	}
	return nil, false
}

func compare(a, b any) int {
	switch x := a.(type) {
	case int64:
		return cmp.Compare(x, b.(int64))
	case float64:
		// < and >, not cmp.Compare: a NaN compares equal to every bound
		y := b.(float64)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	}
	return strings.Compare(a.(string), b.(string))
}

func (f rangeFilter) match(v any, ok bool) bool {
	if f.isIn {
		if !ok {
			return f.null
		}
		if x, isFloat := v.(float64); isFloat && x == 0 {
			v = float64(0) // -0 equals 0
		}
		return f.in[v]
	}
	if !ok {
		return false
	}
	if f.min != nil {
		c := compare(v, f.min)
		if c < 0 || (c == 0 && f.r.MinExclusive) {
			return false
		}
	}
	if f.max != nil {
		c := compare(v, f.max)
		if c > 0 || (c == 0 && f.r.MaxExclusive) {
			return false
		}
	}
	return true
}

// filterBatch returns the rows of b (borrowed) matching every filter, as a
// new batch the caller releases.
func filterBatch(ctx context.Context, mem memory.Allocator, b arrow.RecordBatch, fs []rangeFilter) (arrow.RecordBatch, error) {
	mb := array.NewBooleanBuilder(mem)
	defer mb.Release()
	for i := range int(b.NumRows()) {
		keep := true
		for _, f := range fs {
			v, ok := cellValue(b.Column(f.col), i)
			if !f.match(v, ok) {
				keep = false
				break
			}
		}
		mb.Append(keep)
	}
	mask := mb.NewBooleanArray()
	defer mask.Release()
	return compute.FilterRecordBatch(compute.WithAllocator(ctx, mem), b, mask, compute.DefaultFilterOptions())
}
