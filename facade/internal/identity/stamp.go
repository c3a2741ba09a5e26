package identity

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// DefaultOrdinalSlots is the largest size, in entries, of the table that
// numbers equal rows for __row_id (12 bytes an entry: 12 MiB, plus a 4 MiB
// filter once it is full): ordinals are exact for writes of up to 3/4 of
// it, 786,432, distinct rows.
const DefaultOrdinalSlots = 1 << 20

// Stamper turns request batches into table batches: business columns
// converted to the table's Arrow types, identity columns stamped, required
// columns checked, the checksum of the business columns accumulated.
//
// __row_id = H(dataset, first __row_index, row hash, ordinal) where the
// ordinal counts the earlier rows of this write with the same row hash
// (see ordinals): equal rows get 0, 1, 2, ... in the order written, so ids
// are distinct within a write, and a row whose values occur once in a
// write gets ordinal 0, so its id does not depend on the other rows. That
// is exact while the write has at most 3/4 of slots distinct row hashes;
// beyond, see ordinals. Memory is bounded by slots, not the row count.
type Stamper struct {
	mem       memory.Allocator
	out       *arrow.Schema
	in        *arrow.Schema
	src       []int // per out field: request column index, -1 = absent (nulls)
	kind      []int // per out field: 0 business, 1 row index, 2 row id, 3 created at
	required  []int // request columns that must not hold NULL
	hasher    *rowHasher
	seed      uint64
	next      int64
	createdAt int64
	rowIDIdx  int
	createdIx int
	numbering *ordinals
	h         []uint64
	ords      []uint32 // scratch: the ordinals of a batch
	// created holds the write's __created_at, shared by the batches that
	// preserve none (see constCreatedAt).
	created []int64
	sum     Checksum
}

// NewStamper stamps batches of in into out: requiredNames are the
// business columns of out that must not hold NULL, rowIDIdx and createdIdx
// the request's preserved identity columns (-1 when absent), base the
// __row_index of the first row, slots the largest size of the ordinal
// table (rounded up to a power of two; 0 = DefaultOrdinalSlots).
func NewStamper(mem memory.Allocator, datasetID string, in, out *arrow.Schema, requiredNames map[string]bool,
	rowIDIdx, createdIdx int, base int64, createdAtMicros int64, slots int) *Stamper {
	if slots <= 0 {
		slots = DefaultOrdinalSlots
	}
	// round up to a power of two
	p := 1
	for p < slots {
		p <<= 1
	}
	s := &Stamper{
		mem: mem, out: out, in: in, hasher: newRowHasher(in),
		// The append's starting index is part of the seed: equal rows
		// appended by two writes get different ids; a replace starts at 0.
		seed: mix(hashBytes(k3, []byte(datasetID)), uint64(base)), next: base, createdAt: createdAtMicros,
		rowIDIdx: rowIDIdx, createdIx: createdIdx, numbering: newOrdinals(p),
	}
	for _, f := range out.Fields() {
		switch f.Name {
		case ColRowIndex:
			s.src, s.kind = append(s.src, -1), append(s.kind, 1)
		case ColRowID:
			s.src, s.kind = append(s.src, -1), append(s.kind, 2)
		case ColCreatedAt:
			s.src, s.kind = append(s.src, -1), append(s.kind, 3)
		default:
			idx := -1
			if ix := in.FieldIndices(f.Name); len(ix) > 0 {
				idx = ix[0]
			}
			s.src, s.kind = append(s.src, idx), append(s.kind, 0)
			if requiredNames[f.Name] {
				if idx < 0 {
					// checked by the schema comparison; defensive
					s.required = append(s.required, -1)
				} else {
					s.required = append(s.required, idx)
				}
			}
		}
	}
	return s
}

