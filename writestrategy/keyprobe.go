package writestrategy

import (
	"context"
	"encoding/binary"
	"fmt"
	"iter"
	"math/bits"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade"
)

// An append_new over an Iceberg target probes the target by key in the
// client: the target's key columns are read from Iceberg into an
// in-memory set (keySet), and the deduplicated source rows are streamed
// as they would be for an empty target, the rows whose key the set holds
// dropped from each batch (keyProbe.filter). The keys compare exactly as
// the row store's anti-join compares them (rowKey: a jsonb array), which
// for the key types probed here is value equality with NULL equal to
// NULL: integers of any width by value, text byte-wise, booleans. A key
// of other types (numbers with a fractional part, dates, floats, ...), or
// whose type classes differ between source and target, or a source with
// a column the stream may round (an unconstrained numeric), is compared
// in SQL as before (hydrateKeys).
//
// Memory: the set holds every target key read (within the source's key
// range for a single integer key): about 16 bytes per key for a single
// integer key (open addressing, at most half full), about 50 bytes plus
// the key's bytes otherwise (a Go map of the key's canonical encoding).
// The source is streamed one batch at a time, as for any write.

// keyClass is how a declared key type compares: "int", "text", "bool",
// or "" when the probe does not handle it.
func keyClass(typ string) string {
	t := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(typ)), "pg_catalog.")
	base, _, _ := strings.Cut(t, "(")
	switch strings.TrimSpace(base) {
	case "smallint", "integer", "int", "bigint", "int2", "int4", "int8":
		return "int"
	case "text", "varchar", "character varying":
		return "text"
	case "boolean", "bool":
		return "bool"
	}
	return ""
}

// mayRound reports whether the stream of a column of declared type typ
// may round its values (an unconstrained numeric, or an array of one).
func mayRound(typ string) bool {
	t := strings.ToLower(typ)
	return (strings.Contains(t, "numeric") || strings.Contains(t, "decimal")) && !strings.Contains(t, "(")
}

// keyProbe drops from a stream of source rows those whose key the target
// holds.
type keyProbe struct {
	key []string
	set *keySet
}

// probeKeys reads the key columns of dep's Iceberg target into a keyProbe;
// ok is false when the key is not one the probe compares as SQL does
// (then the caller compares in SQL).
func (e *Env) probeKeys(ctx context.Context, tx pgx.Tx, dep Deploy, ds map[string]datasetRow, pc *planContext) (_ *keyProbe, ok bool, err error) {
	ts, err := ParseSchema(ds[dep.Target].schema)
	if err != nil {
		return nil, false, err
	}
	src, err := pc.source(dep.Source)
	if err != nil {
		return nil, false, err
	}
	for _, c := range src.schema.Columns {
		if mayRound(c.Type) {
			return nil, false, nil
		}
	}
	key := dep.Key
	if len(key) == 0 {
		key = src.schema.names()
	}
	ks := keyColumns(ts, key)
	if len(ks.Columns) != len(key) {
		return nil, false, nil
	}
	classes := make([]string, len(key))
	for i, c := range ks.Columns {
		sc := keyColumns(src.schema, []string{c.Name})
		classes[i] = keyClass(c.Type)
		if classes[i] == "" || len(sc.Columns) != 1 || keyClass(sc.Columns[0].Type) != classes[i] {
			return nil, false, nil
		}
	}
	filter, err := keyRange(ctx, tx, dep, src, ks)
	if err != nil {
		return nil, false, err
	}
	if e.Lakehouse == nil {
		return nil, false, fmt.Errorf("%w: dataset %q lives in Iceberg: set Env.Lakehouse to read it", ErrInvalid, dep.Target)
	}
	p := &keyProbe{key: key, set: newKeySet(len(key) == 1 && classes[0] == "int")}
	var enc keyEncoder
	for rec, err := range e.Lakehouse.Scan(ctx, dep.Target, facade.ScanOptions{Columns: key, Filter: filter}) {
		if err != nil {
			return nil, false, fmt.Errorf("read the keys of %q: %w", dep.Target, err)
		}
		cols, err := enc.columns(rec, key)
		if err != nil {
			return nil, false, fmt.Errorf("read the keys of %q: %w", dep.Target, err)
		}
		for i := range int(rec.NumRows()) {
			if err := p.set.add(&enc, cols, i); err != nil {
				return nil, false, fmt.Errorf("read the keys of %q: %w", dep.Target, err)
			}
		}
	}
	return p, true, nil
}

// keyColumns are the columns of s named by key, in key order.
func keyColumns(s Schema, key []string) Schema {
	var ks Schema
	for _, k := range key {
		for _, c := range s.Columns {
			if c.Name == k {
				ks.Columns = append(ks.Columns, c)
			}
		}
	}
	return ks
}

