package identity

import (
	"encoding/binary"
	"fmt"
	"iter"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
)

// The row hash is a fixed, process-independent 64-bit hash over normalized
// column values, computed a column at a time. Values are normalized so the
// same logical value hashes the same whatever Arrow width carries it:
// integers as int64, floats as float64, decimals as (unscaled, scale),
// timestamps as int64 µs, UUIDs as 16 bytes (string or binary form),
// strings and binaries as bytes. Columns are folded in name order, so column
// order does not matter; identity columns are never hashed.
//
// It comes in two forms that differ only for rows holding a float -0:
//
//   - the row-id hash (version 1, behind __row_id): every NaN is one value
//     and -0 is +0, as it has been since row ids were first written, so the
//     __row_id of a row does not depend on which library version wrote it;
//   - the row hash (behind Checksum and the merge's comparison of rows):
//     the row-id hash of a row without a float -0, and for a row with one
//     that hash mixed with where its -0 values are (the columns, and the
//     positions within arrays), so -0 and +0 differ as they differ in
//     Postgres' text form and in the row store. Every NaN is still one
//     value: Postgres prints every NaN as "NaN", and the row store keeps
//     them as that text.
//
// Every other distinction the sinks make is one of the row-id hash
// already: NULL hashes apart from every value (the text 'NULL', the JSON
// text null, the empty string, the empty array, 0, false), and an array's
// length and its NULL elements are hashed.

const (
	k1 = 0xa0761d6478bd642f
	k2 = 0xe7037ed1a0b428db
	k3 = 0x8ebc6af09c88c6e3
)

func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a^k1, b^k2)
	return hi ^ lo
}

// hashBytes folds the length of b, then b 8 bytes at a time (little
// endian), then the last len(b)%8 bytes as one little-endian word (0 when
// there are none).
func hashBytes(seed uint64, b []byte) uint64 {
	n := len(b)
	h := mix(seed, uint64(n)^k3)
	i := 0
	for ; i+8 <= n; i += 8 {
		h = mix(h, binary.LittleEndian.Uint64(b[i:]))
	}
	r := n - i // 0..7 bytes left
	var tail uint64
	switch {
	case r == 0:
	case n >= 8:
		// the last 8 bytes, shifted down to the r left over
		tail = binary.LittleEndian.Uint64(b[n-8:]) >> (8 * (8 - r))
	case r >= 4:
		// two overlapping 4-byte words; shared bytes land on the same bits
		tail = uint64(binary.LittleEndian.Uint32(b)) | uint64(binary.LittleEndian.Uint32(b[r-4:]))<<(8*(r-4))
	default:
		tail = uint64(b[0]) | uint64(b[r>>1])<<(8*(r>>1)) | uint64(b[r-1])<<(8*(r-1))
	}
	return mix(h, tail)
}

func hashString(s string) uint64 {
	// Column names only: not on the hot path.
	return hashBytes(0, []byte(s))
}

// Value-class tags: the same logical value in two Arrow types hashes the
// same only within a class.
const (
	tagNull uint64 = iota + 1
	tagInt
	tagFloat
	tagDecimal
	tagString
	tagBinary
	tagUUID
	tagDate
	tagTimestamp
	tagTime
	tagList
	tagBool
)

// hashColumn folds the values of arr into h (len(h) == arr.Len()), using
// vals (same length) as scratch.
func hashColumn(f arrow.Field, colSeed uint64, arr arrow.Array, h, vals []uint64) error {
	if foldColumn(f, colSeed, arr, h) {
		return nil
	}
	if err := ValueHashes(f, arr, vals); err != nil {
		return err
	}
	vals = vals[:len(h)]
	for i := range h {
		h[i] = mix(h[i]^colSeed, vals[i])
	}
	return nil
}

