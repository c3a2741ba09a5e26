package facade

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The key index finds every entry by its key hash and nothing else, also
// when slots collide (hashes sharing their high bits, tags or both), and
// refuses a key hash held twice.
func TestKeyIndex(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 7, 1000, 50000} {
		entries := make([]mergeEntry, n)
		seen := map[uint64]bool{}
		for i := range entries {
			var kh uint64
			for {
				switch i % 3 {
				case 0:
					kh = rnd.Uint64()
				case 1: // same high bits as others: one probe sequence
					kh = 0xabcd<<48 | rnd.Uint64()>>16
				default: // same tag as others
					kh = rnd.Uint64()<<32 | 0x1234
				}
				if !seen[kh] {
					break
				}
			}
			seen[kh] = true
			entries[i].khash = kh
		}
		x, err := buildKeyIndex(entries)
		require.NoError(t, err)
		for i, e := range entries {
			require.Equal(t, i, x.find(entries, e.khash))
		}
		for range 1000 {
			kh := rnd.Uint64()
			if !seen[kh] {
				require.Equal(t, -1, x.find(entries, kh))
			}
		}
		if n > 1 {
			entries[n-1].khash = entries[n/2].khash
			_, err := buildKeyIndex(entries)
			require.True(t, errors.Is(err, errMergeShape), "%v", err)
		}
	}
}
