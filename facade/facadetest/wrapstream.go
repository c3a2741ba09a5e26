package facadetest

import (
	"context"
	"iter"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
)

// stream wraps the rows of a write with the MidStream faults that match
// the dataset. Batches pass through borrowed, as the facade's contract
// says; a batch cut at a fault's row count is handed over as a slice that
// is released after its yield. The source stops (its deferred cleanup
// runs) as soon as a fault fails the stream.
func (l *faulty) stream(ctx context.Context, dataset string, rows iter.Seq2[arrow.RecordBatch, error]) iter.Seq2[arrow.RecordBatch, error] {
	var cands []int
	for i, f := range l.faults {
		if f.matches(MidStream, dataset) {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		return rows
	}
	sort.SliceStable(cands, func(a, b int) bool { return l.faults[cands[a]].AfterRows < l.faults[cands[b]].AfterRows })
	return func(yield func(arrow.RecordBatch, error) bool) {
		var (
			n    int64 // rows handed over
			next int   // first candidate not yet passed
		)
		// due fires the candidates whose row count is reached; it reports
		// false when one failed the stream (the error was yielded).
		due := func() bool {
			for next < len(cands) && l.faults[cands[next]].AfterRows <= n {
				i := cands[next]
				next++
				if !l.take(i) {
					continue
				}
				if err := l.faults[i].run(ctx); err != nil {
					yield(nil, err)
					return false
				}
			}
			return true
		}
		// limit is the most rows that may be handed over before the next
		// armed candidate's count; -1 when none is left.
		limit := func() int64 {
			for j := next; j < len(cands); j++ {
				if l.available(cands[j]) {
					return l.faults[cands[j]].AfterRows - n
				}
			}
			return -1
		}
		if !due() {
			return
		}
		for rec, err := range rows {
			if err != nil {
				yield(nil, err)
				return
			}
			total := rec.NumRows()
			if total == 0 {
				if !yield(rec, nil) {
					return
				}
				continue
			}
			for off := int64(0); off < total; {
				k := total - off
				if lim := limit(); lim >= 0 && lim < k {
					k = lim
				}
				if off == 0 && k == total {
					if !yield(rec, nil) {
						return
					}
				} else if !yieldSlice(yield, rec, off, off+k) {
					return
				}
				n += k
				off += k
				if !due() {
					return
				}
			}
		}
	}
}

// yieldSlice yields rows [lo, hi) of rec as a slice released afterwards.
func yieldSlice(yield func(arrow.RecordBatch, error) bool, rec arrow.RecordBatch, lo, hi int64) bool {
	s := rec.NewSlice(lo, hi)
	defer s.Release()
	return yield(s, nil)
}