// foldColumn is hashColumn in one pass, without the scratch, for the
// common column types without nulls; it reports false (h untouched) for the
// others. The value hashes are those of ValueHashes.
func foldColumn(f arrow.Field, colSeed uint64, arr arrow.Array, h []uint64) bool {
	if arr.NullN() > 0 {
		return false
	}
	n := len(h)
	switch a := arr.(type) {
	case *array.Int64:
		foldInts(a.Int64Values()[:n], colSeed, tagInt, h)
	case *array.Int32:
		foldInts(a.Int32Values()[:n], colSeed, tagInt, h)
	case *array.Int16:
		foldInts(a.Int16Values()[:n], colSeed, tagInt, h)
	case *array.Date32:
		foldInts(a.Date32Values()[:n], colSeed, tagDate, h)
	case *array.Timestamp:
		foldInts(a.TimestampValues()[:n], colSeed, tagTimestamp, h)
	case *array.Time64:
		foldInts(a.Time64Values()[:n], colSeed, tagTime, h)
	case *array.Float64:
		for i, v := range a.Float64Values()[:n] {
			h[i] = mix(h[i]^colSeed, mix(tagFloat, floatBits(v)))
		}
	case *array.Boolean:
		for i := range h {
			v := uint64(0)
			if a.Value(i) {
				v = 1
			}
			h[i] = mix(h[i]^colSeed, mix(tagBool, v))
		}
	case *array.Decimal128:
		scale := uint64(a.DataType().(*arrow.Decimal128Type).Scale)
		for i, v := range a.Values()[:n] {
			h[i] = mix(h[i]^colSeed, mix(mix(tagDecimal^scale, uint64(v.HighBits())), v.LowBits()))
		}
	case *array.String:
		if isUUIDField(f) {
			return false
		}
		foldVar(tagString, a.ValueOffsets(), valueData(a), colSeed, h)
	case *array.Binary:
		foldVar(tagBinary, a.ValueOffsets(), valueData(a), colSeed, h)
	default:
		return false
	}
	return true
}

func foldInts[T ~int16 | ~int32 | ~int64](vs []T, colSeed, tag uint64, h []uint64) {
	for i, v := range vs {
		h[i] = mix(h[i]^colSeed, mix(tag, uint64(int64(v))))
	}
}

func foldVar(tag uint64, offs []int32, data []byte, colSeed uint64, h []uint64) {
	offs = offs[:len(h)+1]
	for i := range h {
		h[i] = mix(h[i]^colSeed, hashBytes(tag, data[offs[i]:offs[i+1]]))
	}
}

// ValueHashes writes one hash per value of arr into out.
func ValueHashes(f arrow.Field, arr arrow.Array, out []uint64) error {
	if ext, ok := arr.(array.ExtensionArray); ok {
		if _, isUUID := arr.DataType().(*extensions.UUIDType); isUUID {
			return fixedHashes(ext.Storage().(*array.FixedSizeBinary), tagUUID, out)
		}
		return &UnsupportedTypeError{Column: f.Name, Type: arr.DataType().String()}
	}
	uuid := isUUIDField(f)
	switch a := arr.(type) {
	case *array.Boolean:
		for i := range out {
			v := uint64(0)
			if a.Value(i) {
				v = 1
			}
			out[i] = mix(tagBool, v)
		}
	case *array.Int8:
		intHashes(a.Int8Values(), out)
	case *array.Int16:
		intHashes(a.Int16Values(), out)
	case *array.Int32:
		intHashes(a.Int32Values(), out)
	case *array.Int64:
		intHashes(a.Int64Values(), out)
	case *array.Uint8:
		intHashes(a.Uint8Values(), out)
	case *array.Uint16:
		intHashes(a.Uint16Values(), out)
	case *array.Uint32:
		intHashes(a.Uint32Values(), out)
	case *array.Float32:
		for i, v := range a.Float32Values() {
			out[i] = mix(tagFloat, floatBits(float64(v)))
		}
	case *array.Float64:
		for i, v := range a.Float64Values() {
			out[i] = mix(tagFloat, floatBits(v))
		}
	case *array.Decimal128:
		scale := uint64(a.DataType().(*arrow.Decimal128Type).Scale)
		for i := range out {
			v := a.Value(i)
			out[i] = mix(mix(tagDecimal^scale, uint64(v.HighBits())), v.LowBits())
		}
	case *array.String:
		if uuid {
			for i := range out {
				if a.IsNull(i) {
					continue
				}
				u, err := parseUUID(a.Value(i))
				if err != nil {
					return fmt.Errorf("%w: column %q row %d: %v", ErrInvalidRequest, f.Name, i, err)
				}
				out[i] = hashBytes(tagUUID, u[:])
			}
		} else {
			varHashes(tagString, a.ValueOffsets(), valueData(a), out)
		}
	case *array.Binary:
		varHashes(tagBinary, a.ValueOffsets(), valueData(a), out)
	case *array.FixedSizeBinary:
		tag := tagBinary
		if uuid {
			tag = tagUUID
		}
		return fixedHashes(a, tag, out)
	case *array.Date32:
		for i, v := range a.Date32Values() {
			out[i] = mix(tagDate, uint64(int64(v)))
		}
	case *array.Timestamp:
		for i, v := range a.TimestampValues() {
			out[i] = mix(tagTimestamp, uint64(int64(v)))
		}
	case *array.Time64:
		for i, v := range a.Time64Values() {
			out[i] = mix(tagTime, uint64(int64(v)))
		}
	case *array.List:
		child := a.ListValues()
		ef := a.DataType().(*arrow.ListType).ElemField()
		ef.Name = f.Name
		ef.Metadata = f.Metadata // element inherits the column's pg tags (uuid[])
		ch := make([]uint64, child.Len())
		if err := ValueHashes(ef, child, ch); err != nil {
			return err
		}
		for i := range out {
			lo, hi := a.ValueOffsets(i) // honours the array's slice offset
			h := mix(tagList, uint64(hi-lo))
			for _, v := range ch[lo:hi] {
				h = mix(h, v)
			}
			out[i] = h
		}
	default:
		return &UnsupportedTypeError{Column: f.Name, Type: arr.DataType().String()}
	}
	if arr.NullN() > 0 {
		for i := range out {
			if arr.IsNull(i) {
				out[i] = mix(tagNull, 0)
			}
		}
	}
	return nil
}