// keyRange is the scan filter of a target's key columns ks: within the
// source's key range when the key is one integer column (only the data
// files that can hold a source key are read), else none.
func keyRange(ctx context.Context, tx pgx.Tx, dep Deploy, src *relation, ks Schema) ([]facade.Range, error) {
	if len(ks.Columns) != 1 || rangeKind(strings.ToLower(ks.Columns[0].Type)) != "int" {
		return nil, nil
	}
	b := newBuilder(nil)
	q := quoteIdents([]string{ks.Columns[0].Name})[0]
	b.w("SELECT min(s.", q, ")::pg_catalog.int8, max(s.", q, ")::pg_catalog.int8 FROM ", src.render(b), " s")
	var lo, hi *int64
	if err := tx.QueryRow(ctx, b.String(), b.args...).Scan(&lo, &hi); err != nil {
		return nil, queryError("key range of "+dep.Source, err)
	}
	if lo == nil || hi == nil {
		return nil, nil
	}
	return []facade.Range{{Column: ks.Columns[0].Name, Min: *lo, Max: *hi}}, nil
}

// filter drops from rows (borrowed batches, see Computed.Batches) those
// whose key the set holds; a batch keeping every row is passed on as is,
// one keeping none is not passed on.
func (p *keyProbe) filter(rows iter.Seq2[arrow.RecordBatch, error]) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		var enc keyEncoder
		var keep [][2]int // runs of kept rows: [start, end)
		for rec, err := range rows {
			if err != nil {
				yield(nil, err)
				return
			}
			cols, err := enc.columns(rec, p.key)
			if err != nil {
				yield(nil, err)
				return
			}
			keep = keep[:0]
			n := int(rec.NumRows())
			for i := 0; i < n; i++ {
				in, err := p.set.has(&enc, cols, i)
				if err != nil {
					yield(nil, err)
					return
				}
				switch {
				case in:
				case len(keep) > 0 && keep[len(keep)-1][1] == i:
					keep[len(keep)-1][1] = i + 1
				default:
					keep = append(keep, [2]int{i, i + 1})
				}
			}
			if len(keep) == 0 {
				continue
			}
			if len(keep) == 1 && keep[0] == [2]int{0, n} {
				if !yield(rec, nil) {
					return
				}
				continue
			}
			out, err := takeRuns(rec, keep)
			if err != nil {
				yield(nil, err)
				return
			}
			more := yield(out, nil)
			out.Release()
			if !more {
				return
			}
		}
	}
}

// takeRuns is a new batch of rec's rows in runs (a slice when there is one
// run, the runs' rows concatenated otherwise).
func takeRuns(rec arrow.RecordBatch, runs [][2]int) (arrow.RecordBatch, error) {
	if len(runs) == 1 {
		return rec.NewSlice(int64(runs[0][0]), int64(runs[0][1])), nil
	}
	cols := make([]arrow.Array, rec.NumCols())
	release := func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}
	parts := make([]arrow.Array, len(runs))
	var rows int64
	for _, r := range runs {
		rows += int64(r[1] - r[0])
	}
	for j := range cols {
		for k, r := range runs {
			parts[k] = array.NewSlice(rec.Column(j), int64(r[0]), int64(r[1]))
		}
		c, err := array.Concatenate(parts, memory.DefaultAllocator)
		for _, a := range parts {
			a.Release()
		}
		if err != nil {
			release()
			return nil, fmt.Errorf("%w: column %q: %w", ErrInvalid, rec.Schema().Field(j).Name, err)
		}
		cols[j] = c
	}
	out := array.NewRecordBatch(rec.Schema(), cols, rows)
	release() // the batch holds its own references
	return out, nil
}

// keyEncoder reads key values from Arrow columns: as an int64 for a single
// integer key, else as a canonical byte encoding of the key tuple.
type keyEncoder struct {
	buf  []byte
	cols []arrow.Array
}

// columns are rec's key columns, in key order.
func (e *keyEncoder) columns(rec arrow.RecordBatch, key []string) ([]arrow.Array, error) {
	e.cols = e.cols[:0]
	for _, k := range key {
		is := rec.Schema().FieldIndices(k)
		if len(is) != 1 {
			return nil, fmt.Errorf("%w: rows have no single key column %q", ErrInvalid, k)
		}
		c := rec.Column(is[0])
		if x, ok := c.(array.ExtensionArray); ok {
			c = x.Storage()
		}
		e.cols = append(e.cols, c)
	}
	return e.cols, nil
}

