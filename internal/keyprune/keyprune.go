// Package keyprune decides from a data file's statistics whether the file
// may hold a row whose column takes one of a set of values: the file
// pruning of a scan or a write limited to a set of keys, for any number of
// values (iceberg-go's IsIn stops pruning files beyond 200 values). A
// partitioned table gains by it too: a file's bounds lie within its
// partition.
package keyprune

import (
	"encoding/binary"
	"slices"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
)

// Column is the set of values of one column, as compared with the
// column's min/max statistics.
type Column struct {
	id   int
	ints []int64  // sorted distinct values: integers, dates (days), timestamps (µs)
	strs []string // sorted distinct values: text
	null bool     // NULL is in the set
}

// New returns the set of the values of a (the keys' column) for the table
// column fld. ok is false when the pair is not one it prunes by: a column
// of another type than integer, date, timestamp (µs) or text.
func New(fld iceberg.NestedField, a arrow.Array) (c Column, ok bool) {
	c.id = fld.ID
	for i := range a.Len() {
		if a.IsNull(i) {
			c.null = true
			continue
		}
		switch x := a.(type) {
		case *array.String:
			c.strs = append(c.strs, x.Value(i))
		case *array.Date32:
			c.ints = append(c.ints, int64(x.Value(i)))
		case *array.Timestamp:
			if x.DataType().(*arrow.TimestampType).Unit != arrow.Microsecond {
				return c, false
			}
			c.ints = append(c.ints, int64(x.Value(i)))
		case *array.Int64:
			c.ints = append(c.ints, x.Value(i))
		case *array.Int32:
			c.ints = append(c.ints, int64(x.Value(i)))
		case *array.Int16:
			c.ints = append(c.ints, int64(x.Value(i)))
		case *array.Int8:
			c.ints = append(c.ints, int64(x.Value(i)))
		case *array.Uint32:
			c.ints = append(c.ints, int64(x.Value(i)))
		case *array.Uint16:
			c.ints = append(c.ints, int64(x.Value(i)))
		case *array.Uint8:
			c.ints = append(c.ints, int64(x.Value(i)))
		default:
			return c, false
		}
	}
	switch fld.Type.(type) {
	case iceberg.StringType:
		slices.Sort(c.strs)
		c.strs = slices.Compact(c.strs)
		return c, len(c.ints) == 0
	case iceberg.Int32Type, iceberg.Int64Type, iceberg.DateType, iceberg.TimestampType, iceberg.TimestampTzType:
		slices.Sort(c.ints)
		c.ints = slices.Compact(c.ints)
		return c, len(c.strs) == 0
	}
	return c, false
}

// May reports whether df may hold a row whose column holds one of the
// values: one lies within the file's bounds, or NULL is in the set and the
// file may hold a NULL. A file without bounds may.
func (c *Column) May(df iceberg.DataFile) bool {
	nulls, counted := df.NullValueCounts()[c.id]
	switch {
	case c.null && (!counted || nulls > 0):
		return true
	case len(c.ints)+len(c.strs) == 0, counted && nulls >= df.Count():
		return false
	}
	lo, ok1 := df.LowerBoundValues()[c.id]
	hi, ok2 := df.UpperBoundValues()[c.id]
	if !ok1 || !ok2 {
		return true
	}
	if c.strs != nil {
		i := sort.SearchStrings(c.strs, string(lo))
		return i < len(c.strs) && c.strs[i] <= string(hi)
	}
	l, ok1 := boundInt(lo)
	u, ok2 := boundInt(hi)
	if !ok1 || !ok2 {
		return true
	}
	i := sort.Search(len(c.ints), func(i int) bool { return c.ints[i] >= l })
	return i < len(c.ints) && c.ints[i] <= u
}

// boundInt decodes an Iceberg int, long, date or timestamp bound (4 bytes
// for a column written before its promotion to long).
func boundInt(v []byte) (int64, bool) {
	switch len(v) {
	case 4:
		return int64(int32(binary.LittleEndian.Uint32(v))), true
	case 8:
		return int64(binary.LittleEndian.Uint64(v)), true
	}
	return 0, false
}
