package writestrategy

import (
	"fmt"
	"strings"
	"time"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/vocab"
	"github.com/lakewrite/lakewrite/writestrategy/sliced"
)

// checkFilter checks a source filter against the source's declared schema
// by the rules of facade.Range (bound kinds; a date bound is midnight UTC).
func checkFilter(datasetID string, s Schema, ranges []facade.Range) error {
	for _, r := range ranges {
		var typ string
		for _, c := range s.Columns {
			if c.Name == r.Column {
				typ = strings.ToLower(c.Type)
			}
		}
		if typ == "" {
			return fmt.Errorf("%w: filter of source %q: no column %q", ErrInvalid, datasetID, r.Column)
		}
		if r.Min == nil && r.Max == nil {
			return fmt.Errorf("%w: filter of source %q: %s has no bound", ErrInvalid, datasetID, r)
		}
		kind := rangeKind(typ)
		for _, v := range []any{r.Min, r.Max} {
			ok := false
			switch x := v.(type) {
			case nil:
				ok = true
			case int, int32, int64:
				ok = kind == "int"
			case float64:
				ok = kind == "float"
			case string:
				ok = kind == "text"
			case time.Time:
				ok = kind == "time" || kind == "date"
				if kind == "date" && !vocab.DayStart(x) {
					return fmt.Errorf("%w: filter of source %q: %s: a date bound must be midnight UTC", ErrInvalid, datasetID, r)
				}
			}
			if !ok {
				return fmt.Errorf("%w: filter of source %q: %s: a %T bound does not compare with a %s column", ErrInvalid, datasetID, r, v, typ)
			}
		}
	}
	return nil
}

// rangeKind classifies a declared Postgres type by the bounds a range on
// it takes (see facade.Range): "int", "float", "text", "time", "date", or
// "" when ranges on it are not supported.
func rangeKind(typ string) string {
	base, _, _ := strings.Cut(typ, "(")
	switch strings.TrimSpace(base) {
	case "smallint", "integer", "int", "bigint", "int2", "int4", "int8":
		return "int"
	case "real", "double precision", "float4", "float8":
		return "float"
	case "text", "varchar", "character varying", "char", "character", "bpchar":
		return "text"
	case "date":
		return "date"
	case "timestamp", "timestamptz", "timestamp with time zone", "timestamp without time zone":
		return "time"
	}
	return ""
}

// filteredRelation keeps the rows of r satisfying every range, compared in
// the column's declared type (text byte-wise, as the Iceberg scan compares
// it). For a hydrated native source the scan already returned only those
// rows; the condition then holds for all of them.
func filteredRelation(r *relation, ranges []facade.Range) *relation {
	if len(ranges) == 0 {
		return r
	}
	out := *r
	out.scanOrder = false // a filter may read the rows through an index
	out.only = nil        // the filter's columns may not be among them
	if r.slice != nil {
		// each slice's rows are filtered too
		out.slice = &sliceable{src: r.slice.src, at: func(rg sliced.Range) *relation { return filteredRelation(r.slice.at(rg), ranges) }}
	}
	out.render = func(b *builder) string {
		inner := r.render(b)
		var conds []string
		for _, rg := range ranges {
			typ := ""
			for _, c := range r.schema.Columns {
				if c.Name == rg.Column {
					typ = c.Type
				}
			}
			col := `"__f".` + quoteIdents([]string{rg.Column})[0]
			for _, bd := range []struct {
				v  any
				op string
			}{{rg.Min, map[bool]string{false: ">=", true: ">"}[rg.MinExclusive]}, {rg.Max, map[bool]string{false: "<=", true: "<"}[rg.MaxExclusive]}} {
				if bd.v == nil {
					continue
				}
				v := bd.v
				if t, ok := v.(time.Time); ok {
					v = t.UTC()
				}
				lhs := col
				if _, ok := v.(string); ok {
					lhs += ` COLLATE "C"`
				}
				conds = append(conds, lhs+" "+bd.op+" "+b.param(v)+"::"+typ)
			}
		}
		return "(SELECT * FROM " + inner + ` "__f" WHERE ` + strings.Join(conds, " AND ") + ")"
	}
	return &out
}
