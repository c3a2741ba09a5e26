package cursor_test

import (
	"context"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// decodeOne streams `SELECT <expr>` with $1 = in through Batches and returns
// the one value's column, or the stream's error.
func decodeOne(t *testing.T, pool *pgxpool.Pool, expr, in string) (arrow.Array, func(), error) {
	t.Helper()
	return decodeOneWith(t, pool, expr, in, cursor.NumericDefault)
}

// decodeOneWith is decodeOne under a numeric policy.
func decodeOneWith(t *testing.T, pool *pgxpool.Pool, expr, in string, policy cursor.NumericPolicy) (arrow.Array, func(), error) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	s, err := cursor.Batches(context.Background(), pool, `SELECT `+expr, []any{in}, &cursor.Options{Allocator: mem, Numeric: policy})
	require.NoError(t, err)
	var col arrow.Array
	var batch arrow.RecordBatch
	var serr error
	for b, err := range s.All() {
		if err != nil {
			serr = err
			continue
		}
		batch, col = b, b.Column(0)
	}
	return col, func() {
		if batch != nil {
			batch.Release()
		}
		mem.AssertSize(t, 0)
	}, serr
}

// FuzzNumericDecode checks the binary numeric decoder against Postgres'
// own text output: numeric(p,s) values decode to exactly the digits
// Postgres prints; unconstrained numerics decode exactly at scale 18 or
// fail with ErrOutOfRange under NumericStrict, and by default decode
// rounded half-even to scale 18 (or fail only when the integer part does
// not fit).
func FuzzNumericDecode(f *testing.F) {
	// The value is hi followed by the digits of lo, times 10^exp: always a
	// number, up to 39 digits, of any scale.
	f.Add(int64(0), uint64(0), int8(0), uint8(12), uint8(2))
	f.Add(int64(-1), uint64(0), int8(-2), uint8(12), uint8(2))
	f.Add(int64(99999999999999999), uint64(999999999999999999), int8(-18), uint8(38), uint8(18))
	f.Add(int64(1), uint64(0), int8(21), uint8(38), uint8(0))
	f.Add(int64(1), uint64(0), int8(-19), uint8(38), uint8(18))
	f.Add(int64(-1234567890123456789), uint64(1234567890123456789), int8(-8), uint8(38), uint8(8))
	f.Add(int64(1), uint64(5), int8(-2), uint8(2), uint8(1))
	f.Add(int64(1), uint64(5), int8(-19), uint8(38), uint8(18))  // a tie at scale 18, to even (down)
	f.Add(int64(-2), uint64(5), int8(-20), uint8(38), uint8(18)) // a tie at scale 18 over an odd digit
	f.Add(int64(99999999999999999), uint64(9999999999999999995), int8(-19), uint8(38), uint8(18))
	pool := pgtest.Pool(f)
	f.Fuzz(func(t *testing.T, hi int64, lo uint64, exp int8, pb, sb uint8) {
		in := strconv.FormatInt(hi, 10) + strconv.FormatUint(lo, 10) + "e" + strconv.Itoa(int(exp))
		p := int(pb%38) + 1
		sc := int(sb) % (p + 1)
		typ := "numeric(" + strconv.Itoa(p) + "," + strconv.Itoa(sc) + ")"
		// Postgres decides what the value is (rounded to the type); skip
		// what it refuses.
		var text string
		if err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
			return tx.QueryRow(context.Background(), `SELECT $1::`+typ+`::text`, in).Scan(&text)
		}); err != nil || text == "NaN" {
			return
		}
		col, done, err := decodeOne(t, pool, `$1::text::`+typ, in)
		require.NoError(t, err, "%s %q", typ, in)
		require.Equal(t, text, col.(*array.Decimal128).Value(0).ToString(int32(sc)), "%s %q", typ, in)
		done()

		// Unconstrained, strict: exact at scale 18, or out of range.
		var exact string
		require.NoError(t, pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
			return tx.QueryRow(context.Background(), `SELECT round($1::text::numeric, 18)::text`, text).Scan(&exact)
		}))
		col, done, err = decodeOneWith(t, pool, `$1::text::numeric`, text, cursor.NumericStrict)
		if err != nil {
			done()
			require.ErrorIs(t, err, cursor.ErrOutOfRange, "%q", text)
		} else {
			require.Equal(t, exact, col.(*array.Decimal128).Value(0).ToString(18), "%q", text)
			done()
		}

		// Unconstrained, default: rounded half-even at scale 18 (a Go
		// reference on the digits Postgres prints), or out of range only
		// when the integer part does not fit.
		want, _ := roundHalfEven(text, 18)
		col, done, err = decodeOne(t, pool, `$1::text::numeric`, text)
		defer done()
		if err != nil {
			require.ErrorIs(t, err, cursor.ErrOutOfRange, "%q", text)
			require.GreaterOrEqual(t, len(strings.TrimPrefix(strings.Split(want, ".")[0], "-")), 21, "%q", text)
			return
		}
		require.Equal(t, want, col.(*array.Decimal128).Value(0).ToString(18), "%q", text)
	})
}

