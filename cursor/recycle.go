package cursor

import (
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// recycler is the allocator of the buffers Batches builds: it wraps
// Options.Allocator and keeps the buffers of batches the consumer has
// released, to reuse them for the next batches. Fresh memory for every
// batch (allocated, zeroed, faulted in, then collected) cost more client
// CPU than decoding the values in the benchmark.
//
// It keeps at most keepBatches batches' worth of bytes; anything beyond
// that, and everything after close, goes back to the wrapped allocator.
// Buffers may be released from any goroutine, at any time, including after
// the stream has ended.
type recycler struct {
	mem memory.Allocator

	mu     sync.Mutex
	out    map[*byte][]byte // handed-out buffers, by data pointer, as allocated by mem
	free   [][]byte         // released buffers kept for reuse, as allocated by mem
	kept   int              // bytes in free
	limit  int              // most bytes kept
	closed bool
}

const keepBatches = 2

var _ memory.Allocator = (*recycler)(nil)

func newRecycler(mem memory.Allocator) *recycler {
	return &recycler{mem: mem, out: map[*byte][]byte{}}
}

// batchBytes tells the recycler how many bytes one batch took, to bound
// what it keeps.
func (r *recycler) batchBytes(n int) {
	r.mu.Lock()
	r.limit = max(r.limit, keepBatches*n)
	r.mu.Unlock()
}

// Allocate returns a kept buffer of at least size bytes (and not much
// more), or a new one from the wrapped allocator. A reused buffer is not
// zeroed: the caller overwrites what it uses.
func (r *recycler) Allocate(size int) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	best := -1
	if !r.closed {
		for i, b := range r.free {
			if len(b) >= size && len(b) <= size+size/4+64 && (best < 0 || len(b) < len(r.free[best])) {
				best = i
			}
		}
	}
	var b []byte
	if best >= 0 {
		b = r.free[best]
		last := len(r.free) - 1
		r.free[best], r.free[last] = r.free[last], nil
		r.free = r.free[:last]
		r.kept -= len(b)
	} else {
		if b = r.mem.Allocate(size); len(b) == 0 {
			return b
		}
	}
	r.out[unsafe.SliceData(b)] = b
	return b[:size]
}

func (r *recycler) Reallocate(size int, b []byte) []byte {
	r.mu.Lock()
	orig, ok := r.out[unsafe.SliceData(b)]
	r.mu.Unlock()
	if ok && size <= len(orig) {
		return orig[:size]
	}
	nb := r.Allocate(size)
	copy(nb, b)
	r.Free(b)
	return nb
}

func (r *recycler) Free(b []byte) {
	r.mu.Lock()
	p := unsafe.SliceData(b)
	orig, ok := r.out[p]
	if !ok { // not ours
		r.mu.Unlock()
		r.mem.Free(b)
		return
	}
	delete(r.out, p)
	var drop [][]byte
	if r.closed || len(orig) > r.limit {
		drop = append(drop, orig)
	} else {
		// Keep the newest: evict the oldest kept buffers past the limit.
		r.free = append(r.free, orig)
		r.kept += len(orig)
		for r.kept > r.limit {
			drop = append(drop, r.free[0])
			r.kept -= len(r.free[0])
			r.free[0] = nil
			r.free = r.free[1:]
		}
	}
	r.mu.Unlock()
	for _, b := range drop {
		r.mem.Free(b)
	}
}

// close returns the kept buffers to the wrapped allocator; buffers released
// later go straight back to it.
func (r *recycler) close() {
	r.mu.Lock()
	free := r.free
	r.free, r.kept, r.closed = nil, 0, true
	r.mu.Unlock()
	for _, b := range free {
		r.mem.Free(b)
	}
}
