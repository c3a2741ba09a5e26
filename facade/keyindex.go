package facade

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lakewrite/lakewrite/facade/internal/identity"
)

// keyIndex finds the probe's entries by key: an open-addressing table
// (linear probing) of 8-byte slots, each the entry's index plus one (0:
// empty) in the low half and the low 32 bits of its key hash as a tag in
// the high half, so that a lookup reads the entry only on a tag match.
// The slot is chosen by the high bits of the key hash (a well-mixed row
// hash), the tag is independent of it. The hash only chooses where a key
// is looked for: an entry is the key's when its key compares equal
// (mergeKeys), so two keys sharing a hash are two keys. It is built once,
// presized, for entries that no longer move.
type keyIndex struct {
	slots []uint64
	shift uint
}

// buildKeyIndex indexes entries by key; a key held twice is the target
// holding a key twice (errMergeShape).
func buildKeyIndex(entries []mergeEntry, keys *mergeKeys) (keyIndex, error) {
	if len(entries) >= 1<<31-1 {
		return keyIndex{}, fmt.Errorf("%w: the target holds too many rows to merge into", errMergeShape)
	}
	// At most half full: 2^k slots with 2^k >= 2*len.
	k := uint(4)
	if n := uint(2 * len(entries)); n > 1<<k {
		k = uint(bits.Len(n - 1))
	}
	x := keyIndex{slots: make([]uint64, 1<<k), shift: 64 - k}
	mask := uint64(len(x.slots) - 1)
	for i := range entries {
		kh := entries[i].khash
		s := kh >> x.shift
		slot := uint64(uint32(kh))<<32 | uint64(i+1)
		for {
			v := x.slots[s]
			if v == 0 {
				x.slots[s] = slot
				break
			}
			if v>>32 == slot>>32 {
				if e := &entries[int(uint32(v))-1]; e.khash == kh && keys.same(e, &entries[i]) {
					return keyIndex{}, fmt.Errorf("%w: the target holds a key twice", errMergeShape)
				}
			}
			s = (s + 1) & mask
		}
	}
	return x, nil
}

// find returns the index of the entry whose key is k (of key hash kh), or
// -1.
func (x *keyIndex) find(entries []mergeEntry, keys *mergeKeys, kh uint64, k probeKey) int {
	if len(x.slots) == 0 {
		return -1
	}
	mask := uint64(len(x.slots) - 1)
	tag := uint64(uint32(kh))
	for s := kh >> x.shift; ; s = (s + 1) & mask {
		v := x.slots[s]
		if v == 0 {
			return -1
		}
		if v>>32 == tag {
			if j := int(uint32(v)) - 1; entries[j].khash == kh && keys.equal(&entries[j], k) {
				return j
			}
		}
	}
}

// mergeKeys holds the keys of the probe's entries exactly, and reads the
// keys of a batch: a key of one integer column as its value (in
// mergeEntry.key, NULL in mergeEntry.knull), any other key as its
// canonical encoding (identity.AppendKey), kept in an arena (its length,
// uvarint, then its bytes) at offset mergeEntry.key.
type mergeKeys struct {
	cols []string
	// ints: the key is one column, an integer column in the target;
	// decided by the probe's first batch.
	ints, decided bool
	arena         []byte
	// hash, when set, replaces each key hash (tests: keys sharing hashes)
	hash func(uint64) uint64

	// the batch being read (i64: its key column, when ints and Int64)
	fields []arrow.Field
	arrs   []arrow.Array
	i64    *array.Int64
	buf    []byte
}

// probeKey is a key read from a batch: v and null for an integer key
// (other: the batch's key column is no integer, so the key equals no
// entry's), b the encoding of another key (valid until the next read).
type probeKey struct {
	v           int64
	null, other bool
	b           []byte
}

// batch makes rec the batch keys are read from, and returns the key
// hashes of its rows (the row hashes of its key columns) in kh.
func (m *mergeKeys) batch(rec arrow.RecordBatch, kh []uint64) ([]uint64, error) {
	m.fields, m.arrs = m.fields[:0], m.arrs[:0]
	for _, k := range m.cols {
		idx := rec.Schema().FieldIndices(k)
		if len(idx) != 1 {
			return nil, fmt.Errorf("%w: merge key column %q is not in the rows", ErrInvalidRequest, k)
		}
		m.fields, m.arrs = append(m.fields, rec.Schema().Field(idx[0])), append(m.arrs, rec.Column(idx[0]))
	}
	if !m.decided {
		m.decided = true
		if len(m.arrs) == 1 {
			m.ints = identity.IsIntArray(m.arrs[0])
		}
	}
	m.i64 = nil
	if a, ok := m.arrs[0].(*array.Int64); ok && m.ints {
		m.i64 = a
	}
	kr := array.NewRecordBatch(arrow.NewSchema(m.fields, nil), m.arrs, rec.NumRows())
	defer kr.Release()
	kh, err := identity.RowHashes(kr, kh)
	if err != nil {
		return nil, err
	}
	if m.hash != nil {
		for i, h := range kh {
			kh[i] = m.hash(h)
		}
	}
	return kh, nil
}

// at reads the key of row i of the batch.
func (m *mergeKeys) at(i int) (probeKey, error) {
	if m.i64 != nil {
		return probeKey{v: m.i64.Value(i), null: m.i64.IsNull(i)}, nil
	}
	if m.ints {
		v, null, ok := identity.IntKey(m.arrs[0], i)
		return probeKey{v: v, null: null, other: !ok}, nil
	}
	b, err := identity.AppendKey(m.buf[:0], m.fields, m.arrs, i)
	if err != nil {
		return probeKey{}, err
	}
	m.buf = b
	return probeKey{b: b}, nil
}

// store keeps k as e's key.
func (m *mergeKeys) store(e *mergeEntry, k probeKey) error {
	if m.ints {
		if k.other {
			return fmt.Errorf("%w: key column %q is not an integer column throughout", errMergeShape, m.cols[0])
		}
		e.key, e.knull = uint64(k.v), k.null
		return nil
	}
	e.key = uint64(len(m.arena))
	m.arena = append(binary.AppendUvarint(m.arena, uint64(len(k.b))), k.b...)
	return nil
}

// encoded is the encoding of e's key (not an integer key).
func (m *mergeKeys) encoded(e *mergeEntry) []byte {
	n, w := binary.Uvarint(m.arena[e.key:])
	start := e.key + uint64(w)
	return m.arena[start : start+n]
}

// equal reports whether e's key is k.
func (m *mergeKeys) equal(e *mergeEntry, k probeKey) bool {
	if m.ints {
		return !k.other && e.knull == k.null && (k.null || e.key == uint64(k.v))
	}
	return string(m.encoded(e)) == string(k.b)
}

// same reports whether entries a and b hold the same key.
func (m *mergeKeys) same(a, b *mergeEntry) bool {
	if m.ints {
		return a.knull == b.knull && (a.knull || a.key == b.key)
	}
	return string(m.encoded(a)) == string(m.encoded(b))
}
