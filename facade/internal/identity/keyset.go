package identity

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
)

// CheckScope checks a scoped replace's scope (its columns cols and its
// keys) against the request's schema sc: business columns of sc, each
// once, and one key column per column, of a type that compares with it.
func CheckScope(sc *arrow.Schema, cols []string, keys arrow.RecordBatch) error {
	switch {
	case len(cols) == 0 || keys == nil:
		return fmt.Errorf("%w: a Scope needs Columns and a Keys batch", ErrInvalidRequest)
	case int(keys.NumCols()) != len(cols):
		return fmt.Errorf("%w: Scope.Keys has %d columns for %d scope columns", ErrInvalidRequest, keys.NumCols(), len(cols))
	}
	for i, c := range cols {
		idx := sc.FieldIndices(c)
		switch {
		case IsIdentity(c) || len(idx) != 1:
			return fmt.Errorf("%w: scope column %q is not a business column of the rows", ErrInvalidRequest, c)
		case slices.Index(cols, c) != i:
			return fmt.Errorf("%w: scope column %q named twice", ErrInvalidRequest, c)
		case !sameKeyType(sc.Field(idx[0]).Type, keys.Column(i).DataType()):
			return fmt.Errorf("%w: scope column %q is %s in the rows, %s in Scope.Keys", ErrInvalidRequest,
				c, sc.Field(idx[0]).Type, keys.Column(i).DataType())
		}
	}
	return nil
}

// sameKeyType: values of types a and b compare as keys (integers of any
// width, a timestamp whatever its zone, else the same type).
func sameKeyType(a, b arrow.DataType) bool {
	ta, ok1 := a.(*arrow.TimestampType)
	tb, ok2 := b.(*arrow.TimestampType)
	switch {
	case ok1 && ok2:
		return ta.Unit == tb.Unit
	case arrow.IsInteger(a.ID()) && arrow.IsInteger(b.ID()):
		return a.ID() != arrow.UINT64 && b.ID() != arrow.UINT64
	}
	return arrow.TypeEqual(a, b)
}

// ScopeKeepsColumns refuses the schema change ch of a scoped replace: the
// rows outside its scope stay as they are, so their columns must too (a
// promotion, a relaxed or reordered column change no value).
func ScopeKeepsColumns(ch SchemaChange) error {
	if len(ch.Added)+len(ch.Dropped)+len(ch.Retyped) == 0 {
		return nil
	}
	return fmt.Errorf("%w: a scoped replace keeps the table's columns (the rows would add %v, drop %v, retype %v): write the whole table",
		ErrInvalidRequest, ch.Added, ch.Dropped, ch.Retyped)
}

// KeySet is a set of keys over named columns (a scoped replace's scope),
// compared as AppendKey compares them: NULL equal to NULL, integers of any
// width equal by value, a float -0 apart from +0. A key of one integer
// column is held as its value, any other as its encoding.
type KeySet struct {
	cols   []string
	ints   bool
	vals   map[int64]struct{}
	null   bool // ints: the NULL key is in the set
	enc    map[string]struct{}
	fields []arrow.Field // of the batch bound
	arrs   []arrow.Array
	buf    []byte
}

// NewKeySet returns the set of the rows of keys, whose columns are cols
// in order; fields describe them (their Postgres tags decide how a value
// is encoded, see AppendKey).
func NewKeySet(cols []string, fields []arrow.Field, keys arrow.RecordBatch) (*KeySet, error) {
	s := &KeySet{cols: cols, ints: len(cols) == 1 && IsIntArray(keys.Column(0))}
	if s.ints {
		s.vals = map[int64]struct{}{}
	} else {
		s.enc = map[string]struct{}{}
	}
	s.fields, s.arrs = fields, keys.Columns()
	for i := range int(keys.NumRows()) {
		if s.ints {
			v, null, _ := IntKey(s.arrs[0], i)
			if null {
				s.null = true
			} else {
				s.vals[v] = struct{}{}
			}
			continue
		}
		b, err := AppendKey(s.buf[:0], s.fields, s.arrs, i)
		if err != nil {
			return nil, err
		}
		s.buf = b
		s.enc[string(b)] = struct{}{}
	}
	s.fields, s.arrs = nil, nil
	return s, nil
}

// Len is the number of keys in the set.
func (s *KeySet) Len() int {
	if s.ints {
		n := len(s.vals)
		if s.null {
			n++
		}
		return n
	}
	return len(s.enc)
}

// Ints reports whether the set is over one integer column (EachInt then
// walks it).
func (s *KeySet) Ints() bool { return s.ints }

// EachInt calls fn with each key of a set over one integer column (null
// for the NULL key) and reports true; for any other set it reports false
// and calls nothing.
func (s *KeySet) EachInt(fn func(v int64, null bool)) bool {
	if !s.ints {
		return false
	}
	for v := range s.vals {
		fn(v, false)
	}
	if s.null {
		fn(0, true)
	}
	return true
}

// Bind makes rec the batch Has reads; rec must have the set's columns.
func (s *KeySet) Bind(rec arrow.RecordBatch) error {
	s.fields, s.arrs = s.fields[:0], s.arrs[:0]
	for _, c := range s.cols {
		idx := rec.Schema().FieldIndices(c)
		if len(idx) != 1 {
			return fmt.Errorf("%w: scope column %q is not in the rows", ErrInvalidRequest, c)
		}
		s.fields, s.arrs = append(s.fields, rec.Schema().Field(idx[0])), append(s.arrs, rec.Column(idx[0]))
	}
	return nil
}

// Has reports whether the key of row i of the bound batch is in the set.
func (s *KeySet) Has(i int) (bool, error) {
	if s.ints {
		v, null, ok := IntKey(s.arrs[0], i)
		if null {
			return s.null, nil
		}
		_, in := s.vals[v]
		return ok && in, nil
	}
	b, err := AppendKey(s.buf[:0], s.fields, s.arrs, i)
	if err != nil {
		return false, err
	}
	s.buf = b
	_, in := s.enc[string(b)]
	return in, nil
}

// Sub returns c less the rows of d.
func (c Checksum) Sub(d Checksum) Checksum {
	return Checksum{Rows: c.Rows - d.Rows, Sum: c.Sum - d.Sum, Sum2: c.Sum2 - d.Sum2}
}

// Plus returns c with the rows of d.
func (c Checksum) Plus(d Checksum) Checksum {
	return Checksum{Rows: c.Rows + d.Rows, Sum: c.Sum + d.Sum, Sum2: c.Sum2 + d.Sum2}
}