// valueData is the whole data buffer of a variable-width array, which its
// offsets index.
func valueData(a arrow.Array) []byte {
	if b := a.Data().Buffers()[2]; b != nil {
		return b.Bytes()
	}
	return nil
}

// varHashes hashes the values of a variable-width array given its offsets
// (len(out)+1 of them, from the array's slice offset) and its whole data
// buffer.
func varHashes(tag uint64, offs []int32, data []byte, out []uint64) {
	offs = offs[:len(out)+1]
	for i := range out {
		out[i] = hashBytes(tag, data[offs[i]:offs[i+1]])
	}
}

func fixedHashes(a *array.FixedSizeBinary, tag uint64, out []uint64) error {
	for i := range out {
		out[i] = hashBytes(tag, a.Value(i))
	}
	if a.NullN() > 0 {
		for i := range out {
			if a.IsNull(i) {
				out[i] = mix(tagNull, 0)
			}
		}
	}
	return nil
}

func intHashes[T int8 | int16 | int32 | int64 | uint8 | uint16 | uint32](vs []T, out []uint64) {
	for i, v := range vs {
		out[i] = mix(tagInt, uint64(int64(v)))
	}
}

// floatBits is the value a float contributes to the row-id hash: every NaN
// is one value and -0 is +0 (the row hash tells -0 apart: see negZeros).
func floatBits(v float64) uint64 {
	switch {
	case math.IsNaN(v):
		return 0x7ff8000000000001
	case v == 0:
		return 0 // -0 == +0
	}
	return math.Float64bits(v)
}

// kNegZero separates the row hash of a row holding a float -0 from the
// row-id hash it is derived from.
const kNegZero = 0x589965cc75374cc3

// isNegZero reports whether v is -0.
func isNegZero(v float64) bool { return v == 0 && math.Signbit(v) }

// negZeros calls mark(i, where) for each non-NULL value i of arr that is or
// holds a float -0: where is 1 for a float, and for an array a hash of the
// positions (and, nested, the places) of the -0 among its elements. Values
// without one, and arrays of types that hold no float, are not reported.
func negZeros(arr arrow.Array, mark func(i int, where uint64)) {
	switch a := arr.(type) {
	case *array.Float64:
		for i, v := range a.Float64Values() {
			if isNegZero(v) && a.IsValid(i) {
				mark(i, 1)
			}
		}
	case *array.Float32:
		for i, v := range a.Float32Values() {
			if isNegZero(float64(v)) && a.IsValid(i) {
				mark(i, 1)
			}
		}
	case *array.List:
		// the elements' -0 in element order, then folded per list
		type at struct {
			k     int
			where uint64
		}
		var found []at
		negZeros(a.ListValues(), func(k int, where uint64) { found = append(found, at{k, where}) })
		for j, i := 0, 0; j < len(found) && i < a.Len(); i++ {
			lo, hi := a.ValueOffsets(i)
			for j < len(found) && int64(found[j].k) < lo {
				j++
			}
			if a.IsNull(i) {
				continue
			}
			w, has := uint64(0), false
			for ; j < len(found) && int64(found[j].k) < hi; j++ {
				w, has = mix(mix(w, uint64(int64(found[j].k)-lo)), found[j].where), true
			}
			if has {
				mark(i, w)
			}
		}
	}
}

// rowHasher computes row hashes over the business columns of batches that
// share one schema. Not safe for concurrent use: it keeps scratch space.
type rowHasher struct {
	order []int    // business column indices, sorted by name
	seeds []uint64 // per order entry: hash of the column name
	vals  []uint64 // scratch: one column's value hashes
	// zeros are the rows of the last batch hashed that hold a float -0,
	// each with where they hold them (see negZeros); zat maps a row to
	// its entry plus one (0: none), sized on the first -0.
	zeros []negZeroRow
	zat   []int32
}

