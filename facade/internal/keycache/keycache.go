// Package keycache keeps, for immutable data files, an index of the rows
// of each file by an integer key: every row's key, its position in the
// file and its row hash, sorted by key. A scoped replace that finds a
// file's index here looks its keys up instead of reading the file.
//
// A data file never changes once written, so an index is valid for as
// long as the file exists: the cache never goes stale, it only forgets,
// least recently used first, to stay within its byte budget. Deletes are
// not part of an index; the reader applies the file's current deletes.
package keycache

import (
	"container/list"
	"slices"
	"sort"
	"sync"
)

// Index is the rows of one data file by integer key. Build it with a
// Builder; it is read-only once built and safe for concurrent readers.
type Index struct {
	keys  []int64  // sorted
	pos   []int32  // position of the row of keys[i]
	hash  []uint64 // row hash of the row of keys[i]
	nulls []int32  // positions of the rows whose key is NULL, ascending
	nhash []uint64 // their row hashes
}

// Bytes is the memory the index holds.
func (x *Index) Bytes() int64 {
	return int64(len(x.keys))*20 + int64(len(x.nulls))*12 + 128
}

// Lookup calls fn with the position and row hash of each row whose key
// is k, in ascending position.
func (x *Index) Lookup(k int64, fn func(pos int64, hash uint64)) {
	i := sort.Search(len(x.keys), func(i int) bool { return x.keys[i] >= k })
	for ; i < len(x.keys) && x.keys[i] == k; i++ {
		fn(int64(x.pos[i]), x.hash[i])
	}
}

// LookupNull calls fn with the position and row hash of each row whose
// key is NULL, in ascending position.
func (x *Index) LookupNull(fn func(pos int64, hash uint64)) {
	for i, p := range x.nulls {
		fn(int64(p), x.nhash[i])
	}
}

// Builder collects the rows of one file, in any order.
type Builder struct {
	x   Index
	bad bool
}

// MaxRows is the most rows a file may have to be indexed (positions are
// held in 32 bits).
const MaxRows = 1<<31 - 1

// Add adds the row at pos whose key is k (or NULL) and row hash is h.
// A row whose key cannot be held (ok false: an unsigned value above the
// int64 range) is left out: no key of a scope can match it.
func (b *Builder) Add(k int64, null, ok bool, pos int64, h uint64) {
	switch {
	case pos > MaxRows || pos < 0:
		b.bad = true
	case null:
		b.x.nulls, b.x.nhash = append(b.x.nulls, int32(pos)), append(b.x.nhash, h)
	case ok:
		b.x.keys, b.x.pos, b.x.hash = append(b.x.keys, k), append(b.x.pos, int32(pos)), append(b.x.hash, h)
	}
}

// Index sorts the rows added and returns their index; nil when a
// position did not fit.
func (b *Builder) Index() *Index {
	if b.bad {
		return nil
	}
	x := b.x
	b.x = Index{}
	ord := make([]int32, len(x.keys))
	for i := range ord {
		ord[i] = int32(i)
	}
	slices.SortFunc(ord, func(i, j int32) int {
		if x.keys[i] != x.keys[j] {
			if x.keys[i] < x.keys[j] {
				return -1
			}
			return 1
		}
		return int(x.pos[i] - x.pos[j])
	})
	out := &Index{keys: make([]int64, len(ord)), pos: make([]int32, len(ord)), hash: make([]uint64, len(ord))}
	for n, i := range ord {
		out.keys[n], out.pos[n], out.hash[n] = x.keys[i], x.pos[i], x.hash[i]
	}
	nord := make([]int, len(x.nulls))
	for i := range nord {
		nord[i] = i
	}
	slices.SortFunc(nord, func(i, j int) int { return int(x.nulls[i] - x.nulls[j]) })
	out.nulls, out.nhash = make([]int32, len(nord)), make([]uint64, len(nord))
	for n, i := range nord {
		out.nulls[n], out.nhash[n] = x.nulls[i], x.nhash[i]
	}
	return out
}

// Entry is what a Cache holds: an Index, or any other value derived from
// an immutable file that knows its size.
type Entry interface {
	Bytes() int64
}

// Cache holds entries by id within a byte budget, forgetting the least
// recently used first. It is safe for concurrent use. The zero value and
// a nil *Cache hold nothing.
type Cache struct {
	mu    sync.Mutex
	max   int64
	used  int64
	order list.List // of *entry, most recently used first
	byID  map[string]*list.Element
	hits  int64
	miss  int64
}

type entry struct {
	id string
	x  Entry
}

// New returns a cache of at most maxBytes (nil when maxBytes <= 0).
func New(maxBytes int64) *Cache {
	if maxBytes <= 0 {
		return nil
	}
	return &Cache{max: maxBytes, byID: map[string]*list.Element{}}
}

// Enabled reports whether the cache can hold an entry.
func (c *Cache) Enabled() bool { return c != nil && c.max > 0 }

// MaxBytes is the budget of the cache (0 when it holds nothing).
func (c *Cache) MaxBytes() int64 {
	if !c.Enabled() {
		return 0
	}
	return c.max
}

// Get returns the entry of id, or nil.
func (c *Cache) Get(id string) Entry {
	if !c.Enabled() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[id]
	if !ok {
		c.miss++
		return nil
	}
	c.hits++
	c.order.MoveToFront(e)
	return e.Value.(*entry).x
}

// Put keeps x as the entry of id, unless it alone exceeds the budget.
func (c *Cache) Put(id string, x Entry) {
	if !c.Enabled() || x == nil || x.Bytes() > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[id]; ok {
		c.used -= e.Value.(*entry).x.Bytes()
		c.order.Remove(e)
	}
	c.byID[id] = c.order.PushFront(&entry{id: id, x: x})
	c.used += x.Bytes()
	for c.used > c.max {
		e := c.order.Back()
		old := e.Value.(*entry)
		c.order.Remove(e)
		delete(c.byID, old.id)
		c.used -= old.x.Bytes()
	}
}

// Stats returns how many Gets found an entry and how many did not.
func (c *Cache) Stats() (hits, misses int64) {
	if !c.Enabled() {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.miss
}

// Used is the bytes the cache holds.
func (c *Cache) Used() int64 {
	if !c.Enabled() {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}
