package cursor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// Decoders turn one binary wire value (nil = NULL) into one Arrow value,
// appended straight to the column's builder: no per-row []any, no pgtype
// values on this path.

var be = binary.BigEndian

// pgEpochMicros is 2000-01-01 in Unix microseconds; pgEpochDays in Unix days.
const (
	pgEpochMicros = 946684800000000
	pgEpochDays   = 10957
)

var errShort = errors.New("malformed binary value (wrong length)")

type decoder interface {
	decode(v []byte) error
}

func newDecoder(k kind, c *column, b array.Builder) decoder {
	switch k {
	case kBool:
		return boolDec{b.(*array.BooleanBuilder)}
	case kInt2:
		return int2Dec{b.(*array.Int16Builder)}
	case kInt4:
		return int4Dec{b.(*array.Int32Builder)}
	case kInt8:
		return int8Dec{b.(*array.Int64Builder)}
	case kFloat4:
		return float4Dec{b.(*array.Float32Builder)}
	case kFloat8:
		return float8Dec{b.(*array.Float64Builder)}
	case kNumeric:
		return &numericDec{b: b.(*array.Decimal128Builder), numericFit: c.numericFit}
	case kString, kText:
		return stringDec{b.(*array.StringBuilder).BinaryBuilder}
	case kJSONB:
		return jsonbDec{b.(*array.StringBuilder).BinaryBuilder}
	case kUUID:
		return uuidDec{b.(*array.FixedSizeBinaryBuilder)}
	case kBytea:
		return stringDec{b.(*array.BinaryBuilder)}
	case kDate:
		return dateDec{b.(*array.Date32Builder)}
	case kTimestamp, kTimestamptz:
		return tsDec{b.(*array.TimestampBuilder)}
	case kTime:
		return timeDec{b.(*array.Time64Builder)}
	case kList:
		lb := b.(*array.ListBuilder)
		return &listDec{b: lb, elem: newDecoder(c.elem, c, lb.ValueBuilder())}
	}
	panic(fmt.Sprintf("cursor: no decoder for kind %d", k))
}

type boolDec struct{ b *array.BooleanBuilder }

func (d boolDec) decode(v []byte) error {
	if v == nil {
		d.b.AppendNull()
		return nil
	}
	if len(v) != 1 {
		return errShort
	}
	d.b.Append(v[0] != 0)
	return nil
}

type int2Dec struct{ b *array.Int16Builder }

func (d int2Dec) decode(v []byte) error {
	if v == nil {
		d.b.AppendNull()
		return nil
	}
	if len(v) != 2 {
		return errShort
	}
	d.b.Append(int16(be.Uint16(v)))
	return nil
}

type int4Dec struct{ b *array.Int32Builder }

func (d int4Dec) decode(v []byte) error {
	if v == nil {
		d.b.AppendNull()
		return nil
	}
	if len(v) != 4 {
		return errShort
	}
	d.b.Append(int32(be.Uint32(v)))
	return nil
}

type int8Dec struct{ b *array.Int64Builder }

func (d int8Dec) decode(v []byte) error {
	if v == nil {
		d.b.AppendNull()
		return nil
	}
	if len(v) != 8 {
		return errShort
	}
	d.b.Append(int64(be.Uint64(v)))
	return nil
}

type float4Dec struct{ b *array.Float32Builder }

func (d float4Dec) decode(v []byte) error {
	if v == nil {
		d.b.AppendNull()
		return nil
	}
	if len(v) != 4 {
		return errShort
	}
	d.b.Append(math.Float32frombits(be.Uint32(v)))
	return nil
}

type float8Dec struct{ b *array.Float64Builder }

func (d float8Dec) decode(v []byte) error {
	if v == nil {
		d.b.AppendNull()
		return nil
	}
	if len(v) != 8 {
		return errShort
	}
	d.b.Append(math.Float64frombits(be.Uint64(v)))
	return nil
}

// stringDec appends the bytes as they are: text, varchar, bpchar, name,
// enum and json are sent as their text in binary format; bytea as its bytes.
type stringDec struct{ b *array.BinaryBuilder }

func (d stringDec) decode(v []byte) error {
	if v == nil {
		d.b.AppendNull()
		return nil
	}
	d.b.Append(v)
	return nil
}

// jsonbDec strips the version byte (1) of binary jsonb.
type jsonbDec struct{ b *array.BinaryBuilder }