// negZeroRow is a row holding a float -0 and where it holds them.
type negZeroRow struct {
	row   int
	where uint64
}

func newRowHasher(sc *arrow.Schema) *rowHasher {
	var order []int
	for i, f := range sc.Fields() {
		if !IsIdentity(f.Name) {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		return strings.Compare(sc.Field(a).Name, sc.Field(b).Name)
	})
	seeds := make([]uint64, len(order))
	for j, i := range order {
		seeds[j] = hashString(sc.Field(i).Name)
	}
	return &rowHasher{order: order, seeds: seeds}
}

// hash fills h (resized to the batch length) with the row-id hashes and
// notes the rows holding a float -0 (see exact and sum).
func (rh *rowHasher) hash(rec arrow.RecordBatch, h []uint64) ([]uint64, error) {
	n := int(rec.NumRows())
	h = slices.Grow(h[:0], n)[:n]
	clear(h)
	rh.vals = slices.Grow(rh.vals[:0], n)[:n]
	for _, z := range rh.zeros {
		rh.zat[z.row] = 0
	}
	rh.zeros = rh.zeros[:0]
	sc := rec.Schema()
	for j, i := range rh.order {
		if err := hashColumn(sc.Field(i), rh.seeds[j], rec.Column(i), h, rh.vals); err != nil {
			return nil, err
		}
		seed := rh.seeds[j]
		negZeros(rec.Column(i), func(r int, where uint64) {
			if len(rh.zat) < n {
				rh.zat = slices.Grow(rh.zat[:0], n)[:n]
				clear(rh.zat)
			}
			z := int(rh.zat[r]) - 1
			if z < 0 {
				z = len(rh.zeros)
				rh.zeros = append(rh.zeros, negZeroRow{row: r})
				rh.zat[r] = int32(z + 1)
			}
			rh.zeros[z].where = mix(rh.zeros[z].where^seed, where)
		})
	}
	return h, nil
}

// exactHash is the row hash of a row whose row-id hash is h and that holds
// a float -0 where z says.
func exactHash(h uint64, z negZeroRow) uint64 { return mix(h^kNegZero, z.where) }

// exact turns the row-id hashes h of the last batch hashed into its row
// hashes, in place.
func (rh *rowHasher) exact(h []uint64) []uint64 {
	for _, z := range rh.zeros {
		h[z.row] = exactHash(h[z.row], z)
	}
	return h
}

// sum adds to c the rows of the last batch hashed, given their row-id
// hashes h: c sums their row hashes.
func (rh *rowHasher) sum(c *Checksum, h []uint64) {
	c.add(h)
	for _, z := range rh.zeros {
		old, v := h[z.row], exactHash(h[z.row], z)
		c.Sum += v - old
		c.Sum2 += mix(v, k3) - mix(old, k3)
	}
}

// Checksum is an order-independent fingerprint of a set of rows
// (facade.Checksum has the same fields and converts from it): the row
// count and two independent 64-bit sums of the row hashes over the business
// columns (identity columns excluded). Equal multisets of rows give equal
// checksums whatever the order or batching.
type Checksum struct {
	Rows int64
	Sum  uint64
	Sum2 uint64
}

func (c *Checksum) add(h []uint64) {
	c.Rows += int64(len(h))
	for _, v := range h {
		c.Sum += v
		c.Sum2 += mix(v, k3)
	}
}

// String renders the checksum as rows:hex:hex.
func (c Checksum) String() string {
	return fmt.Sprintf("%d:%016x%016x", c.Rows, c.Sum, c.Sum2)
}

// ChecksumBatches computes the checksum of a stream of batches (for
// example rows read from Postgres by the cursor package). Batches are
// borrowed, never released. Identity columns present in the batches are
// ignored. facade.ChecksumBatches is this function.
func ChecksumBatches(batches iter.Seq2[arrow.RecordBatch, error]) (Checksum, error) {
	var (
		c  Checksum
		rh *rowHasher
		sc *arrow.Schema
		h  []uint64
	)
	for rec, err := range batches {
		if err != nil {
			return Checksum{}, err
		}
		if rh == nil || !rec.Schema().Equal(sc) {
			sc = rec.Schema()
			rh = newRowHasher(sc)
		}
		h, err = rh.hash(rec, h)
		if err != nil {
			return Checksum{}, err
		}
		rh.sum(&c, h)
	}
	return c, nil
}
