package changelog

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTrimmedPast(t *testing.T) {
	snap := func(s string) snapshot {
		p, err := parsePosition(Position(s))
		require.NoError(t, err)
		return p
	}
	for _, c := range []struct {
		pos, trim string
		below     uint64
		want      bool
	}{
		{"100:100:", "120:120:", 0, false},             // never trimmed
		{"100:100:", "120:120:", 100, false},           // everything below 100 is visible in pos
		{"100:100:", "120:120:", 101, true},            // 100 committed before the trim, pos misses it
		{"90:100:90", "120:120:", 95, true},            // 90 was in flight at pos, committed before the trim
		{"90:100:90", "90:120:90", 95, false},          // 90 still in flight at the trim: not deleted
		{"90:100:90", "90:120:90,100,101", 102, false}, // 100, 101 in flight at the trim too
		{"90:100:90", "90:120:90,100", 102, true},      // 101 committed before the trim
		{"90:130:90", "90:120:90", 125, false},         // pos is later than the trim
		{"pg:50:60:50", "55:60:55", 58, true},          // 50 < the trim's xmin: visible to it
	} {
		require.Equal(t, c.want, trimmedPast(snap(c.pos), c.below, snap(c.trim)), "%+v", c)
	}
	_, err := parsePosition("5:4:")
	require.ErrorIs(t, err, ErrInvalid)
	_, err = parsePosition("1:4:7")
	require.ErrorIs(t, err, ErrInvalid)
}
