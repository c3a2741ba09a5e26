package manualtable

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// colBuilder appends the values of one declared column to its Arrow builder.
type colBuilder struct {
	name string
	t    pgType
	b    array.Builder
}

// appendCSV appends one CSV field. An empty field is NULL (CSV has no other
// null marker; for text this means an empty string also reads as NULL).
func (c *colBuilder) appendCSV(s string) error {
	if s == "" {
		c.b.AppendNull()
		return nil
	}
	return c.appendValue(s)
}

// appendJSON appends one JSON value of an NDJSON object. JSON null is NULL.
// Numbers may also be given as strings (large integers and decimals survive
// JavaScript that way); text, date, timestamp and uuid values must be
// strings; json/jsonb columns take any JSON value as is.
func (c *colBuilder) appendJSON(raw json.RawMessage) error {
	if string(raw) == "null" {
		c.b.AppendNull()
		return nil
	}
	switch c.t.kind {
	case kindJSON:
		return c.appendValue(string(raw))
	case kindBool:
		switch string(raw) {
		case "true":
			c.b.(*array.BooleanBuilder).Append(true)
			return nil
		case "false":
			c.b.(*array.BooleanBuilder).Append(false)
			return nil
		}
		return fmt.Errorf("want true, false or null for %s, got %s", c.t.name, clip(string(raw)))
	case kindInt16, kindInt32, kindInt64, kindFloat32, kindFloat64, kindNumeric:
		if raw[0] != '"' {
			if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
				return fmt.Errorf("want a number for %s, got %s", c.t.name, clip(string(raw)))
			}
			return c.appendValue(string(raw))
		}
	}
	if raw[0] != '"' {
		return fmt.Errorf("want a string for %s, got %s", c.t.name, clip(string(raw)))
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("bad JSON string: %v", err)
	}
	if c.t.kind == kindText {
		return c.appendValue(s) // "" is an empty text, not NULL
	}
	if s == "" {
		return fmt.Errorf("empty string is not a %s (use null)", c.t.name)
	}
	return c.appendValue(s)
}

// asciiSpace is what C's isspace, and so Postgres, skips around a value.
const asciiSpace = " \t\n\v\f\r"

