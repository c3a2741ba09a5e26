package scanfiles

import (
	"cmp"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
)

// Set is a set of values of one column, to prune the data files none of
// whose rows can hold one: Keys in the comparable form of Key, sorted by
// CompareKeys; Null when NULL is among the values.
type Set struct {
	FieldID int
	Type    iceberg.Type
	Keys    []any
	Null    bool
}

// Key is a literal in comparable form: int64 for integers, timestamps and
// dates, string for text; nil for other types (not pruned by).
func Key(l iceberg.Literal) any {
	switch v := l.(type) {
	case iceberg.Int32Literal:
		return int64(v)
	case iceberg.Int64Literal:
		return int64(v)
	case iceberg.TimestampLiteral:
		return int64(v)
	case iceberg.DateLiteral:
		return int64(v)
	case iceberg.StringLiteral:
		return string(v)
	}
	return nil
}

// CompareKeys orders two keys of the same kind (see Key).
func CompareKeys(a, b any) int {
	switch x := a.(type) {
	case int64:
		y, _ := b.(int64)
		return cmp.Compare(x, y)
	case string:
		y, _ := b.(string)
		return strings.Compare(x, y)
	}
	return 0
}

// MayContain reports whether df may hold a row of s: NULL in the set and
// NULLs (or no null count) in the file, or a value of the set within the
// file's lower and upper bounds (a missing bound bounds nothing), for any
// number of values.
func (s Set) MayContain(df iceberg.DataFile) bool {
	if s.Null {
		if n, ok := df.NullValueCounts()[s.FieldID]; !ok || n > 0 {
			return true
		}
	}
	if n, ok := df.NullValueCounts()[s.FieldID]; len(s.Keys) == 0 || ok && n >= df.Count() {
		return false
	}
	if s.Keys[0] == nil {
		return true
	}
	bound := func(b map[int][]byte) any {
		raw, ok := b[s.FieldID]
		if !ok {
			return nil
		}
		lit, err := iceberg.LiteralFromBytes(s.Type, raw)
		if err != nil {
			return nil
		}
		return Key(lit)
	}
	lo, hi := bound(df.LowerBoundValues()), bound(df.UpperBoundValues())
	i := 0
	if lo != nil {
		i, _ = slices.BinarySearchFunc(s.Keys, lo, CompareKeys)
	}
	return i < len(s.Keys) && (hi == nil || CompareKeys(s.Keys[i], hi) <= 0)
}

// SetOf is the set of the values of a (a column of keys) for the table
// column fld. ok is false when the pair is not one a Set prunes by: a
// column of another type than integer, date, timestamp (µs) or text.
func SetOf(fld iceberg.NestedField, a arrow.Array) (s Set, ok bool) {
	s = Set{FieldID: fld.ID, Type: fld.Type}
	switch fld.Type.(type) {
	case iceberg.StringType, iceberg.Int32Type, iceberg.Int64Type, iceberg.DateType, iceberg.TimestampType, iceberg.TimestampTzType:
	default:
		return s, false
	}
	_, text := fld.Type.(iceberg.StringType)
	for i := range a.Len() {
		if a.IsNull(i) {
			s.Null = true
			continue
		}
		var k any
		switch x := a.(type) {
		case *array.String:
			k = x.Value(i)
		case *array.Date32:
			k = int64(x.Value(i))
		case *array.Timestamp:
			if x.DataType().(*arrow.TimestampType).Unit != arrow.Microsecond {
				return s, false
			}
			k = int64(x.Value(i))
		case *array.Int64:
			k = x.Value(i)
		case *array.Int32:
			k = int64(x.Value(i))
		case *array.Int16:
			k = int64(x.Value(i))
		case *array.Int8:
			k = int64(x.Value(i))
		case *array.Uint32:
			k = int64(x.Value(i))
		case *array.Uint16:
			k = int64(x.Value(i))
		case *array.Uint8:
			k = int64(x.Value(i))
		default:
			return s, false
		}
		if _, isText := k.(string); isText != text {
			return s, false
		}
		s.Keys = append(s.Keys, k)
	}
	slices.SortFunc(s.Keys, CompareKeys)
	s.Keys = slices.CompactFunc(s.Keys, func(a, b any) bool { return CompareKeys(a, b) == 0 })
	return s, true
}
