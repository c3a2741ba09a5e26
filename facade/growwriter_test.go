package facade

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// What goes through a growWriter comes out whole and in order, whatever
// the sizes of the writes; its buffer stays within maxFileBuffer.
func TestGrowWriter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, maxWrite := range []int{1, 100, 10 << 10, 300 << 10} {
		var out, want bytes.Buffer
		g := &growWriter{out: &out}
		for range 2000 {
			p := make([]byte, rng.IntN(maxWrite)+1)
			for i := range p {
				p[i] = byte(rng.Uint32())
			}
			n, err := g.Write(p)
			require.NoError(t, err)
			require.Equal(t, len(p), n)
			want.Write(p)
			require.LessOrEqual(t, cap(g.buf), maxFileBuffer)
		}
		require.NoError(t, g.Flush())
		require.Equal(t, want.Bytes(), out.Bytes(), "max write %d", maxWrite)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestGrowWriterError(t *testing.T) {
	g := &growWriter{out: failingWriter{}}
	_, err := g.Write(make([]byte, 10))
	require.NoError(t, err, "buffered")
	require.ErrorContains(t, g.Flush(), "disk full")
	_, err = g.Write(make([]byte, maxFileBuffer+1))
	require.ErrorContains(t, err, "disk full")
}
