package facade

import (
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"
)

// withValueBytes returns rec with every string and binary column's value
// buffer holding a non-nil byte slice, releasing rec when it builds a new
// batch.
//
// A batch whose text values are all empty strings may carry a value buffer
// whose bytes are a nil slice (nothing was ever appended to it). The
// Parquet writer's statistics take a nil value for "no value", so the
// empty string would be left out of the column chunk's minimum: a file
// holding "" and "b" would say min="b", and every engine that prunes by
// Parquet statistics or Iceberg bounds (DuckDB, Spark, Trino, iceberg-go)
// would skip it for k = "". A zero-length non-nil slice is counted.
func withValueBytes(rec arrow.RecordBatch) arrow.RecordBatch {
	return replaceColumns(rec, func(_ arrow.Field, d arrow.ArrayData) (arrow.ArrayData, bool) { return valueBytesData(d) })
}

// replaceColumns returns rec with each column for which fix returns new
// data (which it then releases) replaced by that data, releasing rec when
// it builds a new batch.
func replaceColumns(rec arrow.RecordBatch, fix func(f arrow.Field, d arrow.ArrayData) (arrow.ArrayData, bool)) arrow.RecordBatch {
	cols := rec.Columns()
	var fixed []arrow.Array
	for i, f := range rec.Schema().Fields() {
		d, ok := fix(f, cols[i].Data())
		if !ok {
			continue
		}
		if fixed == nil {
			fixed = make([]arrow.Array, len(cols))
			copy(fixed, cols)
		}
		fixed[i] = array.MakeFromData(d)
		d.Release()
	}
	if fixed == nil {
		return rec
	}
	out := array.NewRecordBatch(rec.Schema(), fixed, rec.NumRows())
	for i, c := range fixed {
		if c != cols[i] {
			c.Release()
		}
	}
	rec.Release()
	return out
}

// valueBytesData returns a copy of d (and true) when d, or a child of it,
// is a string or binary array with non-null values over a value buffer
// whose bytes are nil.
func valueBytesData(d arrow.ArrayData) (arrow.ArrayData, bool) {
	bufs := d.Buffers()
	children := d.Children()
	var (
		newBufs     []*memory.Buffer
		newChildren []arrow.ArrayData
	)
	switch d.DataType().ID() {
	case arrow.STRING, arrow.BINARY, arrow.LARGE_STRING, arrow.LARGE_BINARY:
		if len(bufs) == 3 && bufs[2] != nil && bufs[2].Bytes() == nil && d.NullN() < d.Len() {
			newBufs = append([]*memory.Buffer(nil), bufs...)
			newBufs[2] = memory.NewBufferBytes([]byte{})
		}
	}
	for i, ch := range children {
		nc, ok := valueBytesData(ch)
		if !ok {
			continue
		}
		if newChildren == nil {
			newChildren = append([]arrow.ArrayData(nil), children...)
		}
		newChildren[i] = nc
		defer nc.Release()
	}
	if newBufs == nil && newChildren == nil {
		return nil, false
	}
	if newBufs == nil {
		newBufs = bufs
	}
	if newChildren == nil {
		newChildren = children
	}
	return array.NewData(d.DataType(), d.Len(), newBufs, newChildren, d.NullN(), d.Offset()), true
}

// withOwnedValues returns rec with the value bytes of its string and
// binary columns named in names copied to memory of the Go heap, releasing
// rec when it builds a new batch.
//
// iceberg-go's clustered writer keeps the partition values of the
// partitions it has closed, as strings that point into the batch's value
// buffer; once the batch is released, an allocator that reuses memory (the
// cursor's) overwrites them, and a later partition can then match a closed
// one ("records arriving after its writer was already closed"). Values on
// the Go heap stay valid as long as they are referenced.
func withOwnedValues(rec arrow.RecordBatch, names []string) arrow.RecordBatch {
	return replaceColumns(rec, func(f arrow.Field, d arrow.ArrayData) (arrow.ArrayData, bool) {
		switch f.Type.ID() {
		case arrow.STRING, arrow.BINARY, arrow.LARGE_STRING, arrow.LARGE_BINARY:
		default:
			return nil, false
		}
		bufs := append([]*memory.Buffer(nil), d.Buffers()...)
		if !slices.Contains(names, f.Name) || len(bufs) != 3 || bufs[2] == nil {
			return nil, false
		}
		bufs[2] = memory.NewBufferBytes(append(make([]byte, 0, bufs[2].Len()), bufs[2].Bytes()...))
		return array.NewData(d.DataType(), d.Len(), bufs, nil, d.NullN(), d.Offset()), true
	})
}

// partitionSources returns the names of the source columns of tbl's
// partition fields.
func partitionSources(tbl *table.Table) []string {
	spec, sc := tbl.Spec(), tbl.Schema()
	var names []string
	for _, pf := range spec.Fields() {
		if name, ok := sc.FindColumnName(pf.SourceID()); ok {
			names = append(names, name)
		}
	}
	return names
}
