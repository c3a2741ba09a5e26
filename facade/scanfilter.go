package facade

import (
	"fmt"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/lakewrite/lakewrite/internal/vocab"
)

// Range is a condition on one column of a scan: Min <= column <= Max, each
// bound optional (nil) and inclusive unless its Exclusive flag is set. A
// NULL value never satisfies a Range. A ledger window (Low, High] over a
// timestamp column is Range{Column: c, Min: Low, MinExclusive: true, Max: High}.
//
// Bounds are typed by the column they compare with:
//   - integer columns (int2/int4/int8): int, int32 or int64;
//   - floating columns (float4/float8): float64;
//   - text columns: string (byte-wise comparison);
//   - timestamp and timestamptz columns: time.Time, at microsecond
//     precision (finer digits are dropped);
//   - date columns: time.Time at midnight UTC (the day it starts).
//
// Any other pairing is ErrInvalidRequest. On the Iceberg backend a Range
// prunes whole data files before they are read: by partition (for a column
// partitioned by identity, year, month, day, hour or truncate) and by the
// column's min/max statistics; the rows of the files read are then filtered
// exactly.
type Range struct {
	Column                     string
	Min, Max                   any
	MinExclusive, MaxExclusive bool
}

func (r Range) String() string {
	lo, hi := "[-inf", "+inf]"
	if r.Min != nil {
		lo = fmt.Sprintf("[%v", r.Min)
		if r.MinExclusive {
			lo = fmt.Sprintf("(%v", r.Min)
		}
	}
	if r.Max != nil {
		hi = fmt.Sprintf("%v]", r.Max)
		if r.MaxExclusive {
			hi = fmt.Sprintf("%v)", r.Max)
		}
	}
	return r.Column + " in " + lo + ", " + hi
}

// filterExpr translates a conjunction of ranges into an unbound iceberg-go
// row filter over isc; nil ranges give nil (no filter).
func filterExpr(isc *iceberg.Schema, ranges []Range) (iceberg.BooleanExpression, error) {
	var conj []iceberg.BooleanExpression
	for _, r := range ranges {
		fld, ok := isc.FindFieldByName(r.Column)
		if !ok {
			return nil, fmt.Errorf("%w: filter on unknown column %q", ErrInvalidRequest, r.Column)
		}
		if r.Min == nil && r.Max == nil {
			return nil, fmt.Errorf("%w: filter %s has no bound", ErrInvalidRequest, r)
		}
		ref := iceberg.Reference(r.Column)
		for _, b := range []struct {
			v         any
			excl, low bool
		}{{r.Min, r.MinExclusive, true}, {r.Max, r.MaxExclusive, false}} {
			if b.v == nil {
				continue
			}
			lit, err := rangeLiteral(fld.Type, b.v)
			if err != nil {
				return nil, fmt.Errorf("%w: filter %s: %w", ErrInvalidRequest, r, err)
			}
			op := iceberg.OpGTEQ
			switch {
			case b.low && b.excl:
				op = iceberg.OpGT
			case !b.low && b.excl:
				op = iceberg.OpLT
			case !b.low:
				op = iceberg.OpLTEQ
			}
			conj = append(conj, iceberg.LiteralPredicate(op, ref, lit))
		}
	}
	switch len(conj) {
	case 0:
		return nil, nil
	case 1:
		return conj[0], nil
	}
	return iceberg.NewAnd(conj[0], conj[1], conj[2:]...), nil
}

// rangeLiteral is v as a literal of the column type typ (see Range).
func rangeLiteral(typ iceberg.Type, v any) (iceberg.Literal, error) {
	bad := fmt.Errorf("a %T bound does not compare with a %s column", v, typ)
	switch typ.(type) {
	case iceberg.Int32Type, iceberg.Int64Type:
		var n int64
		switch x := v.(type) {
		case int:
			n = int64(x)
		case int32:
			n = int64(x)
		case int64:
			n = x
		default:
			return nil, bad
		}
		return iceberg.Int64Literal(n), nil
	case iceberg.Float32Type, iceberg.Float64Type:
		x, ok := v.(float64)
		if !ok {
			return nil, bad
		}
		return iceberg.Float64Literal(x), nil
	case iceberg.StringType:
		s, ok := v.(string)
		if !ok {
			return nil, bad
		}
		return iceberg.StringLiteral(s), nil
	case iceberg.TimestampType, iceberg.TimestampTzType:
		t, ok := v.(time.Time)
		if !ok {
			return nil, bad
		}
		return iceberg.TimestampLiteral(t.UnixMicro()), nil
	case iceberg.DateType:
		t, ok := v.(time.Time)
		if !ok {
			return nil, bad
		}
		if !vocab.DayStart(t) {
			return nil, fmt.Errorf("a date bound must be midnight UTC, got %s", t.UTC().Format(time.RFC3339Nano))
		}
		return iceberg.DateLiteral(t.Unix() / 86400), nil
	}
	return nil, bad
}
