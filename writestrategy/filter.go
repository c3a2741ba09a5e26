package writestrategy

import (
	"fmt"
	"strings"
	"time"

	"github.com/lakewrite/lakewrite/facade"
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
		for _, v := range []any{r.Min, r.Max} {
			switch x := v.(type) {
			case nil, int, int32, int64, float64, string:
			case time.Time:
				if typ == "date" && !facade.DayStart(x) {
					return fmt.Errorf("%w: filter of source %q: %s: a date bound must be midnight UTC", ErrInvalid, datasetID, r)
				}
			default:
				return fmt.Errorf("%w: filter of source %q: %s: unsupported bound type %T", ErrInvalid, datasetID, r, v)
			}
		}
	}
	return nil
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
