package identity

import "math/bits"

// ordinals numbers the rows of one write among the rows with the same row
// hash: the first row with a hash gets 0, the next 1, and so on. A row's
// ordinal depends only on the earlier rows with its own hash, never on
// rows with other hashes, as long as the write has at most 3/4 of max
// distinct hashes (max is the table's largest size in entries).
//
// The table is open-addressed (linear probing) over the full 64-bit hash,
// 12 bytes an entry; it starts small and doubles while it is at most 3/4
// full, up to max entries, so memory is bounded by max whatever the row
// count. A hash first seen once the table is full is not inserted; such
// rows are numbered by a Bloom filter of the hashes seen since (32 bits
// per table entry, 4 probes in one 512-bit block): a hash the filter has not seen gets 0 (and
// is added), which is its exact ordinal; a hash it may have seen (a repeat,
// or a false positive) gets 1 + a counter shared by the hashes of its
// bucket (one counter per 16 table entries), so that ordinals stay
// distinct among the rows of one hash, but depend on other rows.
type ordinals struct {
	max    int
	keys   []uint64 // hash per entry, 0 = empty
	counts []uint32 // rows numbered so far per entry, minus one (an insert touches keys alone)
	used   int
	shift  uint   // 64 - log2(len(keys))
	zero   uint32 // rows numbered so far with hash 0 (kept out of the table)

	touched uint64 // the sum of the entries number reads ahead (kept so the loads stay)

	bloom []uint64 // the filter of hashes first seen once the table is full
	spill []uint32 // counters of the rows the filter may have seen
}

// minOrdinalEntries is the size a table starts at.
const minOrdinalEntries = 1 << 10

// newOrdinals returns an empty numbering whose table grows to max entries
// (a power of two).
func newOrdinals(max int) *ordinals {
	return &ordinals{max: max}
}

// fib spreads a hash over the table's slots (Fibonacci hashing: the top
// bits of the product depend on every bit of the hash).
const fib = 0x9e3779b97f4a7c15

// number sets ords[j] to the ordinal of a row with hash hs[j], in order,
// and counts the rows. It works in chunks whose table entries it reads
// first in a loop of independent loads (which the CPU overlaps, where
// next alone would wait for one entry at a time).
func (o *ordinals) number(hs []uint64, ords []uint32) {
	const chunk = 64
	for from := 0; from < len(hs); from += chunk {
		part := hs[from:min(from+chunk, len(hs))]
		if keys := o.keys; keys != nil {
			var touch uint64
			for _, h := range part {
				touch += keys[(h*fib)>>o.shift]
			}
			o.touched += touch
		}
		for j, h := range part {
			ords[from+j] = o.next(h)
		}
	}
}

// next returns the ordinal of a row with hash h and counts the row.
func (o *ordinals) next(h uint64) uint32 {
	if h == 0 {
		o.zero++
		return o.zero - 1
	}
	if o.keys == nil {
		o.alloc(min(minOrdinalEntries, o.max))
	}
	mask := uint64(len(o.keys) - 1)
	for i := (h * fib) >> o.shift; ; i = (i + 1) & mask {
		switch o.keys[i] {
		case h:
			c := o.counts[i] + 1
			o.counts[i] = c
			return c
		case 0:
			if 4*(o.used+1) <= 3*len(o.keys) {
				o.keys[i] = h
				o.used++
				return 0
			}
			if len(o.keys) < o.max {
				o.grow()
				return o.next(h)
			}
			return o.overflow(h)
		}
	}
}

func (o *ordinals) alloc(n int) {
	o.keys, o.counts = make([]uint64, n), make([]uint32, n)
	o.shift = uint(64 - bits.TrailingZeros(uint(n))) // 64 for one entry: slot 0
}

// grow doubles the table, re-inserting its entries.
func (o *ordinals) grow() {
	keys, counts := o.keys, o.counts
	o.alloc(2 * len(keys))
	mask := uint64(len(o.keys) - 1)
	for j, h := range keys {
		if h == 0 {
			continue
		}
		i := (h * fib) >> o.shift
		for o.keys[i] != 0 {
			i = (i + 1) & mask
		}
		o.keys[i], o.counts[i] = h, counts[j]
	}
}

// overflow numbers a row whose hash is not in the full table.
func (o *ordinals) overflow(h uint64) uint32 {
	if o.bloom == nil {
		o.bloom = make([]uint64, 8*max(o.max/16, 1)) // 32 bits per table entry
		o.spill = make([]uint32, max(o.max/16, 1))
	}
	// The filter is blocked: the 4 probes of a hash fall in one 512-bit
	// block (one cache line). They come from another mix of h than the
	// table's slot, so that hashes sharing a slot do not share probes.
	g := splitmix(h)
	block := (g >> 36) % uint64(len(o.bloom)/8) * 8
	seen := true
	for k := range 4 {
		bit := (g >> (9 * k)) & 511
		w, m := block+bit/64, uint64(1)<<(bit%64)
		if o.bloom[w]&m == 0 {
			seen = false
			o.bloom[w] |= m
		}
	}
	if !seen {
		return 0
	}
	j := splitmix(g) % uint64(len(o.spill))
	c := o.spill[j]
	o.spill[j] = c + 1
	return c + 1
}

// splitmix is the finalizer of SplitMix64.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
