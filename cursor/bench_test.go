package cursor_test

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/internal/pgtest"
)

const benchRows = 1_000_000

// benchShape is the benchmark table: id bigint, name text, amount
// numeric(12,2), ts timestamptz, flag bool, attrs jsonb (~60 bytes),
// category text (4 values).
const benchShape = `
CREATE TABLE bench AS
SELECT g::bigint AS id,
       'name-' || g AS name,
       ((g %% 1000000) / 100.0)::numeric(12,2) AS amount,
       timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second' AS ts,
       g %% 3 = 0 AS flag,
       jsonb_build_object('k', g, 'tag', 'abcdefghij', 'v', g %% 7, 'note', 'xyzxyzxyz') AS attrs,
       (ARRAY['red', 'green', 'blue', 'black'])[g %% 4 + 1] AS category
FROM generate_series(1, %d) g`

func benchPool(b *testing.B) *pgxpool.Pool {
	pool := pgtest.Pool(b)
	if _, err := pool.Exec(context.Background(), fmt.Sprintf(benchShape, benchRows)); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `VACUUM (FREEZE, ANALYZE) bench`); err != nil {
		b.Fatal(err)
	}
	return pool
}

// copyBinary is the baseline: pgx CopyTo of COPY (query) TO STDOUT
// (FORMAT binary), discarded.
func copyBinary(b *testing.B, pool *pgxpool.Pool, query string) time.Duration {
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	start := time.Now()
	tag, err := conn.Conn().PgConn().CopyTo(ctx, io.Discard, "COPY ("+query+") TO STDOUT (FORMAT binary)")
	if err != nil {
		b.Fatal(err)
	}
	if tag.RowsAffected() != benchRows {
		b.Fatalf("COPY read %d rows", tag.RowsAffected())
	}
	return time.Since(start)
}

// BenchmarkStream compares each way of reading the benchmark table with
// the COPY-binary baseline measured in the same iteration. Run with
//
//	go test -run '^$' -bench Stream -benchtime 1x ./cursor/
func BenchmarkStream(b *testing.B) {
	pool := benchPool(b)
	const query = `SELECT id, name, amount, ts, flag, attrs, category FROM bench`
	ctx := context.Background()
	copyBinary(b, pool, query) // warm the cache

	run := func(b *testing.B, read func() int) {
		var copyDur, dur time.Duration
		for b.Loop() {
			b.StopTimer()
			copyDur += copyBinary(b, pool, query)
			b.StartTimer()
			start := time.Now()
			if n := read(); n != benchRows {
				b.Fatalf("read %d rows", n)
			}
			dur += time.Since(start)
		}
		rate := float64(benchRows*b.N) / dur.Seconds()
		copyRate := float64(benchRows*b.N) / copyDur.Seconds()
		b.ReportMetric(rate, "rows/s")
		b.ReportMetric(copyRate, "copy-rows/s")
		b.ReportMetric(rate/copyRate, "x-copy")
	}
	batches := func(mode cursor.StreamMode, size int) func() int {
		return func() int {
			s, err := cursor.Batches(ctx, pool, query, nil, &cursor.Options{Mode: mode, BatchSize: size})
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for rec, err := range s.All() {
				if err != nil {
					b.Fatal(err)
				}
				n += int(rec.NumRows())
				rec.Release()
			}
			return n
		}
	}
	b.Run("batches/direct", func(b *testing.B) { run(b, batches(cursor.Direct, 0)) })
	b.Run("batches/staged", func(b *testing.B) { run(b, batches(cursor.Staged, 0)) })
	b.Run("batches/direct/size=4096", func(b *testing.B) { run(b, batches(cursor.Direct, 4096)) })
	b.Run("batches/direct/size=65536", func(b *testing.B) { run(b, batches(cursor.Direct, 65536)) })
	b.Run("raw-values", func(b *testing.B) {
		// Reference: the same query read with pgx RawValues and no decoding.
		run(b, func() int {
			rows, err := pool.Query(ctx, query, pgx.QueryResultFormats{1, 1, 1, 1, 1, 1, 1})
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for rows.Next() {
				_ = rows.RawValues()
				n++
			}
			if err := rows.Err(); err != nil {
				b.Fatal(err)
			}
			return n
		})
	})
	b.Run("declare-fetch-10000", func(b *testing.B) {
		// The alternative direct design, measured for the record: a
		// server-side cursor read with FETCH 10000, raw values only (no
		// decoding), an upper bound for that design.
		run(b, func() int {
			tx, err := pool.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, `DECLARE c NO SCROLL CURSOR FOR `+query); err != nil {
				b.Fatal(err)
			}
			n := 0
			formats := pgx.QueryResultFormats{1, 1, 1, 1, 1, 1, 1}
			for {
				rows, err := tx.Query(ctx, `FETCH 10000 FROM c`, formats)
				if err != nil {
					b.Fatal(err)
				}
				got := 0
				for rows.Next() {
					_ = rows.RawValues()
					got++
				}
				if err := rows.Err(); err != nil {
					b.Fatal(err)
				}
				n += got
				if got == 0 {
					return n
				}
			}
		})
	})
	b.Run("rows/scan-4-of-7-columns", func(b *testing.B) {
		run(b, func() int {
			n := 0
			q := `SELECT id, name, flag, category FROM bench`
			for _, err := range cursor.Rows(ctx, pool, q, nil, pgx.RowToStructByPos[struct {
				ID       int64
				Name     string
				Flag     bool
				Category string
			}], nil) {
				if err != nil {
					b.Fatal(err)
				}
				n++
			}
			return n
		})
	})
}