func (d jsonbDec) decode(v []byte) error {
	if v == nil {
		d.b.AppendNull()
		return nil
	}
	if len(v) < 1 || v[0] != 1 {
		return fmt.Errorf("unknown binary jsonb version")
	}
	d.b.Append(v[1:])
	return nil
}

type uuidDec struct{ b *array.FixedSizeBinaryBuilder }

func (d uuidDec) decode(v []byte) error {
	if v == nil {
		d.b.AppendNull()
		return nil
	}
	if len(v) != 16 {
		return errShort
	}
	d.b.Append(v)
	return nil
}

// parseDate decodes a binary date into days since the Unix epoch; ±infinity
// has no Arrow value and is an error.
func parseDate(v []byte) (int32, error) {
	if len(v) != 4 {
		return 0, errShort
	}
	days := int32(be.Uint32(v))
	if days == math.MaxInt32 || days == math.MinInt32 {
		return 0, outOfRange("date ±infinity")
	}
	return days + pgEpochDays, nil
}

// parseTimestamp decodes a binary timestamp or timestamptz into microseconds
// since the Unix epoch; ±infinity, and the last 29 millennia of Postgres'
// range that an int64 of Unix microseconds cannot hold, are errors.
func parseTimestamp(v []byte) (int64, error) {
	if len(v) != 8 {
		return 0, errShort
	}
	us := int64(be.Uint64(v))
	switch {
	case us == math.MaxInt64 || us == math.MinInt64:
		return 0, outOfRange("timestamp ±infinity")
	case us > math.MaxInt64-pgEpochMicros:
		// Postgres goes to 294276 AD; Unix microseconds in an int64 end
		// at 294247-01-10 04:00:54.775807 UTC.
		return 0, outOfRange("timestamp after 294247-01-10 04:00:54.775807 UTC")
	}
	return us + pgEpochMicros, nil
}

type dateDec struct{ b *array.Date32Builder }

func (d dateDec) decode(v []byte) error {
	if v == nil {
		d.b.AppendNull()
		return nil
	}
	days, err := parseDate(v)
	if err != nil {
		return err
	}
	d.b.Append(arrow.Date32(days))
	return nil
}

type tsDec struct{ b *array.TimestampBuilder }

func (d tsDec) decode(v []byte) error {
	if v == nil {
		d.b.AppendNull()
		return nil
	}
	us, err := parseTimestamp(v)
	if err != nil {
		return err
	}
	d.b.Append(arrow.Timestamp(us))
	return nil
}

type timeDec struct{ b *array.Time64Builder }

func (d timeDec) decode(v []byte) error {
	if v == nil {
		d.b.AppendNull()
		return nil
	}
	if len(v) != 8 {
		return errShort
	}
	d.b.Append(arrow.Time64(int64(be.Uint64(v))))
	return nil
}

// listDec decodes the binary array format: ndim, has-null flag, element oid,
// (length, lower bound) per dimension, then (length, bytes) per element.
type listDec struct {
	b    *array.ListBuilder
	elem decoder
}

func (d *listDec) decode(v []byte) error {
	if v == nil {
		d.b.AppendNull()
		return nil
	}
	if len(v) < 12 {
		return errShort
	}
	ndim := int32(be.Uint32(v))
	if ndim == 0 {
		d.b.Append(true)
		return nil
	}
	if ndim != 1 {
		return outOfRange("%d-dimensional array (only one dimension maps to an Arrow list)", ndim)
	}
	if len(v) < 20 {
		return errShort
	}
	n := int(int32(be.Uint32(v[12:])))
	p := v[20:]
	d.b.Append(true)
	for range n {
		if len(p) < 4 {
			return errShort
		}
		l := int32(be.Uint32(p))
		p = p[4:]
		var ev []byte
		if l >= 0 {
			if int(l) > len(p) {
				return errShort
			}
			ev, p = p[:l:l], p[l:]
		}
		if err := d.elem.decode(ev); err != nil {
			return err
		}
	}
	return nil
}

// numericFit is how a numeric column fits its values to its decimal128
// type: the precision and scale, whether a value with more fractional
// digits than the scale is refused (strict) or rounded half-even, and the
// stream's counter of rounded values of the column (nil: not counted).
type numericFit struct {
	prec, scale int32
	strict      bool
	rounded     *atomic.Int64
}

// fit decodes one binary numeric value.
func (f *numericFit) fit(v []byte) (decimal128.Num, error) {
	n, rounded, err := decodeNumeric(v, f.prec, f.scale, f.strict)
	if rounded && err == nil && f.rounded != nil {
		f.rounded.Add(1)
	}
	return n, err
}