// intValue is the integer at row i of a; null when it is NULL.
func intValue(a arrow.Array, i int) (v int64, null bool, err error) {
	if a.IsNull(i) {
		return 0, true, nil
	}
	switch x := a.(type) {
	case *array.Int8:
		return int64(x.Value(i)), false, nil
	case *array.Int16:
		return int64(x.Value(i)), false, nil
	case *array.Int32:
		return int64(x.Value(i)), false, nil
	case *array.Int64:
		return x.Value(i), false, nil
	}
	return 0, false, fmt.Errorf("%w: an integer key column is Arrow %s", ErrInvalid, a.DataType())
}

// encode is the canonical encoding of the key at row i of cols: per
// column a tag (0 NULL, 1 integer, 2 text, 3 boolean) and the value (an
// integer as 8 big-endian bytes, text as its length and bytes, a boolean
// as one byte). Two keys are equal exactly when their encodings are.
func (e *keyEncoder) encode(cols []arrow.Array, i int) ([]byte, error) {
	b := e.buf[:0]
	for _, a := range cols {
		if a.IsNull(i) {
			b = append(b, 0)
			continue
		}
		switch x := a.(type) {
		case *array.String:
			b = appendText(b, x.Value(i))
		case *array.LargeString:
			b = appendText(b, x.Value(i))
		case *array.StringView:
			b = appendText(b, x.Value(i))
		case *array.Boolean:
			v := byte(0)
			if x.Value(i) {
				v = 1
			}
			b = append(b, 3, v)
		default:
			v, _, err := intValue(a, i)
			if err != nil {
				return nil, err
			}
			b = binary.BigEndian.AppendUint64(append(b, 1), uint64(v))
		}
	}
	e.buf = b
	return b, nil
}

func appendText(b []byte, s string) []byte {
	b = binary.AppendUvarint(append(b, 2), uint64(len(s)))
	return append(b, s...)
}

// keySet is a set of keys with exact equality: of int64 values (an
// open-addressing table) for a single integer key, of canonical key
// encodings otherwise.
type keySet struct {
	ints     bool
	slots    []int64 // 0 is an empty slot; the key 0 is hasZero
	n        int
	shift    uint
	hasZero  bool
	hasNull  bool
	encoded  map[string]struct{}
	capacity int
}

func newKeySet(ints bool) *keySet {
	s := &keySet{ints: ints}
	if ints {
		s.resize(1 << 10)
	} else {
		s.encoded = map[string]struct{}{}
	}
	return s
}

// slot is where the probe for v starts (Fibonacci hashing: the high bits
// of v times 2^64/phi).
func (s *keySet) slot(v int64) uint64 {
	return (uint64(v) * 0x9e3779b97f4a7c15) >> s.shift
}

func (s *keySet) resize(size int) {
	old := s.slots
	s.slots = make([]int64, size)
	s.shift = 64 - uint(bits.Len(uint(size-1)))
	s.capacity = size / 2
	s.n = 0
	for _, v := range old {
		if v != 0 {
			s.insert(v)
		}
	}
}

func (s *keySet) insert(v int64) {
	mask := uint64(len(s.slots) - 1)
	for i := s.slot(v); ; i = (i + 1) & mask {
		switch s.slots[i] {
		case 0:
			s.slots[i] = v
			s.n++
			return
		case v:
			return
		}
	}
}

func (s *keySet) hasInt(v int64) bool {
	if v == 0 {
		return s.hasZero
	}
	mask := uint64(len(s.slots) - 1)
	for i := s.slot(v); ; i = (i + 1) & mask {
		switch s.slots[i] {
		case 0:
			return false
		case v:
			return true
		}
	}
}

// add adds the key at row i of cols.
func (s *keySet) add(e *keyEncoder, cols []arrow.Array, i int) error {
	if !s.ints {
		b, err := e.encode(cols, i)
		if err == nil {
			s.encoded[string(b)] = struct{}{}
		}
		return err
	}
	v, null, err := intValue(cols[0], i)
	switch {
	case err != nil:
		return err
	case null:
		s.hasNull = true
	case v == 0:
		s.hasZero = true
	default:
		if s.n >= s.capacity {
			s.resize(2 * len(s.slots))
		}
		s.insert(v)
	}
	return nil
}

// has reports whether the set holds the key at row i of cols.
func (s *keySet) has(e *keyEncoder, cols []arrow.Array, i int) (bool, error) {
	if !s.ints {
		b, err := e.encode(cols, i)
		if err != nil {
			return false, err
		}
		_, ok := s.encoded[string(b)]
		return ok, nil
	}
	v, null, err := intValue(cols[0], i)
	if err != nil || null {
		return s.hasNull && null, err
	}
	return s.hasInt(v), nil
}
