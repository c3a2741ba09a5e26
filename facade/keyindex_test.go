package facade

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// The key index finds every entry by its key, also when slots collide
// (hashes sharing their high bits, tags or both) and when distinct keys
// share a whole key hash, and refuses a key held twice.
func TestKeyIndex(t *testing.T) {
	for _, ints := range []bool{true, false} {
		rnd := rand.New(rand.NewPCG(3, 4))
		for _, n := range []int{0, 1, 7, 1000, 50000} {
			if !ints && n > 1000 {
				continue // the index is the same: only the key comparison differs
			}
			keys := &mergeKeys{ints: ints, decided: true}
			key := func(i int) probeKey {
				if ints {
					return probeKey{v: int64(i)*7 - 3, null: i == 5}
				}
				return probeKey{b: []byte("k" + strconv.Itoa(i))}
			}
			entries := make([]mergeEntry, n)
			for i := range entries {
				var kh uint64
				switch c := i % 4; {
				case c == 3 && i < 400: // the same key hash as every fourth of the first keys
					kh = 0x5eed
				case c == 3:
					kh = rnd.Uint64()
				case c == 0:
					kh = rnd.Uint64()
				case c == 1: // same high bits as others: one probe sequence
					kh = 0xabcd<<48 | rnd.Uint64()>>16
				default: // same tag as others
					kh = rnd.Uint64()<<32 | 0x1234
				}
				entries[i].khash = kh
				require.NoError(t, keys.store(&entries[i], key(i)))
			}
			x, err := buildKeyIndex(entries, keys)
			require.NoError(t, err)
			for i, e := range entries {
				require.Equal(t, i, x.find(entries, keys, e.khash, key(i)))
			}
			for i := range 300 {
				// an absent key, under a random hash and under a shared one
				k := key(n + i)
				require.Equal(t, -1, x.find(entries, keys, rnd.Uint64(), k))
				require.Equal(t, -1, x.find(entries, keys, 0x5eed, k))
			}
			if ints && n > 7 {
				other := probeKey{v: 3, other: true} // the batch's key column is no integer
				require.Equal(t, -1, x.find(entries, keys, entries[3].khash, other))
			}
			if n > 1 {
				last := n - 1
				entries[last].khash = entries[n/2].khash
				require.NoError(t, keys.store(&entries[last], key(n/2)))
				_, err := buildKeyIndex(entries, keys)
				require.True(t, errors.Is(err, errMergeShape), "%v", err)
			}
		}
	}
}