// Stamp returns a new batch (owned by the caller) for rec (borrowed).
// Typed errors: *NullInRequiredError, *UnsupportedTypeError,
// ErrInvalidRequest.
func (s *Stamper) Stamp(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	if !rec.Schema().Equal(s.in) {
		return nil, fmt.Errorf("%w: batch schema %s differs from the request schema %s", ErrInvalidRequest, rec.Schema(), s.in)
	}
	for _, idx := range s.required {
		if idx >= 0 && rec.Column(idx).NullN() > 0 {
			return nil, &NullInRequiredError{Column: s.in.Field(idx).Name}
		}
	}
	n := int(rec.NumRows())
	var err error
	s.h, err = s.hasher.hash(rec, s.h)
	if err != nil {
		return nil, err
	}
	s.hasher.sum(&s.sum, s.h) // s.h stays the row-id hashes

	cols := make([]arrow.Array, len(s.src))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, f := range s.out.Fields() {
		switch s.kind[i] {
		case 0:
			if s.src[i] < 0 {
				cols[i] = array.MakeArrayOfNull(s.mem, f.Type, n)
				continue
			}
			c, err := convertColumn(s.mem, s.in.Field(s.src[i]), rec.Column(s.src[i]), f.Type)
			if err != nil {
				return nil, err
			}
			cols[i] = c
		case 1:
			cols[i] = int64Array(s.mem, f.Type, n, func(v []int64) {
				for j := range v {
					v[j] = s.next + int64(j)
				}
			})
		case 2:
			var keep *array.Int64
			if s.rowIDIdx >= 0 {
				keep = rec.Column(s.rowIDIdx).(*array.Int64)
			}
			cols[i] = int64Array(s.mem, f.Type, n, func(v []int64) {
				s.ords = slices.Grow(s.ords[:0], n)[:n]
				ords := s.ords
				s.numbering.number(s.h, ords)
				for j, h := range s.h {
					v[j] = int64(mix(mix(s.seed, h), uint64(ords[j])) >> 1)
				}
				if keep != nil {
					for j := range v {
						if keep.IsValid(j) {
							v[j] = keep.Value(j)
						}
					}
				}
			})
		case 3:
			var keep *array.Timestamp
			if s.createdIx >= 0 {
				keep = rec.Column(s.createdIx).(*array.Timestamp)
			}
			if keep == nil {
				cols[i] = s.constCreatedAt(f.Type, n)
				continue
			}
			cols[i] = int64Array(s.mem, f.Type, n, func(v []int64) {
				for j := range v {
					v[j] = s.createdAt
					if keep.IsValid(j) {
						v[j] = int64(keep.Value(j))
					}
				}
			})
		}
	}
	s.next += int64(n)
	return array.NewRecordBatch(s.out, cols, int64(n)), nil
}

// constCreatedAt returns a __created_at column of n rows all holding the
// write's timestamp. The values live in one immutable Go slice shared by
// the batches (grown by replacing it, never written once handed out), so a
// batch neither allocates nor fills them.
func (s *Stamper) constCreatedAt(t arrow.DataType, n int) arrow.Array {
	if len(s.created) < n {
		c := make([]int64, max(n, 2*len(s.created)))
		for j := range c {
			c[j] = s.createdAt
		}
		s.created = c
	}
	buf := memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(s.created[:n]))
	data := array.NewData(t, n, []*memory.Buffer{nil, buf}, nil, 0, 0)
	defer data.Release()
	return array.MakeFromData(data)
}

// Checksum of the business columns of the rows stamped so far.
func (s *Stamper) Checksum() Checksum { return s.sum }

// Next is the __row_index the next stamped row gets.
func (s *Stamper) Next() int64 { return s.next }

// int64Array builds a non-null 8-byte fixed-width array of type t.
func int64Array(mem memory.Allocator, t arrow.DataType, n int, fill func([]int64)) arrow.Array {
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(n * 8)
	fill(arrow.Int64Traits.CastFromBytes(buf.Bytes())[:n])
	data := array.NewData(t, n, []*memory.Buffer{nil, buf}, nil, 0, 0)
	buf.Release()
	defer data.Release()
	return array.MakeFromData(data)
}

