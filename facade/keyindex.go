package facade

import (
	"fmt"
	"math/bits"
)

// keyIndex finds the probe's entries by key hash: an open-addressing
// table (linear probing) of 8-byte slots, each the entry's index plus one
// (0: empty) in the low half and the low 32 bits of its key hash as a tag
// in the high half, so that a lookup reads the entry only on a tag match.
// The slot is chosen by the high bits of the key hash (a well-mixed row
// hash), the tag is independent of it. It is built once, presized, for
// entries that no longer move.
type keyIndex struct {
	slots []uint64
	shift uint
}

// buildKeyIndex indexes entries by key hash; a key hash held twice is the
// target holding a key twice (errMergeShape).
func buildKeyIndex(entries []mergeEntry) (keyIndex, error) {
	if len(entries) >= 1<<31-1 {
		return keyIndex{}, fmt.Errorf("%w: the target holds too many rows to merge into", errMergeShape)
	}
	// At most half full: 2^k slots with 2^k >= 2*len.
	k := uint(4)
	if n := uint(2 * len(entries)); n > 1<<k {
		k = uint(bits.Len(n - 1))
	}
	x := keyIndex{slots: make([]uint64, 1<<k), shift: 64 - k}
	mask := uint64(len(x.slots) - 1)
	for i := range entries {
		kh := entries[i].khash
		s := kh >> x.shift
		slot := uint64(uint32(kh))<<32 | uint64(i+1)
		for {
			v := x.slots[s]
			if v == 0 {
				x.slots[s] = slot
				break
			}
			if v>>32 == slot>>32 && entries[int(uint32(v))-1].khash == kh {
				return keyIndex{}, fmt.Errorf("%w: the target holds a key twice", errMergeShape)
			}
			s = (s + 1) & mask
		}
	}
	return x, nil
}

// find returns the index of the entry with key hash kh, or -1.
func (x *keyIndex) find(entries []mergeEntry, kh uint64) int {
	if len(x.slots) == 0 {
		return -1
	}
	mask := uint64(len(x.slots) - 1)
	tag := uint64(uint32(kh))
	for s := kh >> x.shift; ; s = (s + 1) & mask {
		v := x.slots[s]
		if v == 0 {
			return -1
		}
		if v>>32 == tag {
			if j := int(uint32(v)) - 1; entries[j].khash == kh {
				return j
			}
		}
	}
}