// appendValue parses a non-null value from its text form.
func (c *colBuilder) appendValue(s string) error {
	if c.t.kind != kindText && c.t.kind != kindJSON {
		s = strings.Trim(s, asciiSpace) // as Postgres' input functions; not Unicode spaces
	}
	switch c.t.kind {
	case kindInt16, kindInt32, kindInt64:
		bits := 64
		switch c.t.kind {
		case kindInt16:
			bits = 16
		case kindInt32:
			bits = 32
		}
		v, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return fmt.Errorf("%s is out of range for %s", clip(s), c.t.name)
			}
			return fmt.Errorf("%q is not a valid %s", clip(s), c.t.name)
		}
		switch b := c.b.(type) {
		case *array.Int16Builder:
			b.Append(int16(v))
		case *array.Int32Builder:
			b.Append(int32(v))
		case *array.Int64Builder:
			b.Append(v)
		}
	case kindFloat32, kindFloat64:
		bits := 64
		if c.t.kind == kindFloat32 {
			bits = 32
		}
		v, err := strconv.ParseFloat(s, bits)
		if err == nil && strings.ContainsAny(s, "_xX") {
			err = strconv.ErrSyntax // Go's digit separators and hex floats; Postgres has neither
		}
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return fmt.Errorf("%s is out of range for %s", clip(s), c.t.name)
			}
			return fmt.Errorf("%q is not a valid %s", clip(s), c.t.name)
		}
		if b, ok := c.b.(*array.Float32Builder); ok {
			b.Append(float32(v))
		} else {
			c.b.(*array.Float64Builder).Append(v)
		}
	case kindNumeric:
		n, err := parseDecimal(s, c.t.precision, c.t.scale)
		if err != nil {
			return fmt.Errorf("%q does not fit %s: %v", clip(s), c.t.name, err)
		}
		c.b.(*array.Decimal128Builder).Append(n)
	case kindBool:
		switch strings.ToLower(s) {
		case "t", "true", "y", "yes", "on", "1":
			c.b.(*array.BooleanBuilder).Append(true)
		case "f", "false", "n", "no", "off", "0":
			c.b.(*array.BooleanBuilder).Append(false)
		default:
			return fmt.Errorf("%q is not a valid boolean", clip(s))
		}
	case kindText:
		if !utf8.ValidString(s) {
			return errors.New("text is not valid UTF-8")
		}
		if strings.IndexByte(s, 0) >= 0 {
			return errors.New("text contains a NUL character, which Postgres text cannot hold")
		}
		c.b.(*array.StringBuilder).Append(s)
	case kindJSON:
		if !utf8.ValidString(s) || !json.Valid([]byte(s)) {
			return fmt.Errorf("%q is not valid JSON", clip(s))
		}
		if c.t.typname == "jsonb" && jsonHasNUL(s) {
			return errors.New(`JSON contains \u0000, which jsonb cannot hold`)
		}
		c.b.(*array.StringBuilder).Append(s)
	case kindDate:
		d, err := time.Parse(time.DateOnly, s)
		if err != nil {
			return fmt.Errorf("%q is not a valid date (want YYYY-MM-DD)", clip(s))
		}
		if d.Year() < 1 {
			return fmt.Errorf("%q is not a valid date: year 0000 does not exist (Postgres counts 1 BC before 0001)", clip(s))
		}
		c.b.(*array.Date32Builder).Append(arrow.Date32FromTime(d))
	case kindTimestamptz, kindTimestamp:
		ts, err := parseTimestamp(s, c.t.kind == kindTimestamptz)
		if err != nil {
			return fmt.Errorf("%q is not a valid %s: %v", clip(s), c.t.name, err)
		}
		c.b.(*array.TimestampBuilder).Append(arrow.Timestamp(ts.UnixMicro()))
	case kindUUID:
		u, ok := parseUUID(s)
		if !ok {
			return fmt.Errorf("%q is not a valid uuid", clip(s))
		}
		c.b.(*array.FixedSizeBinaryBuilder).Append(u[:])
	default:
		return fmt.Errorf("unsupported type %s", c.t.name)
	}
	return nil
}

// jsonHasNUL reports whether valid JSON s holds a string (or key) with a
// NUL character, written as the escape \u0000.
func jsonHasNUL(s string) bool {
	if !strings.Contains(s, `\u0000`) {
		return false
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case string:
			return strings.IndexByte(v, 0) >= 0
		case []any:
			for _, e := range v {
				if walk(e) {
					return true
				}
			}
		case map[string]any:
			for k, e := range v {
				if strings.IndexByte(k, 0) >= 0 || walk(e) {
					return true
				}
			}
		}
		return false
	}
	var v any
	_ = json.Unmarshal([]byte(s), &v)
	return walk(v)
}

// clip shortens a value quoted in an error message.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}

// parseDecimal parses s exactly as a decimal128 with the given precision and
// scale. Unlike Postgres it does not round: digits beyond the scale must be
// zeros, so no value is silently changed. Exponents (1.5e3) are accepted.
func parseDecimal(s string, precision, scale int32) (decimal128.Num, error) {
	neg := false
	switch {
	case strings.HasPrefix(s, "-"):
		neg, s = true, s[1:]
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	}
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil || e > 1000 || e < -1000 {
			return decimal128.Num{}, errors.New("bad exponent")
		}
		mant, exp = s[:i], e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	if intPart == "" && frac == "" {
		return decimal128.Num{}, errors.New("not a number")
	}
	for _, part := range []string{intPart, frac} {
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return decimal128.Num{}, errors.New("not a number")
			}
		}
	}
	digits := intPart + frac
	// value = digits * 10^(exp-len(frac)); unscaled = value * 10^scale.
	shift := exp - len(frac) + int(scale)
	if shift >= 0 {
		digits += strings.Repeat("0", shift)
	} else {
		cut := len(digits) + shift
		if cut < 0 {
			cut = 0
		}
		if strings.Trim(digits[cut:], "0") != "" {
			return decimal128.Num{}, fmt.Errorf("more than %d decimal places", scale)
		}
		digits = digits[:cut]
	}
	digits = strings.TrimLeft(digits, "0")
	if len(digits) > int(precision) {
		return decimal128.Num{}, fmt.Errorf("more than %d digits before the decimal point", precision-scale)
	}
	var n decimal128.Num
	if len(digits) <= 18 {
		var u uint64
		if digits != "" {
			u, _ = strconv.ParseUint(digits, 10, 64)
		}
		n = decimal128.FromU64(u)
	} else {
		b, _ := new(big.Int).SetString(digits, 10)
		n = decimal128.FromBigInt(b)
	}
	if neg {
		n = n.Negate()
	}
	return n, nil
}

