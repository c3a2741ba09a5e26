package interop

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// zooSQL is the type zoo without arrays: an unpartitioned output of it is
// written by the facade's own Parquet writer.
const zooSQL = `SELECT g AS id,
	CASE WHEN g % 7 = 0 THEN NULL ELSE g % 2 = 0 END AS b,
	(g * 100 - 10000)::smallint AS i2,
	CASE WHEN g % 7 = 1 THEN NULL ELSE (g * 1000003 - 100000000)::int END AS i4,
	g::bigint * 9007199254740993 * (1 - 2 * (g % 2)) AS i8,
	(ARRAY['NaN', 'Infinity', '-Infinity', '-0', '0', '1.5e300', '5e-324', NULL]::float8[])[1 + g % 8] AS f8,
	(ARRAY['NaN', 'Infinity', '-Infinity', '-0', '3.25', NULL]::real[])[1 + g % 6] AS f4,
	CASE WHEN g % 5 = 0 THEN NULL ELSE (g * 12.34 - 1000)::numeric(12,2) END AS dec_small,
	CASE WHEN g % 5 = 1 THEN NULL ELSE (g * 1234567890123456.0123456789 * (1 - 2 * (g % 2)))::numeric(38,10) END AS dec_big,
	(ARRAY['héllo', '日本語のテキスト', 'emoji 🎉👍🏽', '', E'tab\t"q" \\ ', NULL])[1 + g % 6] AS txt,
	(ARRAY[date '4713-01-01 BC', date '0001-01-01', date '1970-01-01', date '2000-02-29', date '9999-12-31', NULL])[1 + g % 6] AS d,
	(ARRAY[timestamp '0001-01-01 00:00:00', timestamp '1969-12-31 23:59:59.999999', timestamp '2024-02-29 12:00:00',
		timestamp '9999-12-31 23:59:59.999999', NULL])[1 + g % 5] AS ts,
	(ARRAY[timestamptz '0001-01-01 00:00:00+00', timestamptz '1900-01-01 00:00:00+05:30',
		timestamptz '9999-12-31 23:59:59.999999+00', NULL])[1 + g % 4] AS tz,
	(ARRAY[time '00:00:00', time '23:59:59.999999', time '12:34:56.789', NULL])[1 + g % 4] AS tm,
	CASE WHEN g % 9 = 0 THEN NULL ELSE md5(g::text)::uuid END AS u,
	CASE WHEN g % 9 = 1 THEN NULL WHEN g % 9 = 2 THEN '\x'::bytea ELSE decode(md5(g::text) || '00ff', 'hex') END AS bin,
	CASE WHEN g % 4 = 0 THEN NULL ELSE json_build_object('k', g, 's', 'é"x', 'a', json_build_array(1, 2.50, NULL)) END AS j,
	CASE WHEN g % 4 = 1 THEN NULL ELSE jsonb_build_object('k', g, 'nested', jsonb_build_object('z', true, 'f', 1.50)) END AS jb
FROM generate_series(1, 240) g`

// listSQL has array columns: its outputs go through iceberg-go's writer.
const listSQL = `SELECT g AS id,
	CASE WHEN g % 5 = 0 THEN NULL ELSE ARRAY[g, NULL, -g]::int[] END AS ia,
	CASE g % 3 WHEN 0 THEN ARRAY['a', '日本', NULL, ''] WHEN 1 THEN ARRAY[]::text[] ELSE NULL END AS ta,
	CASE g % 4 WHEN 0 THEN ARRAY['NaN', '-0', '-Infinity', 'Infinity']::float8[] WHEN 1 THEN ARRAY[]::float8[]
		WHEN 2 THEN NULL ELSE ARRAY[1.5, NULL]::float8[] END AS fa,
	CASE WHEN g % 6 = 0 THEN NULL ELSE ARRAY[g::bigint * 1000000000000] END AS la,
	(g * 0.01)::numeric(10,2) AS amount,
	'ünï-' || g AS txt
FROM generate_series(1, 150) g`

// partSQL feeds the partitioned outputs (day, bucket, truncate).
const partSQL = `SELECT g AS id,
	timestamp '2024-12-30 00:00:00' + g * interval '7 hours 13 minutes' AS ts,
	(ARRAY['ab', 'abc', 'b', 'ü', 'üx', '日本語', ''])[1 + g % 7] || (g % 3) AS txt,
	CASE WHEN g % 4 = 0 THEN NULL ELSE (g * 1.5)::float8 END AS v,
	(g * 3.33)::numeric(9,2) AS amount
FROM generate_series(1, 300) g`