// numericDec decodes binary numeric (base-10000 digits) into decimal128 at
// the column's scale: exactly, or rounded half-even to the scale when the
// column is not strict. A value that exceeds the precision is an error.
type numericDec struct {
	b *array.Decimal128Builder
	numericFit
}

func (d *numericDec) decode(v []byte) error {
	if v == nil {
		d.b.AppendNull()
		return nil
	}
	n, err := d.fit(v)
	if err != nil {
		return err
	}
	d.b.Append(n)
	return nil
}

var pow10u64 = func() (t [20]uint64) {
	t[0] = 1
	for i := 1; i < len(t); i++ {
		t[i] = t[i-1] * 10
	}
	return t
}()

// errFraction is the strict refusal of a value that would need rounding.
func errFraction(scale int32) error {
	return outOfRange("numeric value has more than %d fractional digits", scale)
}

func errPrecision(prec int32) error {
	return outOfRange("numeric value exceeds precision %d", prec)
}

// decodeNumeric decodes a binary numeric into decimal128 at scale. A value
// with more fractional digits than scale is refused when strict, otherwise
// rounded half-even (on the exact digits) and reported by rounded. A value
// whose integer part (after rounding) does not fit prec is an error either
// way.
func decodeNumeric(v []byte, prec, scale int32, strict bool) (_ decimal128.Num, rounded bool, _ error) {
	if len(v) < 8 {
		return decimal128.Num{}, false, errShort
	}
	ndigits := int(int16(be.Uint16(v)))
	weight := int(int16(be.Uint16(v[2:])))
	sign := be.Uint16(v[4:])
	switch sign {
	case 0x0000, 0x4000:
	case 0xC000:
		return decimal128.Num{}, false, outOfRange("numeric NaN")
	case 0xD000, 0xF000:
		return decimal128.Num{}, false, outOfRange("numeric ±Infinity")
	default:
		return decimal128.Num{}, false, fmt.Errorf("bad numeric sign 0x%x", sign)
	}
	if ndigits < 0 || len(v) != 8+2*ndigits {
		return decimal128.Num{}, false, errShort
	}
	if ndigits == 0 {
		return decimal128.Num{}, false, nil
	}
	digits := v[8:]
	// value = D * 10^exp, D the digits read as one base-10000 integer.
	exp := 4*(weight-ndigits+1) + int(scale)

	// Fast path: everything fits in uint64.
	var u uint64
	fast := ndigits <= 4 // 10000^4 = 1e16 < 2^64
	if fast {
		for i := range ndigits {
			u = u*10000 + uint64(be.Uint16(digits[2*i:]))
		}
		switch {
		case exp > 0:
			if exp >= len(pow10u64) || u > math.MaxUint64/pow10u64[exp] {
				fast = false
			} else {
				u *= pow10u64[exp]
			}
		case exp < 0:
			if -exp >= len(pow10u64) {
				fast = false
			} else {
				p := pow10u64[-exp]
				q, r := u/p, u%p
				if r != 0 {
					if strict {
						return decimal128.Num{}, false, errFraction(scale)
					}
					// p is even: half = p/2 exactly; u < 1e16, so q+1
					// cannot overflow.
					if half := p / 2; r > half || (r == half && q&1 == 1) {
						q++
					}
					rounded = true
				}
				u = q
			}
		}
		if fast {
			if prec < 20 && u >= pow10u64[prec] {
				return decimal128.Num{}, false, errPrecision(prec)
			}
			n := decimal128.FromU64(u)
			if sign == 0x4000 {
				n = n.Negate()
			}
			return n, rounded, nil
		}
	}
	// Up to 38 digits: 128-bit arithmetic, no allocation.
	if n, ok, rounded, err := numeric128(digits, ndigits, exp, prec, scale, sign == 0x4000, strict); ok {
		return n, rounded, err
	}
	// Slow path (only when the digits overflow 128 bits).
	return numericBig(digits, ndigits, exp, prec, scale, sign == 0x4000, strict)
}

