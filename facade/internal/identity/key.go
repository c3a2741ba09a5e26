package identity

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
)

// AppendKey appends to b the canonical encoding of the values at row i of
// cols (described by fields): per value its class tag and its normalized
// value, as the row hash normalizes it (integers of any width as int64, a
// float as float64 with every NaN one value and -0 apart from +0, a
// decimal as its scale and unscaled value, a UUID as its 16 bytes whether
// text or binary, text and binaries as their length and bytes, an array as
// its length and its elements, NULL as a tag of its own). Two keys are
// equal exactly when their encodings are, and equal keys have equal
// RowHashes over the same columns, so a hash of the key can choose where a
// key is looked for while the encoding decides whether it is there.
// Typed errors: *UnsupportedTypeError, ErrInvalidRequest (a text UUID
// that does not parse).
func AppendKey(b []byte, fields []arrow.Field, cols []arrow.Array, i int) ([]byte, error) {
	for c, a := range cols {
		var err error
		if b, err = appendValue(b, fields[c], a, i); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// IsIntArray reports whether a is an integer array IntKey reads.
func IsIntArray(a arrow.Array) bool {
	switch a.(type) {
	case *array.Int64, *array.Int32, *array.Int16, *array.Int8, *array.Uint32, *array.Uint16, *array.Uint8:
		return true
	}
	return false
}

// IntKey is the value at row i of a when a is an integer array (any
// width the row hash takes: Int8 to Int64, Uint8 to Uint32); ok is false
// for other arrays.
func IntKey(a arrow.Array, i int) (v int64, null, ok bool) {
	switch x := a.(type) {
	case *array.Int64:
		return x.Value(i), x.IsNull(i), true
	case *array.Int32:
		return int64(x.Value(i)), x.IsNull(i), true
	case *array.Int16:
		return int64(x.Value(i)), x.IsNull(i), true
	case *array.Int8:
		return int64(x.Value(i)), x.IsNull(i), true
	case *array.Uint32:
		return int64(x.Value(i)), x.IsNull(i), true
	case *array.Uint16:
		return int64(x.Value(i)), x.IsNull(i), true
	case *array.Uint8:
		return int64(x.Value(i)), x.IsNull(i), true
	}
	return 0, false, false
}

func appendFixed(b []byte, tag uint64, v uint64) []byte {
	return binary.BigEndian.AppendUint64(append(b, byte(tag)), v)
}

func appendBytes(b []byte, tag uint64, v []byte) []byte {
	b = binary.AppendUvarint(append(b, byte(tag)), uint64(len(v)))
	return append(b, v...)
}

// exactFloatBits is a float's value in the row hash: every NaN one value,
// -0 apart from +0.
func exactFloatBits(v float64) uint64 {
	if math.IsNaN(v) {
		return 0x7ff8000000000001
	}
	return math.Float64bits(v)
}

func appendValue(b []byte, f arrow.Field, a arrow.Array, i int) ([]byte, error) {
	if a.IsNull(i) {
		return append(b, byte(tagNull)), nil
	}
	if ext, ok := a.(array.ExtensionArray); ok {
		if _, isUUID := a.DataType().(*extensions.UUIDType); isUUID {
			return appendBytes(b, tagUUID, ext.Storage().(*array.FixedSizeBinary).Value(i)), nil
		}
		return nil, &UnsupportedTypeError{Column: f.Name, Type: a.DataType().String()}
	}
	if v, _, ok := IntKey(a, i); ok {
		return appendFixed(b, tagInt, uint64(v)), nil
	}
	switch x := a.(type) {
	case *array.Boolean:
		v := byte(0)
		if x.Value(i) {
			v = 1
		}
		return append(b, byte(tagBool), v), nil
	case *array.Float32:
		return appendFixed(b, tagFloat, exactFloatBits(float64(x.Value(i)))), nil
	case *array.Float64:
		return appendFixed(b, tagFloat, exactFloatBits(x.Value(i))), nil
	case *array.Decimal128:
		v := x.Value(i)
		b = binary.AppendUvarint(append(b, byte(tagDecimal)), uint64(uint32(x.DataType().(*arrow.Decimal128Type).Scale)))
		return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(b, uint64(v.HighBits())), v.LowBits()), nil
	case *array.String:
		if isUUIDField(f) {
			u, err := parseUUID(x.Value(i))
			if err != nil {
				return nil, fmt.Errorf("%w: column %q row %d: %v", ErrInvalidRequest, f.Name, i, err)
			}
			return appendBytes(b, tagUUID, u[:]), nil
		}
		return appendBytes(b, tagString, []byte(x.Value(i))), nil
	case *array.Binary:
		return appendBytes(b, tagBinary, x.Value(i)), nil
	case *array.FixedSizeBinary:
		if isUUIDField(f) {
			return appendBytes(b, tagUUID, x.Value(i)), nil
		}
		return appendBytes(b, tagBinary, x.Value(i)), nil
	case *array.Date32:
		return appendFixed(b, tagDate, uint64(int64(x.Value(i)))), nil
	case *array.Timestamp:
		return appendFixed(b, tagTimestamp, uint64(int64(x.Value(i)))), nil
	case *array.Time64:
		return appendFixed(b, tagTime, uint64(int64(x.Value(i)))), nil
	case *array.List:
		ef := x.DataType().(*arrow.ListType).ElemField()
		ef.Name, ef.Metadata = f.Name, f.Metadata // as ValueHashes: the column's pg tags
		lo, hi := x.ValueOffsets(i)
		b = binary.AppendUvarint(append(b, byte(tagList)), uint64(hi-lo))
		child := x.ListValues()
		for k := lo; k < hi; k++ {
			var err error
			if b, err = appendValue(b, ef, child, int(k)); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	return nil, &UnsupportedTypeError{Column: f.Name, Type: a.DataType().String()}
}