// TestDuckDBReadsEveryTableKind writes each kind of table lakewrite
// writes, through the Dispatcher onto the Iceberg arm, and reads every
// value back with DuckDB's Parquet reader over the current snapshot's data
// files, compared with Postgres.
func TestDuckDBReadsEveryTableKind(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	t.Run("own writer: type zoo", func(t *testing.T) {
		e.t = t
		e.transform("zoo_native", zooSQL)
		e.check("zoo_native", zooSQL)
	})
	t.Run("iceberg-go writer: lists", func(t *testing.T) {
		e.t = t
		e.transform("zoo_lists", listSQL)
		e.check("zoo_lists", listSQL)
	})
	t.Run("iceberg-go writer: day, bucket, truncate partitions", func(t *testing.T) {
		e.t = t
		for _, id := range []string{"part_day", "part_bucket", "part_trunc"} {
			e.transform(id, partSQL)
			require.Greater(t, len(e.dataFiles(id)), 1, id)
			e.check(id, partSQL)
		}
	})

	// Replace history: each run rewrites the table; compaction and expiry
	// leave the last one readable.
	t.Run("replace history, compaction, expiry", func(t *testing.T) {
		e.t = t
		q := func(n int) string {
			return `SELECT g AS id, 'r' || g || '-' || ` + itoa(n) + ` AS txt, (g * ` + itoa(n) + `)::numeric(12,2) AS amount FROM generate_series(1, 100) g`
		}
		for n := 1; n <= 3; n++ {
			e.transform("replace_hist", q(n))
			e.check("replace_hist", q(n))
		}
		_, err := e.lw.Facade.MaintainWith(ctx, "replace_hist", facade.Lifecycle{KeepLast: 1, FileGrace: -1, EveryCommits: 1})
		require.NoError(t, err)
		rep, err := e.lw.Facade.MaintainWith(ctx, "replace_hist", facade.Lifecycle{KeepLast: 1, FileGrace: -1, EveryCommits: 1})
		require.NoError(t, err)
		require.Positive(t, rep.FilesDeleted, "expired files deleted")
		e.check("replace_hist", q(3))
	})

	// Append history with schema evolution: the second generation of the
	// source adds a column, which the files written before read as NULL;
	// compaction then rewrites the small files, and expiry drops the old
	// snapshots.
	t.Run("append history, schema evolution, compaction, expiry", func(t *testing.T) {
		e.t = t
		gen1 := `SELECT g AS id, 'a' || g AS txt, (g * 0.5)::float8 AS v FROM generate_series(1, 80) g`
		gen2 := `SELECT g AS id, 'b' || g AS txt, (g * 0.25)::float8 AS v, 'ex' || g AS extra, (g * 1.01)::numeric(8,2) AS amount FROM generate_series(81, 140) g`
		e.exec(`CREATE TABLE truth.append_hist (id int, txt text, v float8)`)
		deploy := writestrategy.Deploy{Mode: writestrategy.KindAppendAlways, Source: "append_src", Target: "append_hist"}
		for range 2 {
			e.load("append_src", gen1)
			e.write(deploy)
			e.exec(`INSERT INTO truth.append_hist ` + gen1)
		}
		e.check("append_hist", `SELECT * FROM truth.append_hist`)
		e.exec(`ALTER TABLE truth.append_hist ADD COLUMN extra text, ADD COLUMN amount numeric(8,2)`)
		for range 2 {
			e.load("append_src", gen2)
			e.write(deploy)
			e.exec(`INSERT INTO truth.append_hist ` + gen2)
		}
		e.check("append_hist", `SELECT * FROM truth.append_hist`)
		before := len(e.dataFiles("append_hist"))
		rep, err := e.lw.Facade.MaintainWith(ctx, "append_hist", facade.Lifecycle{CompactMinFiles: 2, KeepLast: 1, FileGrace: -1, EveryCommits: 1})
		require.NoError(t, err)
		require.Positive(t, rep.CompactedFiles)
		require.Less(t, len(e.dataFiles("append_hist")), before)
		e.check("append_hist", `SELECT * FROM truth.append_hist`)
		// One more append lands a file beside the compacted one (both of
		// the own writer).
		e.load("append_src", gen2)
		e.write(deploy)
		e.exec(`INSERT INTO truth.append_hist ` + gen2)
		e.check("append_hist", `SELECT * FROM truth.append_hist`)
	})

	// Tier B: deploys merging a source into an existing Iceberg table.
	t.Run("tier B: snapshot_replace and append_new", func(t *testing.T) {
		e.t = t
		src1 := `SELECT g AS id, 'v1-' || g AS txt, (g * 1.25)::numeric(10,2) AS amount, md5(g::text)::uuid AS u FROM generate_series(1, 120) g`
		// A small change (below the share of deleted rows from which
		// maintenance compacts the deletes away): 3 keys leave, 4 rows
		// change, 5 keys arrive.
		src2 := `SELECT g AS id, CASE WHEN g % 25 = 0 THEN 'v2-' ELSE 'v1-' END || g AS txt, (g * 1.25)::numeric(10,2) AS amount,
			md5(g::text)::uuid AS u FROM generate_series(4, 125) g`
		snap := writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "tierb_src", Target: "tierb_snap", Key: []string{"id"}}
		fresh := writestrategy.Deploy{Mode: writestrategy.KindAppendNew, Source: "tierb_src", Target: "tierb_new", Key: []string{"id"}}
		e.load("tierb_src", src1)
		e.write(snap)
		e.write(fresh)
		e.check("tierb_snap", src1)
		e.check("tierb_new", src1)
		e.load("tierb_src", src2)
		e.write(snap)
		e.write(fresh)
		// The merge deleted the changed rows and the keys that left by
		// position: DuckDB applies the delete files itself.
		require.Positive(t, e.deleteFiles("tierb_snap"), "snapshot_replace merged with position deletes")
		e.check("tierb_snap", src2)
		src3 := `SELECT g AS id, CASE WHEN g % 25 = 0 THEN 'v2-' WHEN g % 31 = 0 THEN 'v3-' ELSE 'v1-' END || g AS txt,
			(g * 1.25)::numeric(10,2) AS amount, md5(g::text)::uuid AS u FROM generate_series(6, 127) g WHERE g <> 50`
		e.load("tierb_src", src3)
		e.write(snap)
		require.Positive(t, e.deleteFiles("tierb_snap"))
		e.check("tierb_snap", src3)
		e.check("tierb_new", `SELECT * FROM (`+src1+`) a UNION ALL SELECT * FROM (`+src2+`) b WHERE b.id > 120`)
	})

	// The check can fail: a file whose __row_index uses BYTE_STREAM_SPLIT
	// (the opt-in, and the layout the own writer used to write by default)
	// is refused by DuckDB.
	t.Run("byte-stream-split __row_index is refused", func(t *testing.T) {
		e.t = t
		f, err := facade.New(e.lw.Catalog, &facade.Config{TableProperties: iceberg.Properties{facade.PropertyRowIndexEncoding: "byte-stream-split"}})
		require.NoError(t, err)
		// Decimals of precision <= 18 (written as INT64 and INT32), which
		// the Dispatcher's outputs do not produce (their numerics arrive
		// as decimal(38,18)).
		sc := arrow.NewSchema([]arrow.Field{
			{Name: "id", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			{Name: "amount", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}, Nullable: true},
			{Name: "small", Type: &arrow.Decimal128Type{Precision: 9, Scale: 3}, Nullable: true},
		}, nil)
		b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		defer b.Release()
		for i := int64(1); i <= 100; i++ {
			b.Field(0).(*array.Int32Builder).Append(int32(i))
			if i%10 == 0 {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.Decimal128Builder).Append(decimal128.FromI64(i*123456789 - 5_000_000_000))
			}
			b.Field(2).(*array.Decimal128Builder).Append(decimal128.FromI64(-i * 999_999))
		}
		rec := b.NewRecordBatch()
		defer rec.Release()
		_, err = f.Write(ctx, facade.Target{DatasetID: "forced_bss"}, facade.WriteRequest{Mode: facade.Replace, Schema: sc,
			Rows: func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }})
		require.NoError(t, err)
		_, err = e.duckRead("forced_bss", []string{"id", facade.ColRowIndex}, []int{asValue, asValue})
		require.Error(t, err)
		require.ErrorContains(t, err, "BYTE_STREAM_SPLIT")
		// The same rows under the default encoding read.
		_, err = e.lw.Facade.Write(ctx, facade.Target{DatasetID: "default_plain"}, facade.WriteRequest{Mode: facade.Replace, Schema: sc,
			Rows: func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }})
		require.NoError(t, err)
		e.check("default_plain", `SELECT g AS id, CASE WHEN g % 10 = 0 THEN NULL ELSE ((g::bigint * 123456789 - 5000000000) / 100.0)::numeric(12,2) END AS amount,
			(-g * 999999 / 1000.0)::numeric(9,3) AS small FROM generate_series(1, 100) g`)
		got, err := e.duckRead("default_plain", []string{"id", facade.ColRowIndex}, []int{asValue, asValue})
		require.NoError(t, err)
		require.Len(t, got, 100)
	})
}

func itoa(n int) string { return string(rune('0' + n)) }
