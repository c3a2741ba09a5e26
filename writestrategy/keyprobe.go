package writestrategy

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"iter"
	"math"
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
// in SQL as before (hydrateKeys). The rows dropped are decoded by the
// stream before the probe sees them: a value an Iceberg write refuses
// (see Preflight) in a source row whose key the target already holds
// fails the write, where the SQL anti-join never decoded that row; and
// Preflight covers every deduplicated source row.
//
// Memory: the set holds every target key read (within the source's key
// range for a single integer key), in open-addressing slots of 8 bytes at
// most half full (16 to 32 bytes per key); a key other than a single
// integer also keeps its canonical encoding (a tag per column, 8 bytes
// per integer, the length and bytes of a text) in an arena. Measured at
// 1M keys (BenchmarkKeySet): 17 bytes per key for a bigint key, 30 for a
// short text key, 43 for a (bigint, text) key.
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
	// sourceRows are the source's rows (before deduplication), counted
	// with its key range: the count Skipped is drawn from.
	sourceRows int64
}

// probeKeys reads the key columns of dep's Iceberg target into a keyProbe;
// ok is false when the key is not one the probe compares as SQL does
// (then the caller compares in SQL).
func (e *Env) probeKeys(ctx context.Context, tx pgx.Tx, dep Deploy, ds map[string]datasetRow, pc *planContext) (_ *keyProbe, ok bool, err error) {
	ts, err := datasetSchema(dep.Target, ds[dep.Target].schema)
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
	rows, filter, err := keyRange(ctx, tx, dep, src, ks)
	if err != nil {
		return nil, false, err
	}
	if e.Lakehouse == nil {
		return nil, false, fmt.Errorf("%w: dataset %q lives in Iceberg: set Env.Lakehouse to read it", ErrInvalid, dep.Target)
	}
	p := &keyProbe{key: key, sourceRows: rows, set: newKeySet(len(key) == 1 && classes[0] == "int")}
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
// files that can hold a source key are read), else none; and the source's
// rows, counted in the same scan of it.
func keyRange(ctx context.Context, tx pgx.Tx, dep Deploy, src *relation, ks Schema) (rows int64, _ []facade.Range, _ error) {
	b := newBuilder(nil)
	ranged := len(ks.Columns) == 1 && rangeKind(strings.ToLower(ks.Columns[0].Type)) == "int"
	var lo, hi *int64
	dest := []any{&rows}
	b.w("SELECT count(*)")
	if ranged {
		q := quoteIdents([]string{ks.Columns[0].Name})[0]
		b.w(", min(s.", q, ")::pg_catalog.int8, max(s.", q, ")::pg_catalog.int8")
		dest = append(dest, &lo, &hi)
	}
	b.w(" FROM ", src.render(b), " s")
	if err := tx.QueryRow(ctx, b.String(), b.args...).Scan(dest...); err != nil {
		return 0, nil, queryError("key range of "+dep.Source, err)
	}
	if lo == nil || hi == nil {
		return rows, nil, nil
	}
	return rows, []facade.Range{{Column: ks.Columns[0].Name, Min: *lo, Max: *hi}}, nil
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

// keySet is a set of keys with exact equality: of int64 values for a
// single integer key, of canonical key encodings otherwise (kept one after
// the other in an arena). Both are open-addressing tables (linear
// probing) at most half full; a slot's hash only chooses where a key is
// looked for, the key itself is always compared.
type keySet struct {
	ints    bool
	slots   []uint64 // an int64 key (0: empty; the key 0 is hasZero), or an encoded key's tag<<32 | arena offset+1
	n       int
	shift   uint
	hasZero bool
	hasNull bool
	arena   []byte // encoded keys, each its length (uvarint) then its bytes
	seed    maphash.Seed
}

func newKeySet(ints bool) *keySet {
	s := &keySet{ints: ints, seed: maphash.MakeSeed()}
	s.resize(1 << 10)
	return s
}

// start is where the probe for hash h starts (Fibonacci hashing: the high
// bits of h times 2^64/phi).
func (s *keySet) start(h uint64) uint64 {
	return (h * 0x9e3779b97f4a7c15) >> s.shift
}

func (s *keySet) resize(size int) {
	old := s.slots
	s.slots = make([]uint64, size)
	s.shift = 64 - uint(bits.Len(uint(size-1)))
	mask := uint64(size - 1)
	for _, v := range old {
		if v == 0 {
			continue
		}
		h := v
		if !s.ints {
			h = maphash.Bytes(s.seed, s.entry(v))
		}
		i := s.start(h)
		for s.slots[i] != 0 {
			i = (i + 1) & mask
		}
		s.slots[i] = v
	}
}

// entry is the encoded key of slot value v.
func (s *keySet) entry(v uint64) []byte {
	off := int(uint32(v)) - 1
	n, k := binary.Uvarint(s.arena[off:])
	return s.arena[off+k : off+k+int(n)]
}

// find returns the slot of key v (an int64 key) or b (an encoded key, of
// hash h): the slot holding it, or the empty slot it would take.
func (s *keySet) find(v int64, b []byte, h uint64) (slot uint64, found bool) {
	mask := uint64(len(s.slots) - 1)
	tag := h >> 32 << 32
	for i := s.start(h); ; i = (i + 1) & mask {
		x := s.slots[i]
		switch {
		case x == 0:
			return i, false
		case s.ints && int64(x) == v:
			return i, true
		case !s.ints && x>>32<<32 == tag && string(s.entry(x)) == string(b):
			return i, true
		}
	}
}

// add adds the key at row i of cols.
func (s *keySet) add(e *keyEncoder, cols []arrow.Array, i int) error {
	var v int64
	var b []byte
	var h uint64
	if s.ints {
		x, null, err := intValue(cols[0], i)
		switch {
		case err != nil:
			return err
		case null:
			s.hasNull = true
			return nil
		case x == 0:
			s.hasZero = true
			return nil
		}
		v, h = x, uint64(x)
	} else {
		var err error
		if b, err = e.encode(cols, i); err != nil {
			return err
		}
		h = maphash.Bytes(s.seed, b)
	}
	slot, found := s.find(v, b, h)
	if found {
		return nil
	}
	if s.ints {
		s.slots[slot] = uint64(v)
	} else {
		if len(s.arena)+binary.MaxVarintLen64+len(b) >= math.MaxUint32 {
			return fmt.Errorf("%w: the target's keys exceed 4 GiB", ErrInvalid)
		}
		s.slots[slot] = h>>32<<32 | uint64(len(s.arena)+1)
		s.arena = append(binary.AppendUvarint(s.arena, uint64(len(b))), b...)
	}
	if s.n++; 2*s.n > len(s.slots) {
		s.resize(2 * len(s.slots))
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
		_, found := s.find(0, b, maphash.Bytes(s.seed, b))
		return found, nil
	}
	v, null, err := intValue(cols[0], i)
	switch {
	case err != nil:
		return false, err
	case null:
		return s.hasNull, nil
	case v == 0:
		return s.hasZero, nil
	}
	_, found := s.find(v, nil, uint64(v))
	return found, nil
}
