package keycache

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

type hit struct {
	pos  int64
	hash uint64
}

func lookup(x *Index, k int64, null bool) []hit {
	var out []hit
	fn := func(pos int64, hash uint64) { out = append(out, hit{pos, hash}) }
	if null {
		x.LookupNull(fn)
	} else {
		x.Lookup(k, fn)
	}
	return out
}

// An index finds every row of a key (duplicates in position order), the
// NULL rows apart, and leaves out the keys it cannot hold.
func TestIndexLookup(t *testing.T) {
	var b Builder
	// positions added out of order; key 7 three times, NULL twice
	for _, r := range []struct {
		k        int64
		null, ok bool
		pos      int64
	}{{7, false, true, 5}, {3, false, true, 0}, {0, true, true, 4}, {7, false, true, 1}, {9, false, false, 2}, {-2, false, true, 3}, {7, false, true, 6}, {0, true, true, 7}} {
		b.Add(r.k, r.null, r.ok, r.pos, uint64(100+r.pos))
	}
	x := b.Index()
	require.Equal(t, []hit{{1, 101}, {5, 105}, {6, 106}}, lookup(x, 7, false))
	require.Equal(t, []hit{{0, 100}}, lookup(x, 3, false))
	require.Equal(t, []hit{{3, 103}}, lookup(x, -2, false))
	require.Nil(t, lookup(x, 9, false), "a key it cannot hold matches nothing")
	require.Nil(t, lookup(x, 0, false), "NULL is not 0")
	require.Equal(t, []hit{{4, 104}, {7, 107}}, lookup(x, 0, true))

	var big Builder
	big.Add(1, false, true, MaxRows+1, 0)
	require.Nil(t, big.Index(), "a position past 32 bits: no index")
}

// The cache keeps indexes within its budget, forgetting the least
// recently used; a nil or zero-budget cache holds nothing.
func TestCacheBudget(t *testing.T) {
	idx := func(rows int) *Index {
		var b Builder
		for i := range rows {
			b.Add(int64(i), false, true, int64(i), 0)
		}
		return b.Index()
	}
	one := idx(100).Bytes()
	c := New(3 * one)
	for i := range 3 {
		c.Put(fmt.Sprint(i), idx(100))
	}
	require.NotNil(t, c.Get("0")) // 0 is now the most recent
	c.Put("3", idx(100))          // forgets 1
	require.Nil(t, c.Get("1"))
	for _, id := range []string{"0", "2", "3"} {
		require.NotNil(t, c.Get(id), id)
	}
	require.LessOrEqual(t, c.Used(), 3*one)
	c.Put("huge", idx(1000)) // larger than the budget: not kept, nothing forgotten
	require.Nil(t, c.Get("huge"))
	require.NotNil(t, c.Get("3"))
	c.Put("3", idx(100)) // replacing keeps the account right
	require.Equal(t, 3*one, c.Used())
	hits, misses := c.Stats()
	require.Equal(t, int64(5), hits)
	require.Equal(t, int64(2), misses)

	var off *Cache = New(0)
	require.False(t, off.Enabled())
	off.Put("a", idx(1))
	require.Nil(t, off.Get("a"))
	require.Zero(t, off.Used())
}

// Concurrent scoped replaces share one cache: Gets, Puts and lookups from
// several goroutines (run with -race) keep the budget and find what is
// kept.
func TestCacheConcurrent(t *testing.T) {
	var b Builder
	for i := range 1000 {
		b.Add(int64(i%100), false, true, int64(i), uint64(i))
	}
	x := b.Index()
	c := New(5 * x.Bytes())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				id := fmt.Sprint((g + i) % 10)
				if got, ok := c.Get(id).(*Index); ok {
					n := 0
					got.Lookup(7, func(int64, uint64) { n++ })
					if n != 10 {
						t.Errorf("key 7: %d rows, want 10", n)
					}
				} else {
					c.Put(id, x)
				}
			}
		}()
	}
	wg.Wait()
	require.LessOrEqual(t, c.Used(), 5*x.Bytes())
}
