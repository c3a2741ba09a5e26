package facade

import (
	"fmt"
	"slices"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/lakewrite/lakewrite/internal/scanfiles"
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

// In is a condition on one column of a scan: the column holds one of
// Values, typed as Range's bounds are; a nil value matches NULL; no values
// match no row. On the Iceberg backend the data files are pruned before
// they are read, by partition and by the column's min/max statistics (a
// file is read only when a value falls within its bounds, for any number
// of values), then the rows are filtered exactly; a key-set read is
// cheapest on a table partitioned or sorted by the column.
type In struct {
	Column string
	Values []any
}

// inSet is an In bound to its column: its values' literals, sorted, and
// the set that prunes files by them.
type inSet struct {
	name string
	lits []iceberg.Literal
	set  scanfiles.Set
}

func bindIn(isc *iceberg.Schema, in In) (inSet, error) {
	fld, ok := isc.FindFieldByName(in.Column)
	if !ok {
		return inSet{}, fmt.Errorf("%w: filter on unknown column %q", ErrInvalidRequest, in.Column)
	}
	s := inSet{name: fld.Name, set: scanfiles.Set{FieldID: fld.ID, Type: fld.Type}}
	for _, v := range in.Values {
		if v == nil {
			s.set.Null = true
			continue
		}
		lit, err := rangeLiteral(fld.Type, v)
		if err != nil {
			return inSet{}, fmt.Errorf("%w: filter %s in set: %w", ErrInvalidRequest, in.Column, err)
		}
		s.lits = append(s.lits, lit)
	}
	slices.SortFunc(s.lits, func(a, b iceberg.Literal) int { return scanfiles.CompareKeys(scanfiles.Key(a), scanfiles.Key(b)) })
	for _, l := range s.lits {
		s.set.Keys = append(s.set.Keys, scanfiles.Key(l))
	}
	return s, nil
}

// expr is s as an iceberg-go predicate. Above 200 values iceberg-go's
// metrics pruning gives up on a set: the set's bounds are added so that it
// still prunes by them (planTasks prunes by the set itself).
func (s inSet) expr() iceberg.BooleanExpression {
	ref := iceberg.Reference(s.name)
	var e iceberg.BooleanExpression = iceberg.AlwaysFalse{}
	if len(s.lits) > 0 {
		e = iceberg.SetPredicate(iceberg.OpIn, ref, s.lits)
		if len(s.lits) > 200 {
			e = iceberg.NewAnd(e, iceberg.LiteralPredicate(iceberg.OpGTEQ, ref, s.lits[0]),
				iceberg.LiteralPredicate(iceberg.OpLTEQ, ref, s.lits[len(s.lits)-1]))
		}
	}
	if s.set.Null {
		e = iceberg.NewOr(e, iceberg.IsNull(ref))
	}
	return e
}

// filterExpr translates a conjunction of ranges and sets into an unbound
// iceberg-go row filter over isc; none gives nil (no filter).
func filterExpr(isc *iceberg.Schema, ranges []Range, ins []inSet) (iceberg.BooleanExpression, error) {
	var conj []iceberg.BooleanExpression
	for _, s := range ins {
		conj = append(conj, s.expr())
	}
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
