package writestrategy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
)

func int64Array(vals []int64, nulls []bool) arrow.Array {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(vals, func() []bool {
		if nulls == nil {
			return nil
		}
		v := make([]bool, len(nulls))
		for i, n := range nulls {
			v[i] = !n
		}
		return v
	}())
	return b.NewArray()
}

func stringArray(vals []string, nulls []bool) arrow.Array {
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	for i, v := range vals {
		if nulls != nil && nulls[i] {
			b.AppendNull()
		} else {
			b.Append(v)
		}
	}
	return b.NewArray()
}

// The key set compares keys exactly: integers by value (0, the extremes,
// values that start their probe at the same slot), NULL apart from every
// value, and key tuples by their parts ("ab","c" is not "a","bc"; "" is
// not NULL).
func TestKeySetExact(t *testing.T) {
	var e keyEncoder
	s := newKeySet(true)
	in := []int64{0, 1, -1, math.MinInt64, math.MaxInt64}
	rnd := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		in = append(in, rnd.Int64())
	}
	// Multiples of 2^54 share the high bits Fibonacci hashing reads at
	// small sizes: long probe runs.
	for i := int64(1); i < 200; i++ {
		in = append(in, i<<54)
	}
	a := int64Array(in, nil)
	defer a.Release()
	for i := range in {
		require.NoError(t, s.add(&e, []arrow.Array{a}, i))
	}
	probe := append([]int64{2, -2, 5 << 54, 300 << 54}, in...)
	nulls := make([]bool, len(probe)+1)
	nulls[len(probe)] = true
	pa := int64Array(append(probe, 0), nulls)
	defer pa.Release()
	want := map[int64]bool{}
	for _, v := range in {
		want[v] = true
	}
	for i, v := range probe {
		got, err := s.has(&e, []arrow.Array{pa}, i)
		require.NoError(t, err)
		require.Equal(t, want[v], got, "%d", v)
	}
	got, err := s.has(&e, []arrow.Array{pa}, len(probe))
	require.NoError(t, err)
	require.False(t, got, "NULL is not in a set without NULL")

	// Tuples.
	ts := newKeySet(false)
	c1 := stringArray([]string{"ab", "a", "", "", "x"}, []bool{false, false, false, true, false})
	c2 := stringArray([]string{"c", "bc", "", "", "y"}, []bool{false, false, true, false, false})
	defer c1.Release()
	defer c2.Release()
	cols := []arrow.Array{c1, c2}
	for i := range 4 {
		require.NoError(t, ts.add(&e, cols, i))
		require.Equal(t, i+1, ts.n, "row %d is a key of its own", i)
	}
	for i, want := range []bool{true, true, true, true, false} {
		got, err := ts.has(&e, cols, i)
		require.NoError(t, err)
		require.Equal(t, want, got, "row %d", i)
	}
}

// BenchmarkKeySet builds a set of 1M target keys and reports the heap it
// holds per key: go test -run '^$' -bench KeySet ./writestrategy/
func BenchmarkKeySet(b *testing.B) {
	const n = 1_000_000
	ids := make([]int64, n)
	texts := make([]string, n)
	for i := range ids {
		ids[i] = int64(i + 1)
		texts[i] = fmt.Sprintf("key-%d", i+1)
	}
	ia, ta := int64Array(ids, nil), stringArray(texts, nil)
	defer ia.Release()
	defer ta.Release()
	for _, c := range []struct {
		name string
		ints bool
		cols []arrow.Array
	}{{"int64", true, []arrow.Array{ia}}, {"text", false, []arrow.Array{ta}}, {"int64+text", false, []arrow.Array{ia, ta}}} {
		b.Run(c.name, func(b *testing.B) {
			var perKey float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				var e keyEncoder
				s := newKeySet(c.ints)
				for i := range n {
					if err := s.add(&e, c.cols, i); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perKey = float64(after.HeapAlloc-before.HeapAlloc) / n
				runtime.KeepAlive(s)
			}
			b.ReportMetric(perKey, "heap-B/key")
		})
	}
}