// convertColumn returns arr as type to (a new reference; the caller
// releases it). Layout-compatible types are re-typed without copying.
func convertColumn(mem memory.Allocator, f arrow.Field, arr arrow.Array, to arrow.DataType) (arrow.Array, error) {
	if arrow.TypeEqual(arr.DataType(), to) {
		arr.Retain()
		return arr, nil
	}
	switch to.(type) {
	case *extensions.UUIDType:
		switch a := arr.(type) {
		case *array.FixedSizeBinary:
			return retype(arr, to), nil
		case *array.String:
			b := array.NewFixedSizeBinaryBuilder(mem, &arrow.FixedSizeBinaryType{ByteWidth: 16})
			defer b.Release()
			b.Reserve(a.Len())
			for i := range a.Len() {
				if a.IsNull(i) {
					b.AppendNull()
					continue
				}
				u, err := parseUUID(a.Value(i))
				if err != nil {
					return nil, fmt.Errorf("%w: column %q row %d: %v", ErrInvalidRequest, f.Name, i, err)
				}
				b.Append(u[:])
			}
			storage := b.NewArray()
			defer storage.Release()
			return retype(storage, to), nil
		}
	case *arrow.Int32Type:
		switch a := arr.(type) {
		case *array.Int8:
			return widen[int8](mem, a, a.Int8Values(), to), nil
		case *array.Int16:
			return widen[int16](mem, a, a.Int16Values(), to), nil
		case *array.Uint8:
			return widen[uint8](mem, a, a.Uint8Values(), to), nil
		case *array.Uint16:
			return widen[uint16](mem, a, a.Uint16Values(), to), nil
		}
	case *arrow.Int64Type:
		// an append of a narrower integer into a long column
		switch a := arr.(type) {
		case *array.Int8:
			return widen[int8](mem, a, a.Int8Values(), to), nil
		case *array.Int16:
			return widen[int16](mem, a, a.Int16Values(), to), nil
		case *array.Int32:
			return widen[int32](mem, a, a.Int32Values(), to), nil
		case *array.Uint8:
			return widen[uint8](mem, a, a.Uint8Values(), to), nil
		case *array.Uint16:
			return widen[uint16](mem, a, a.Uint16Values(), to), nil
		case *array.Uint32:
			return widen[uint32](mem, a, a.Uint32Values(), to), nil
		}
	case *arrow.Float64Type:
		// an append of float32 values into a double column
		if a, ok := arr.(*array.Float32); ok {
			b := array.NewFloat64Builder(mem)
			defer b.Release()
			b.Reserve(a.Len())
			for i, v := range a.Float32Values() {
				if a.IsNull(i) {
					b.AppendNull()
				} else {
					b.Append(float64(v))
				}
			}
			return b.NewArray(), nil
		}
	}
	if layoutCompatible(arr.DataType(), to) {
		return retype(arr, to), nil
	}
	return nil, &UnsupportedTypeError{Column: f.Name, Type: fmt.Sprintf("%s (table: %s)", arr.DataType(), to)}
}

func layoutCompatible(from, to arrow.DataType) bool {
	if from.ID() != to.ID() {
		return false
	}
	switch t := to.(type) {
	case *arrow.ListType:
		return layoutCompatible(from.(*arrow.ListType).Elem(), t.Elem()) ||
			isUUIDStorage(from.(*arrow.ListType).Elem(), t.Elem())
	case *arrow.TimestampType:
		return from.(*arrow.TimestampType).Unit == t.Unit
	}
	return true
}

func isUUIDStorage(from, to arrow.DataType) bool {
	_, ok := to.(*extensions.UUIDType)
	fb, ok2 := from.(*arrow.FixedSizeBinaryType)
	return ok && ok2 && fb.ByteWidth == 16
}

func retype(arr arrow.Array, to arrow.DataType) arrow.Array {
	d := retypeData(arr.Data(), to)
	defer d.Release()
	return array.MakeFromData(d)
}

func retypeData(d arrow.ArrayData, to arrow.DataType) arrow.ArrayData {
	var children []arrow.ArrayData
	if lt, ok := to.(*arrow.ListType); ok {
		children = []arrow.ArrayData{retypeData(d.Children()[0], lt.Elem())}
	} else {
		children = d.Children()
	}
	out := array.NewData(to, d.Len(), d.Buffers(), children, d.NullN(), d.Offset())
	if _, ok := to.(*arrow.ListType); ok {
		children[0].Release()
	}
	return out
}

func widen[F int8 | int16 | int32 | uint8 | uint16 | uint32](mem memory.Allocator, src arrow.Array, vs []F, to arrow.DataType) arrow.Array {
	n := src.Len()
	buf := memory.NewResizableBuffer(mem)
	var size int
	switch to.ID() {
	case arrow.INT32:
		size = 4
	default:
		size = 8
	}
	buf.Resize(n * size)
	if size == 4 {
		dst := arrow.Int32Traits.CastFromBytes(buf.Bytes())[:n]
		for i, v := range vs {
			dst[i] = int32(v)
		}
	} else {
		dst := arrow.Int64Traits.CastFromBytes(buf.Bytes())[:n]
		for i, v := range vs {
			dst[i] = int64(v)
		}
	}
	buffers := []*memory.Buffer{nil, buf}
	if src.NullN() > 0 {
		// copy the validity bitmap so the result owns an offset-0 view
		vb := memory.NewResizableBuffer(mem)
		vb.Resize((n + 7) / 8)
		bm := vb.Bytes()
		clear(bm)
		for i := range n {
			if src.IsValid(i) {
				bm[i/8] |= 1 << (i % 8)
			}
		}
		buffers[0] = vb
		defer vb.Release()
	}
	d := array.NewData(to, n, buffers, nil, src.NullN(), 0)
	buf.Release()
	defer d.Release()
	return array.MakeFromData(d)
}
