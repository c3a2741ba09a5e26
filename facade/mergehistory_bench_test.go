package facade

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkMergeHistory times merges of a 20,000-row table (merge on
// read: position delete files) after 20 to 60 earlier merges, each
// changing 20 rows spread over the table's data files, without
// compaction, and logs the p25, p50 and p75. The commit of each merge
// must not grow with the table's manifests.
//
//	go test ./facade/ -run '^$' -bench MergeHistory -benchtime 1x
func BenchmarkMergeHistory(b *testing.B) {
	for b.Loop() {
		env := newCompactEnv(b, mergeOnRead)
		f := env.f
		const ds = "history"
		ids := idRange(0, 20000)
		mergeWrite(b, f, ds, ids, plainName)
		var ts []time.Duration
		for r := range 60 {
			name := func(id int64) string {
				if id%500 <= int64(r) {
					return fmt.Sprintf("r%d", id%500)
				}
				return "n"
			}
			t0 := time.Now()
			mergeWrite(b, f, ds, ids, name)
			if r >= 20 {
				ts = append(ts, time.Since(t0))
			}
		}
		slices.Sort(ts)
		b.Logf("merge after 20-60 merges: p25 %v p50 %v p75 %v", ts[len(ts)/4], ts[len(ts)/2], ts[3*len(ts)/4])
		b.ReportMetric(float64(ts[len(ts)/2].Milliseconds()), "p50_ms")
	}
}