// numericBig is decodeNumeric's reference arithmetic, with big.Int.
func numericBig(digits []byte, ndigits, exp int, prec, scale int32, neg, strict bool) (_ decimal128.Num, rounded bool, _ error) {
	var bi big.Int
	tenK := big.NewInt(10000)
	for i := range ndigits {
		bi.Mul(&bi, tenK)
		bi.Add(&bi, big.NewInt(int64(be.Uint16(digits[2*i:]))))
	}
	ten := big.NewInt(10)
	if exp > 0 {
		if exp > 80 {
			return decimal128.Num{}, false, errPrecision(prec)
		}
		bi.Mul(&bi, new(big.Int).Exp(ten, big.NewInt(int64(exp)), nil))
	} else if exp < 0 {
		var rem big.Int
		div := new(big.Int).Exp(ten, big.NewInt(int64(-exp)), nil)
		bi.QuoRem(&bi, div, &rem)
		if rem.Sign() != 0 {
			if strict {
				return decimal128.Num{}, false, errFraction(scale)
			}
			// half-even on the magnitude: up when rem > div/2, or when
			// rem = div/2 and the quotient is odd.
			c := rem.Lsh(&rem, 1).Cmp(div)
			if c > 0 || (c == 0 && bi.Bit(0) == 1) {
				bi.Add(&bi, big.NewInt(1))
			}
			rounded = true
		}
	}
	if bi.CmpAbs(new(big.Int).Exp(ten, big.NewInt(int64(prec)), nil)) >= 0 {
		return decimal128.Num{}, false, errPrecision(prec)
	}
	if neg {
		bi.Neg(&bi)
	}
	return decimal128.FromBigInt(&bi), rounded, nil
}

// u128 is an unsigned 128-bit integer.
type u128 struct{ hi, lo uint64 }

func (x u128) mul64(m uint64) (u128, bool) {
	h1, lo := bits.Mul64(x.lo, m)
	h2, l2 := bits.Mul64(x.hi, m)
	hi, c := bits.Add64(l2, h1, 0)
	return u128{hi, lo}, h2 == 0 && c == 0
}

func (x u128) add64(a uint64) (u128, bool) {
	lo, c := bits.Add64(x.lo, a, 0)
	hi, c2 := bits.Add64(x.hi, 0, c)
	return u128{hi, lo}, c2 == 0
}

func (x u128) div64(d uint64) (u128, uint64) {
	qh, r := x.hi/d, x.hi%d
	ql, rem := bits.Div64(r, x.lo, d)
	return u128{qh, ql}, rem
}

func (x u128) less(y u128) bool { return x.hi < y.hi || (x.hi == y.hi && x.lo < y.lo) }

// pow10u128[p] is 10^p for p <= 38.
var pow10u128 = func() (t [39]u128) {
	t[0] = u128{0, 1}
	for i := 1; i < len(t); i++ {
		t[i], _ = t[i-1].mul64(10)
	}
	return t
}()

// numeric128 computes D * 10^exp (D the base-10000 digits) in 128 bits,
// exactly or rounded half-even when exp < 0 and not strict. ok is false
// when D or the scaled value overflows 128 bits (the caller then decides
// with big.Int); otherwise err reports a value that exceeds prec (or, when
// strict, needs rounding).
func numeric128(digits []byte, ndigits, exp int, prec, scale int32, neg, strict bool) (_ decimal128.Num, ok, rounded bool, _ error) {
	var u u128
	for i := range ndigits {
		if u, ok = u.mul64(10000); !ok {
			return decimal128.Num{}, false, false, nil
		}
		if u, ok = u.add64(uint64(be.Uint16(digits[2*i:]))); !ok {
			return decimal128.Num{}, false, false, nil
		}
	}
	for exp > 0 {
		e := min(exp, 19)
		if u, ok = u.mul64(pow10u64[e]); !ok {
			return decimal128.Num{}, false, false, nil
		}
		exp -= e
	}
	// Divide by 10^-exp in chunks of at most 19 digits, the least
	// significant first: the last chunk's remainder holds the leading
	// discarded digits, the earlier ones only tell whether anything
	// nonzero lies below them (sticky).
	var sticky bool
	for exp < 0 {
		e := min(-exp, 19)
		var rem uint64
		u, rem = u.div64(pow10u64[e])
		exp += e
		if rem == 0 {
			continue // (a zero last chunk over sticky digits: below half, down)
		}
		if strict {
			return decimal128.Num{}, true, false, errFraction(scale)
		}
		rounded = true
		if exp < 0 { // not the last chunk
			sticky = true
			continue
		}
		half := pow10u64[e] / 2
		if rem > half || (rem == half && (sticky || u.lo&1 == 1)) {
			u, _ = u.add64(1) // u < 2^128/10: no overflow
		}
	}
	if !u.less(pow10u128[prec]) {
		return decimal128.Num{}, true, false, errPrecision(prec)
	}
	n := decimal128.New(int64(u.hi), u.lo)
	if neg {
		n = n.Negate()
	}
	return n, true, rounded, nil
}
