package ledger_test

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
)

// TestIcebergBucketMatchesIceberg: the migration's iceberg_bucket equals
// iceberg-go's bucket transform for random values of every overload
// (smallint, integer, bigint, date, time, timestamp, timestamptz, text,
// bytea) including zero, negatives, extremes, empty and multi-byte
// strings, and NULL, for several bucket counts; it is called schema
// qualified from a session whose search_path does not hold the schema.
func TestIcebergBucketMatchesIceberg(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	_, err := ledger.Migrate(ctx, pool, "bucket schema")
	require.NoError(t, err)
	fn := pgx.Identifier{"bucket schema"}.Sanitize() + ".iceberg_bucket"
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 3000

	// check runs fn over vals (a Postgres array built by sqlArray from $1)
	// and compares each result with iceberg-go's, valid[i] false = NULL.
	check := func(name string, src iceberg.Type, sqlArray string, vals any, goVals []any) {
		t.Helper()
		for _, nb := range []int{1, 7, 16, math.MaxInt32} {
			rows, err := pool.Query(ctx, `SELECT `+fn+`(v, $2) FROM unnest(`+sqlArray+`) WITH ORDINALITY AS t(v, i) ORDER BY i`, vals, nb)
			require.NoError(t, err)
			got, err := pgx.CollectRows(rows, pgx.RowTo[*int32])
			require.NoError(t, err)
			require.Len(t, got, len(goVals))
			tr := iceberg.BucketTransform{NumBuckets: nb}.Transformer(src)
			for i, v := range goVals {
				want := tr(v)
				if !want.Valid {
					require.Nil(t, got[i], "%s %v: NULL", name, v)
					continue
				}
				require.NotNil(t, got[i], "%s %v", name, v)
				require.Equal(t, want.Val, *got[i], "%s %#v bucket[%d]", name, v, nb)
			}
		}
	}

	// integers: bigint, integer, smallint (iceberg int for the last two)
	i64 := []*int64{nil}
	for _, v := range []int64{0, 1, -1, 34, math.MaxInt64, math.MinInt64, math.MaxInt32, math.MinInt32, math.MaxUint32, 1 << 32} {
		i64 = append(i64, &v)
	}
	for range n {
		v := int64(rng.Uint64())
		if rng.IntN(2) == 0 {
			v >>= rng.IntN(63)
		}
		i64 = append(i64, &v)
	}
	check("bigint", iceberg.PrimitiveTypes.Int64, "$1::bigint[]", i64, anyOf(i64, func(v int64) any { return v }))

	i32 := []*int32{nil}
	for _, v := range []int32{0, 1, -1, 34, math.MaxInt32, math.MinInt32} {
		i32 = append(i32, &v)
	}
	for range n {
		v := int32(rng.Uint32())
		i32 = append(i32, &v)
	}
	check("integer", iceberg.PrimitiveTypes.Int32, "$1::integer[]", i32, anyOf(i32, func(v int32) any { return v }))

	i16 := []*int16{nil}
	for _, v := range []int16{0, 1, -1, math.MaxInt16, math.MinInt16} {
		i16 = append(i16, &v)
	}
	for range n / 3 {
		v := int16(rng.Uint32())
		i16 = append(i16, &v)
	}
	check("smallint", iceberg.PrimitiveTypes.Int32, "$1::smallint[]", i16, anyOf(i16, func(v int16) any { return int32(v) }))

	// date: days since 1970-01-01 (Postgres' range is 4713 BC to 5874897 AD)
	days := []*int32{nil}
	for _, v := range []int32{0, 1, -1, -2_440_588, 2_000_000} {
		days = append(days, &v)
	}
	for range n {
		v := rng.Int32N(4_000_000) - 2_000_000
		days = append(days, &v)
	}
	check("date", iceberg.PrimitiveTypes.Date, "(SELECT array_agg(DATE '1970-01-01' + d ORDER BY i) FROM unnest($1::integer[]) WITH ORDINALITY AS x(d, i))",
		days, anyOf(days, func(v int32) any { return iceberg.Date(v) }))

	// time: microseconds since midnight
	tms := []*int64{nil}
	for _, v := range []int64{0, 1, 86_399_999_999} {
		tms = append(tms, &v)
	}
	for range n {
		v := rng.Int64N(86_400_000_000)
		tms = append(tms, &v)
	}
	check("time", iceberg.PrimitiveTypes.Time, "(SELECT array_agg(TIME '00:00' + m * INTERVAL '1 microsecond' ORDER BY i) FROM unnest($1::bigint[]) WITH ORDINALITY AS x(m, i))",
		tms, anyOf(tms, func(v int64) any { return iceberg.Time(v) }))

	// timestamp and timestamptz: microseconds since the epoch, years -4000 to 9999
	ts := []*time.Time{nil}
	for _, v := range []time.Time{time.Unix(0, 0), time.Unix(0, 1000), time.Unix(0, -1000), time.Date(-4000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)} {
		ts = append(ts, &v)
	}
	lo, hi := time.Date(-4000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro(), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for range n {
		v := time.UnixMicro(lo + rng.Int64N(hi-lo)).UTC()
		ts = append(ts, &v)
	}
	micros := func(v time.Time) any { return iceberg.Timestamp(v.UnixMicro()) }
	check("timestamptz", iceberg.PrimitiveTypes.TimestampTz, "$1::timestamptz[]", ts, anyOf(ts, micros))
	check("timestamp", iceberg.PrimitiveTypes.Timestamp, "$1::timestamp[]", ts, anyOf(ts, micros))

	// text (UTF-8 bytes) and bytea
	runes := []rune("abcxyzAZ09 -_é漢字ßø€𝄞😀")
	strs := []*string{nil}
	for _, v := range []string{"", "a", "ab", "abc", "abcd", "iceberg", "漢", "😀", strings.Repeat("é", 100)} {
		strs = append(strs, &v)
	}
	for range n {
		var b strings.Builder
		for range rng.IntN(24) {
			b.WriteRune(runes[rng.IntN(len(runes))])
		}
		v := b.String()
		strs = append(strs, &v)
	}
	check("text", iceberg.PrimitiveTypes.String, "$1::text[]", strs, anyOf(strs, func(v string) any { return v }))
	check("varchar", iceberg.PrimitiveTypes.String, "$1::varchar[]", strs, anyOf(strs, func(v string) any { return v }))

	bins := [][]byte{nil, {}, {0}, {0, 1, 2, 3}, {0xff, 0xff, 0xff, 0xff, 0xff}}
	for range n {
		v := make([]byte, rng.IntN(40))
		for i := range v {
			v[i] = byte(rng.Uint32())
		}
		bins = append(bins, v)
	}
	goBins := make([]any, len(bins))
	for i, v := range bins {
		if v != nil {
			goBins[i] = v
		}
	}
	check("bytea", iceberg.PrimitiveTypes.Binary, "$1::bytea[]", bins, goBins)
}

// anyOf maps pointers to the values iceberg-go hashes, nil to nil.
func anyOf[T any](vs []*T, f func(T) any) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		if v != nil {
			out[i] = f(*v)
		}
	}
	return out
}
