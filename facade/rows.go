package facade

import (
	"fmt"
	"iter"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// FromReader adapts a RecordReader to the Rows sequence of a WriteRequest.
// The reader is not released.
func FromReader(r array.RecordReader) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for r.Next() {
			if !yield(r.RecordBatch(), nil) {
				return
			}
		}
		if err := r.Err(); err != nil {
			yield(nil, err)
		}
	}
}

// FromRows is the row-at-a-time form: it builds batches of batchSize rows
// of schema sc from rows of Go values: nil is NULL; bool, int, int16/32/64,
// float64, string and []byte go to the matching builder; any other value is
// parsed from its string form (string or fmt.Stringer) by the builder's
// AppendValueFromString (decimals "12.34", timestamps RFC 3339, ...). Each
// built batch is released after the yield.
func FromRows(mem memory.Allocator, sc *arrow.Schema, batchSize int, rows iter.Seq2[[]any, error]) iter.Seq2[arrow.RecordBatch, error] {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	if batchSize <= 0 {
		batchSize = 8192
	}
	return func(yield func(arrow.RecordBatch, error) bool) {
		b := array.NewRecordBuilder(mem, sc)
		defer b.Release()
		n := 0
		flush := func() bool {
			rec := b.NewRecordBatch()
			defer rec.Release()
			n = 0
			return yield(rec, nil)
		}
		for row, err := range rows {
			if err != nil {
				yield(nil, err)
				return
			}
			if len(row) != sc.NumFields() {
				yield(nil, fmt.Errorf("%w: row has %d values, schema %d columns", ErrInvalidRequest, len(row), sc.NumFields()))
				return
			}
			for i, v := range row {
				if err := appendValue(b.Field(i), v); err != nil {
					yield(nil, fmt.Errorf("%w: column %q: %v", ErrInvalidRequest, sc.Field(i).Name, err))
					return
				}
			}
			n++
			if n == batchSize && !flush() {
				return
			}
		}
		if n > 0 {
			flush()
		}
	}
}

func appendValue(b array.Builder, v any) error {
	if v == nil {
		b.AppendNull()
		return nil
	}
	switch bb := b.(type) {
	case *array.BooleanBuilder:
		if x, ok := v.(bool); ok {
			bb.Append(x)
			return nil
		}
	case *array.Int16Builder:
		if x, ok := v.(int16); ok {
			bb.Append(x)
			return nil
		}
	case *array.Int32Builder:
		switch x := v.(type) {
		case int32:
			bb.Append(x)
			return nil
		case int:
			bb.Append(int32(x))
			return nil
		}
	case *array.Int64Builder:
		switch x := v.(type) {
		case int64:
			bb.Append(x)
			return nil
		case int:
			bb.Append(int64(x))
			return nil
		}
	case *array.Float64Builder:
		if x, ok := v.(float64); ok {
			bb.Append(x)
			return nil
		}
	case *array.StringBuilder:
		if x, ok := v.(string); ok {
			bb.Append(x)
			return nil
		}
	case *array.BinaryBuilder:
		if x, ok := v.([]byte); ok {
			bb.Append(x)
			return nil
		}
	}
	if s, ok := v.(string); ok {
		return b.AppendValueFromString(s)
	}
	if s, ok := v.(fmt.Stringer); ok {
		return b.AppendValueFromString(s.String())
	}
	return fmt.Errorf("cannot append %T to %s", v, b.Type())
}
