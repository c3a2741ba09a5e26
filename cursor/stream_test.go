package cursor_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// With the default batch size, the first batch is small (a small result
// takes small buffers) and the following ones are DefaultBatchSize; all
// rows come, in order, with a bool, a string and nulls across the sizes.
func TestDefaultBatchSizes(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	const n = 2*cursor.DefaultBatchSize + 1500
	for _, mode := range []cursor.StreamMode{cursor.Direct, cursor.Staged} {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		s, err := cursor.Batches(ctx, pool, `SELECT g AS n, CASE WHEN g % 7 <> 0 THEN 'r' || g END AS s, g % 2 = 0 AS b
			FROM generate_series(1, $1::int) g`, []any{n}, &cursor.Options{Mode: mode, Allocator: mem})
		require.NoError(t, err)
		var sizes []int64
		next := int32(1)
		for b, err := range s.All() {
			require.NoError(t, err)
			sizes = append(sizes, b.NumRows())
			ns, ss, bs := b.Column(0).(*array.Int32), b.Column(1).(*array.String), b.Column(2).(*array.Boolean)
			for i := range ns.Len() {
				require.Equal(t, next, ns.Value(i))
				require.Equal(t, next%7 == 0, ss.IsNull(i))
				if next%7 != 0 {
					require.Equal(t, "r"+strconv.Itoa(int(next)), ss.Value(i))
				}
				require.Equal(t, next%2 == 0, bs.Value(i))
				next++
			}
			b.Release()
		}
		require.Equal(t, []int64{1024, cursor.DefaultBatchSize, cursor.DefaultBatchSize, n - 1024 - 2*cursor.DefaultBatchSize}, sizes, "%s", mode)
		mem.AssertSize(t, 0)
	}
}

func TestBatchSizes(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	const size = 100
	cases := []struct {
		rows  int
		sizes []int64
	}{
		{0, nil},
		{1, []int64{1}},
		{size, []int64{size}},
		{size + 1, []int64{size, 1}},
		{3*size - 1, []int64{size, size, size - 1}},
	}
	for _, mode := range []cursor.StreamMode{cursor.Direct, cursor.Staged} {
		for _, c := range cases {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			s, err := cursor.Batches(ctx, pool, `SELECT g AS n, 'r' || g AS s FROM generate_series(1, $1::int) g`, []any{c.rows},
				&cursor.Options{Mode: mode, BatchSize: size, Allocator: mem})
			require.NoError(t, err)
			require.Equal(t, 2, s.Schema().NumFields())
			var sizes []int64
			next := int32(1)
			for b, err := range s.All() {
				require.NoError(t, err)
				sizes = append(sizes, b.NumRows())
				ns := b.Column(0).(*array.Int32)
				for i := range ns.Len() {
					require.Equal(t, next, ns.Value(i), "rows come in query order")
					next++
				}
				b.Release()
			}
			require.Equal(t, c.sizes, sizes, "%s %d rows", mode, c.rows)
			mem.AssertSize(t, 0)

			n := 0
			for v, err := range cursor.Rows(ctx, pool, `SELECT g FROM generate_series(1, $1::int) g`, []any{c.rows}, pgx.RowTo[int32], &cursor.Options{Mode: mode}) {
				require.NoError(t, err)
				n++
				require.EqualValues(t, n, v)
			}
			require.Equal(t, c.rows, n)
		}
	}
	require.Equal(t, int32(0), pool.Stat().AcquiredConns())
}

func TestSingleUse(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s, err := cursor.Batches(ctx, pool, `SELECT 1 AS a`, nil, &cursor.Options{Allocator: mem})
	require.NoError(t, err)
	seq := s.All()
	for b, err := range seq {
		require.NoError(t, err)
		b.Release()
	}
	for _, err := range seq {
		require.ErrorIs(t, err, cursor.ErrAlreadyConsumed)
	}
	for _, err := range s.All() {
		require.ErrorIs(t, err, cursor.ErrAlreadyConsumed)
	}
	rr := s.RecordReader()
	require.False(t, rr.Next())
	require.ErrorIs(t, rr.Err(), cursor.ErrAlreadyConsumed)
	rr.Release()

	rows := cursor.Rows(ctx, pool, `SELECT 1`, nil, pgx.RowTo[int32], nil)
	n := 0
	for _, err := range rows {
		require.NoError(t, err)
		n++
	}
	require.Equal(t, 1, n)
	errs := 0
	for _, err := range rows {
		require.ErrorIs(t, err, cursor.ErrAlreadyConsumed)
		errs++
	}
	require.Equal(t, 1, errs, "a second range is an error, not an empty stream")
}

func TestLazyStart(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `CREATE TABLE hits (n int)`)
	require.NoError(t, err)
	count := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM hits`).Scan(&n))
		return n
	}
	const q = `INSERT INTO hits VALUES (1) RETURNING n`
	seq := cursor.Rows(ctx, pool, q, nil, pgx.RowTo[int32], nil)
	s, err := cursor.Batches(ctx, pool, q, nil, nil) // describes only
	require.NoError(t, err)
	require.Equal(t, 0, count(), "nothing runs before ranging")
	for _, err := range seq {
		require.NoError(t, err)
	}
	require.Equal(t, 1, count(), "direct mode commits its own compute transaction when the stream completes")
	for b, err := range s.All() {
		require.NoError(t, err)
		b.Release()
	}
	require.Equal(t, 2, count())
	// An early break rolls the compute transaction back.
	for range cursor.Rows(ctx, pool, q, nil, pgx.RowTo[int32], nil) {
		break
	}
	require.Equal(t, 2, count())
}

// TestStagedCommitsBeforeStreaming checks, from another session while the
// first batch is in the consumer's hands, whether the compute transaction
// (whose id the query returns) has committed: in staged mode it has, in
// direct mode it is still in progress.
func TestStagedCommitsBeforeStreaming(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	want := map[cursor.StreamMode]string{cursor.Staged: "committed", cursor.Direct: "in progress"}
	for mode, status := range want {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		s, err := cursor.Batches(ctx, pool, `SELECT txid_current() AS xid, g FROM generate_series(1, 50000) g`, nil,
			&cursor.Options{Mode: mode, BatchSize: 1000, Allocator: mem})
		require.NoError(t, err)
		first := true
		for b, err := range s.All() {
			require.NoError(t, err)
			if first {
				first = false
				xid := b.Column(0).(*array.Int64).Value(0)
				var got string
				require.NoError(t, pool.QueryRow(ctx, `SELECT txid_status($1)`, xid).Scan(&got))
				require.Equal(t, status, got, mode.String())
			}
			b.Release()
		}
		mem.AssertSize(t, 0)
	}
	require.Equal(t, int32(0), pool.Stat().AcquiredConns())
}

func TestDirectInCallerTx(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `CREATE TABLE src (n int); INSERT INTO src VALUES (1), (2)`)
	require.NoError(t, err)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	// The stream sees the caller's uncommitted writes and leaves its tx open.
	_, err = tx.Exec(ctx, `INSERT INTO src VALUES (3)`)
	require.NoError(t, err)
	sum := int32(0)
	for v, err := range cursor.Rows(ctx, tx, `SELECT n FROM src`, nil, pgx.RowTo[int32], nil) {
		require.NoError(t, err)
		sum += v
	}
	require.EqualValues(t, 6, sum)
	require.Equal(t, byte('T'), tx.Conn().PgConn().TxStatus())
	require.NoError(t, tx.Rollback(ctx))
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM src`).Scan(&n))
	require.Equal(t, 2, n)
}
