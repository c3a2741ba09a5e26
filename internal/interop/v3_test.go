package interop

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// TestDuckDBV3DeletionVectors documents what DuckDB makes of a format v3
// table whose merges wrote deletion vectors. The DuckDB linked here (the
// Go bindings' library) has no Iceberg extension (it is downloaded on
// first use, and the test runs offline), and its Parquet reader has no
// Puffin reader: it reads the data files whole, so the rows a deletion
// vector removed read as live. iceberg-go's scan applies the vectors and
// returns the right rows. Once maintenance has compacted the vectors away
// (every file rewritten with its deletes applied), DuckDB reads every
// value right again.
func TestDuckDBV3DeletionVectors(t *testing.T) {
	e := newEnv(t)
	const id = "v3_snap"
	src1 := `SELECT g AS id, 'v1-' || g AS txt, (g * 1.25)::numeric(10,2) AS amount FROM generate_series(1, 200) g`
	// 10 keys leave, 8 rows change, 5 keys arrive
	src2 := `SELECT g AS id, CASE WHEN g % 25 = 0 THEN 'v2-' ELSE 'v1-' END || g AS txt, (g * 1.25)::numeric(10,2) AS amount
		FROM generate_series(11, 205) g`
	snap := writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "v3_src", Target: id, Key: []string{"id"}}
	e.load("v3_src", src1)
	e.write(snap)
	tbl, err := e.lw.Facade.LoadTable(e.ctx, id)
	require.NoError(t, err)
	require.Equal(t, 3, tbl.Metadata().Version())
	e.check(id, src1) // no deletes yet: plain Parquet

	e.load("v3_src", src2)
	e.write(snap)
	tbl, err = e.lw.Facade.LoadTable(e.ctx, id)
	require.NoError(t, err)
	tasks, err := tbl.Scan().PlanFiles(e.ctx)
	require.NoError(t, err)
	dvs := 0
	for _, task := range tasks {
		require.Empty(t, task.DeleteFiles, "no position delete files on v3")
		dvs += len(task.DeletionVectorFiles)
	}
	require.Equal(t, 1, dvs, "the merge wrote a deletion vector")

	// iceberg-go applies the vector: exactly the source's rows.
	var want, got []string
	rows, err := e.pool.Query(e.ctx, `SELECT id || ' ' || txt FROM (`+src2+`) q`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		want = append(want, s)
	}
	require.NoError(t, rows.Err())
	for rec, err := range e.lw.Facade.Scan(e.ctx, id, facade.ScanOptions{Columns: []string{"id", "txt"}}) {
		require.NoError(t, err)
		for i := range int(rec.NumRows()) {
			got = append(got, rec.Column(0).ValueStr(i)+" "+rec.Column(1).ValueStr(i))
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	require.Equal(t, want, got, "iceberg-go's scan")

	// DuckDB's read_parquet of the data files: the 18 rows the vector
	// removed (10 gone, 8 old versions) read as live.
	var n int
	require.NoError(t, e.duck.QueryRowContext(e.ctx, `SELECT count(*) FROM `+readParquet(e.dataFiles(id))).Scan(&n))
	require.Equal(t, len(want)+18, n, "DuckDB without the Iceberg extension does not apply deletion vectors")

	// Compaction applies the vector: DuckDB reads the right rows again.
	rep, err := e.lw.Facade.MaintainWith(e.ctx, id, facade.Lifecycle{CompactMinFiles: 2, KeepLast: 1, FileGrace: -1, EveryCommits: 1})
	require.NoError(t, err)
	require.Positive(t, rep.CompactedFiles)
	e.check(id, src2)
}

// TestDuckDBV3Decimals: a format v3 table's data files store decimals of
// precision <= 18 as v2's do (INT64, and INT32 up to precision 9), and
// DuckDB reads every value back.
func TestDuckDBV3Decimals(t *testing.T) {
	e := newEnv(t)
	const id = "v3_decimals"
	e.writeDecimals(id, facade.Replace, 1, 100)
	tbl, err := e.lw.Facade.LoadTable(e.ctx, id)
	require.NoError(t, err)
	require.Equal(t, 3, tbl.Metadata().Version())
	require.Equal(t, []string{"amount INT64", "small INT32"}, e.decimalTypes(id))
	e.check(id, decimalsSQL(1, 100))
}

// TestDuckDBCompactedDecimals: compaction writes the files as a write
// does, decimals of precision <= 18 as INT64 and INT32, on format v2 and
// v3 (where the files also hold the row lineage columns), and DuckDB
// reads every value of the compacted table back.
func TestDuckDBCompactedDecimals(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{"compacted_decimals", "v3_compacted_decimals"} {
		t.Run(id, func(t *testing.T) {
			e.t = t
			for lo := int64(1); lo <= 100; lo += 25 {
				e.writeDecimals(id, facade.Append, lo, lo+24)
			}
			require.Len(t, e.dataFiles(id), 4)
			rep, err := e.lw.Facade.MaintainWith(e.ctx, id, facade.Lifecycle{CompactMinFiles: 2, KeepLast: 1, FileGrace: -1, EveryCommits: 1})
			require.NoError(t, err)
			require.Equal(t, 4, rep.CompactedFiles)
			require.Len(t, e.dataFiles(id), 1)
			require.Equal(t, []string{"amount INT64", "small INT32"}, e.decimalTypes(id))
			e.check(id, decimalsSQL(1, 100))
		})
	}
}

// writeDecimals writes the rows lo..hi of decimalsSQL to dataset id with
// the facade (the Dispatcher's numerics arrive as decimal(38,18)).
func (e *env) writeDecimals(id string, mode facade.WriteMode, lo, hi int64) {
	e.t.Helper()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "amount", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}, Nullable: true},
		{Name: "small", Type: &arrow.Decimal128Type{Precision: 9, Scale: 3}, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := lo; i <= hi; i++ {
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
	_, err := e.lw.Facade.Write(e.ctx, facade.Target{DatasetID: id}, facade.WriteRequest{Mode: mode, Schema: sc,
		Rows: func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }})
	require.NoError(e.t, err)
}

// decimalsSQL is the rows lo..hi of writeDecimals in Postgres.
func decimalsSQL(lo, hi int64) string {
	return `SELECT g AS id, CASE WHEN g % 10 = 0 THEN NULL ELSE ((g::bigint * 123456789 - 5000000000) / 100.0)::numeric(12,2) END AS amount,
		(-g * 999999 / 1000.0)::numeric(9,3) AS small FROM generate_series(` + strconv.FormatInt(lo, 10) + `, ` + strconv.FormatInt(hi, 10) + `) g`
}

// decimalTypes is the Parquet physical type of the decimal columns of
// writeDecimals in the current data files of id, as DuckDB reads them.
func (e *env) decimalTypes(id string) []string {
	e.t.Helper()
	files := e.dataFiles(id)
	quoted := make([]string, len(files))
	for i, f := range files {
		quoted[i] = "'" + strings.ReplaceAll(f, "'", "''") + "'"
	}
	rows, err := e.duck.QueryContext(e.ctx, `SELECT DISTINCT name, type FROM parquet_schema([`+strings.Join(quoted, ", ")+
		`]) WHERE name IN ('amount', 'small') ORDER BY name`)
	require.NoError(e.t, err)
	defer rows.Close()
	var got []string
	for rows.Next() {
		var name, typ string
		require.NoError(e.t, rows.Scan(&name, &typ))
		got = append(got, name+" "+typ)
	}
	require.NoError(e.t, rows.Err())
	return got
}