// roundHalfEven rounds the decimal text s (as Postgres prints a numeric) to
// scale fractional digits, ties to even, and reports whether it changed.
func roundHalfEven(s string, scale int) (string, bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	ip, fp, _ := strings.Cut(s, ".")
	changed := false
	keep, rest := fp, ""
	if len(fp) > scale {
		keep, rest = fp[:scale], fp[scale:]
	}
	keep += strings.Repeat("0", scale-len(keep))
	n, _ := new(big.Int).SetString(ip+keep, 10)
	if strings.Trim(rest, "0") != "" {
		changed = true
		tail := strings.TrimRight(rest[1:], "0")
		if rest[0] > '5' || (rest[0] == '5' && (tail != "" || n.Bit(0) == 1)) {
			n.Add(n, big.NewInt(1))
		}
	}
	d := n.String()
	if len(d) <= scale {
		d = strings.Repeat("0", scale-len(d)+1) + d
	}
	out := d[:len(d)-scale]
	if scale > 0 {
		out += "." + d[len(d)-scale:]
	}
	if neg && n.Sign() != 0 {
		out = "-" + out
	}
	return out, changed
}

// FuzzTimestampDecode checks the binary date/timestamp decoders against
// Postgres: the decoded microseconds (days) since the Unix epoch are the
// ones Postgres computes. (BC dates and years past 9999 are in the
// round-trip tests.)
func FuzzTimestampDecode(f *testing.F) {
	// The value is the instant m microseconds from 0001-01-01 (modulo the
	// years 1-9999), written out for Postgres to read.
	for _, m := range []int64{0, 1, 62135596800000000, 63082281599999999, 946684800000000 + 62135596800000000, -1, 1 << 62} {
		f.Add(m)
	}
	pool := pgtest.Pool(f)
	const span = 315537897600000000 // 0001-01-01 .. 10000-01-01 in microseconds
	f.Fuzz(func(t *testing.T, m int64) {
		m %= span
		if m < 0 {
			m += span
		}
		in := time.UnixMicro(m - 62135596800000000).UTC().Format("2006-01-02 15:04:05.000000")
		var micros, days int64
		var finite bool
		if err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
			return tx.QueryRow(context.Background(), `SELECT isfinite($1::timestamp),
				(extract(epoch FROM $1::timestamp) * 1000000)::bigint, ($1::timestamp::date - date '1970-01-01')`, in).
				Scan(&finite, &micros, &days)
		}); err != nil || !finite {
			return
		}
		col, done, err := decodeOne(t, pool, `$1::text::timestamp`, in)
		require.NoError(t, err, "%q", in)
		require.Equal(t, micros, int64(col.(*array.Timestamp).Value(0)), "%q", in)
		done()
		col, done, err = decodeOne(t, pool, `$1::text::timestamp::date`, in)
		require.NoError(t, err, "%q", in)
		require.Equal(t, days, int64(col.(*array.Date32).Value(0)), "%q", in)
		done()
	})
}

// TestTimestampDecodeExtremes: BC dates and the far future decode to the
// instants Postgres computes, up to the last Unix microsecond an int64
// holds; past it (Postgres goes on to 294276 AD) and ±infinity are an
// out-of-range error, never a wrapped value.
func TestTimestampDecodeExtremes(t *testing.T) {
	pool := pgtest.Pool(t)
	for _, in := range []string{"4713-01-01 BC", "0001-12-31 23:59:59.999999 BC", "10000-01-01", "294247-01-10 04:00:54.775807"} {
		var micros int64
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT (extract(epoch FROM $1::timestamp) * 1000000)::bigint`, in).Scan(&micros))
		if strings.HasPrefix(in, "294247") {
			micros = math.MaxInt64 // extract(epoch) rounds at this magnitude
		}
		col, done, err := decodeOne(t, pool, `$1::text::timestamp`, in)
		require.NoError(t, err, in)
		require.Equal(t, micros, int64(col.(*array.Timestamp).Value(0)), in)
		done()
	}
	for _, in := range []string{"294247-01-10 04:00:54.775808", "294276-12-31 23:59:59.999999", "infinity", "-infinity"} {
		for _, typ := range []string{"timestamp", "timestamptz"} {
			_, done, err := decodeOne(t, pool, `$1::text::`+typ, in)
			require.ErrorIs(t, err, cursor.ErrOutOfRange, "%s %s", typ, in)
			done()
		}
	}
}
