package scanfiles

import (
	"cmp"
	"slices"
	"strings"

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
	if len(s.Keys) == 0 {
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