var (
	// Layouts with a UTC offset ("Z", "+02", "+02:00"); fractional seconds
	// are accepted after the seconds by time.Parse.
	zonedLayouts = []string{"2006-01-02T15:04:05Z07:00", "2006-01-02 15:04:05Z07:00", "2006-01-02T15:04:05Z07", "2006-01-02 15:04:05Z07"}
	localLayouts = []string{"2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02 15:04", time.DateOnly}
)

// timestampShape is the documented form, digit for digit.
// The offset's hours and minutes are captured: Postgres takes at most
// 15:59.
var timestampShape = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[ T][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]+)?)?(?:Z|[+-]([0-9]{2})(?::([0-9]{2}))?)?)?$`)

// parseTimestamp parses an ISO 8601 / Postgres-style timestamp with
// microsecond precision. For timestamptz a value without offset is read as
// UTC; for timestamp (without time zone) an offset is rejected.
func parseTimestamp(s string, zoned bool) (time.Time, error) {
	// time.Parse alone is looser than the documented form (one-digit
	// hours, a comma before the fraction), and Postgres refuses those.
	m := timestampShape.FindStringSubmatch(s)
	if m == nil {
		return time.Time{}, errors.New("want YYYY-MM-DD[ T]HH:MM[:SS[.ffffff]][offset]")
	}
	if m[1] > "15" || m[2] > "59" {
		return time.Time{}, errors.New("UTC offset out of range (at most ±15:59)")
	}
	var ts time.Time
	var err error
	found := false
	for _, l := range zonedLayouts {
		if ts, err = time.Parse(l, s); err == nil {
			found = true
			if !zoned {
				return time.Time{}, errors.New("has a UTC offset, but the column is without time zone")
			}
			break
		}
	}
	if !found {
		for _, l := range localLayouts {
			if ts, err = time.Parse(l, s); err == nil {
				found = true
				break
			}
		}
	}
	if !found {
		return time.Time{}, errors.New("want YYYY-MM-DD[ T]HH:MM[:SS[.ffffff]][offset]")
	}
	if ts.Year() < 1 {
		return time.Time{}, errors.New("year 0000 does not exist (Postgres counts 1 BC before 0001)")
	}
	if ts.Nanosecond()%1000 != 0 {
		return time.Time{}, errors.New("more precise than microseconds")
	}
	return ts.UTC(), nil
}

// parseUUID parses the 8-4-4-4-12 form, or 32 hex digits, optionally in
// braces.
func parseUUID(s string) (u [16]byte, ok bool) {
	if len(s) == 38 && s[0] == '{' && s[37] == '}' {
		s = s[1:37]
	}
	if len(s) == 36 {
		if s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
			return u, false
		}
		s = s[:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	}
	if len(s) != 32 {
		return u, false
	}
	for i := range 16 {
		hi, ok1 := unhex(s[2*i])
		lo, ok2 := unhex(s[2*i+1])
		if !ok1 || !ok2 {
			return u, false
		}
		u[i] = hi<<4 | lo
	}
	return u, true
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
