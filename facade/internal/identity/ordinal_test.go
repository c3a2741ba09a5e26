package identity

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// ordinalRun numbers hs with a table of at most slots entries, in batches
// of batch rows.
func ordinalRun(slots int, hs []uint64, batch int) []uint32 {
	o := newOrdinals(slots)
	out := make([]uint32, len(hs))
	for from := 0; from < len(hs); from += batch {
		o.number(hs[from:min(from+batch, len(hs))], out[from:])
	}
	return out
}

// rowsWithRepeats is a shuffled sequence of distinct hashes, each 1 to 3
// times (hash 0 among them).
func rowsWithRepeats(rng *rand.Rand, distinct int) []uint64 {
	var hs []uint64
	for d := range distinct {
		h := rng.Uint64()
		if d == 0 {
			h = 0
		}
		for range 1 + rng.IntN(3) {
			hs = append(hs, h)
		}
	}
	rng.Shuffle(len(hs), func(i, j int) { hs[i], hs[j] = hs[j], hs[i] })
	return hs
}

// While a write has at most 3/4 of the table's entries distinct hashes,
// a row's ordinal is the number of earlier rows with its hash, exactly
// (other hashes never shift it), however the table grew and however the
// rows were batched.
func TestOrdinalsExactUpToCapacity(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, slots := range []int{4, 64, 1 << 12} {
		hs := rowsWithRepeats(rng, 3*slots/4)
		seen := map[uint64]uint32{}
		want := make([]uint32, len(hs))
		for j, h := range hs {
			want[j] = seen[h]
			seen[h]++
		}
		require.Len(t, seen, 3*slots/4)
		for _, batch := range []int{1, 7, 64, len(hs)} {
			require.Equal(t, want, ordinalRun(slots, hs, batch), "slots %d batch %d", slots, batch)
		}
	}
}

// Beyond the table, the rows of one hash still get distinct ordinals (so
// ids stay unique), the rows of the hashes in the table keep exact
// ordinals, and a hash first seen after the table filled gets 0 unless the
// filter reports it as seen: with 32 bits per entry and 2 hashes beyond
// the table per entry, under 1% of them.
func TestOrdinalsBeyondCapacity(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const slots = 1 << 10
	hs := rowsWithRepeats(rng, 1+3*slots/4+2*slots) // hash 0 is not in the table
	got := ordinalRun(slots, hs, 100)
	// the table holds the first 3/4 of slots distinct hashes but 0
	early := map[uint64]bool{0: true}
	for _, h := range hs {
		if len(early) <= 3*slots/4 {
			early[h] = true
		}
	}
	pairs := map[[2]uint64]bool{}
	seen := map[uint64]uint32{}
	var late, lateNonZero int
	for j, h := range hs {
		p := [2]uint64{h, uint64(got[j])}
		require.False(t, pairs[p], "row %d: ordinal %d of hash %x given twice", j, got[j], h)
		pairs[p] = true
		switch {
		case early[h]:
			require.Equal(t, seen[h], got[j], "row %d: a hash in the table is numbered exactly", j)
		case seen[h] == 0:
			late++
			if got[j] != 0 {
				lateNonZero++
			}
		}
		seen[h]++
	}
	require.Equal(t, 2*slots, late)
	require.Less(t, lateNonZero, late/100, "first rows of hashes beyond the table numbered other than 0")
	t.Logf("%d of %d hashes beyond the table numbered other than 0 at their first row", lateNonZero, late)
}
