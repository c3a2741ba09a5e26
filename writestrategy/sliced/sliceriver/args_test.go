package sliceriver_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/writestrategy/sliced/sliceriver"
)

// TestArgsRoundTrip: SQL arguments cross JSON with their Go types; a type
// that would not is refused with ErrArgType.
func TestArgsRoundTrip(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	in := []any{nil, "s", true, 7, int32(-8), int64(1) << 60, 0.5, []string{"a", "b"}, []int64{1, 2}, []byte{0, 1}, at}
	enc, err := sliceriver.EncodeArgs(in)
	require.NoError(t, err)
	raw, err := json.Marshal(enc)
	require.NoError(t, err)
	var back []sliceriver.Arg
	require.NoError(t, json.Unmarshal(raw, &back))
	out, err := sliceriver.DecodeArgs(back)
	require.NoError(t, err)
	require.Equal(t, in, out)

	_, err = sliceriver.EncodeArgs([]any{uint8(1)})
	require.ErrorIs(t, err, sliceriver.ErrArgType)
	_, err = sliceriver.DecodeArgs([]sliceriver.Arg{{Type: "complex"}})
	require.ErrorIs(t, err, sliceriver.ErrArgType)
}
