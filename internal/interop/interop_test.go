package interop

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const writerID = "interop.writer"

// env is one database, one lakewrite stack on it (Iceberg arm), and one
// in-memory DuckDB.
type env struct {
	t    *testing.T
	ctx  context.Context
	pool *pgxpool.Pool
	lw   *writestrategy.Stack
	duck *sql.DB
}

func newEnv(t *testing.T) *env {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	parts := map[string]facade.Partitioning{
		"part_day":    {Fields: []facade.PartitionField{{Column: "ts", Transform: "day"}}},
		"part_bucket": {Fields: []facade.PartitionField{{Column: "id", Transform: "bucket[4]"}}},
		"part_trunc":  {Fields: []facade.PartitionField{{Column: "txt", Transform: "truncate[2]"}}},
	}
	lw, err := writestrategy.Open(ctx, pool, &writestrategy.OpenConfig{
		Warehouse: t.TempDir(), Migrate: true,
		Facade: &facade.Config{PartitionFor: func(id string) (facade.Partitioning, bool) {
			p, ok := parts[id]
			return p, ok
		}, FormatVersionFor: func(id string) (int, bool) {
			return 3, strings.HasPrefix(id, "v3_") // format v3 datasets
		}},
	})
	require.NoError(t, err)
	require.NoError(t, lw.Flags.SetWriter(ctx, sink.WriterFlags{WriterID: writerID, Default: sink.Iceberg, Max: sink.Iceberg}))
	duck, err := sql.Open("duckdb", "")
	require.NoError(t, err)
	t.Cleanup(func() { duck.Close() })
	_, err = pool.Exec(ctx, `CREATE SCHEMA truth`)
	require.NoError(t, err)
	e := &env{t: t, ctx: ctx, pool: pool, lw: lw, duck: duck}
	e.load("seed", `SELECT 1 AS x`)
	return e
}

// load replaces the row-store dataset id with the rows of selectSQL.
func (e *env) load(id, selectSQL string) {
	e.t.Helper()
	_, err := e.lw.Ledger.EnsureDataset(e.ctx, id, id, nil)
	require.NoError(e.t, err)
	_, err = e.lw.Ledger.WithTx(e.ctx, ledger.OpenParams{DatasetID: id, WriterID: "seed", Sink: sink.Postgres, WriteMode: facade.Replace},
		func(ctx context.Context, tx pgx.Tx, in *ledger.Intent) (ledger.Outcome, error) {
			if _, err := tx.Exec(ctx, `DELETE FROM lakewrite.dataset_rows WHERE dataset_id = $1`, id); err != nil {
				return ledger.Outcome{}, err
			}
			n, cols, err := writestrategy.RowStoreInsert(ctx, tx, nil, id, in.ID, selectSQL)
			return ledger.Outcome{RowCount: n, CommittedAt: time.Now(), Schema: cols.JSON()}, err
		})
	require.NoError(e.t, err)
}

// write runs one strategy through the Dispatcher onto the Iceberg arm.
func (e *env) write(s writestrategy.WriteStrategy) {
	e.t.Helper()
	for _, out := range s.Outputs() {
		_, err := e.lw.Ledger.EnsureDataset(e.ctx, out, out, nil)
		require.NoError(e.t, err)
	}
	res, err := e.lw.Dispatcher.Write(e.ctx, writestrategy.Request{WriterID: writerID, Strategy: s})
	require.NoError(e.t, err)
	for _, r := range res {
		require.Contains(e.t, string(r.Sink), "iceberg", r.DatasetID)
	}
}

// transform replaces output with the rows of selectSQL.
func (e *env) transform(output, selectSQL string) {
	e.t.Helper()
	e.write(writestrategy.Transform{Output: output, Source: "seed", Steps: []writestrategy.Step{{Name: "out", SQL: selectSQL}}})
}

func (e *env) exec(sql string) {
	e.t.Helper()
	_, err := e.pool.Exec(e.ctx, sql)
	require.NoError(e.t, err, sql)
}

// dataFiles lists the data files of the dataset's current snapshot, as
// iceberg-go plans them.
func (e *env) dataFiles(id string) []string {
	e.t.Helper()
	tbl, err := e.lw.Facade.LoadTable(e.ctx, id)
	require.NoError(e.t, err)
	tasks, err := tbl.Scan().PlanFiles(e.ctx)
	require.NoError(e.t, err)
	var files []string
	for _, task := range tasks {
		files = append(files, localPath(e.t, task.File.FilePath()))
	}
	require.NotEmpty(e.t, files, id)
	return files
}

// liveRows is the FROM item of the dataset's current rows as DuckDB reads
// them on its own: read_parquet of the data files, and, when the snapshot
// has position deletes, read_parquet of the delete files, whose
// (file_path, pos) pairs DuckDB anti-joins with each data row's file and
// row number.
func (e *env) liveRows(id string) string {
	e.t.Helper()
	tbl, err := e.lw.Facade.LoadTable(e.ctx, id)
	require.NoError(e.t, err)
	tasks, err := tbl.Scan().PlanFiles(e.ctx)
	require.NoError(e.t, err)
	var files, dels, pairs []string
	seen := map[string]bool{}
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	for _, task := range tasks {
		local := localPath(e.t, task.File.FilePath())
		if !seen[local] {
			seen[local] = true
			files = append(files, local)
			pairs = append(pairs, "("+quote(local)+", "+quote(task.File.FilePath())+")")
		}
		require.Empty(e.t, task.EqualityDeleteFiles)
		require.Empty(e.t, task.DeletionVectorFiles)
		for _, d := range task.DeleteFiles {
			if p := localPath(e.t, d.FilePath()); !seen[p] {
				seen[p] = true
				dels = append(dels, p)
			}
		}
	}
	require.NotEmpty(e.t, files, id)
	if len(dels) == 0 {
		return readParquet(files)
	}
	quoted := make([]string, len(files))
	for i, f := range files {
		quoted[i] = quote(f)
	}
	dq := make([]string, len(dels))
	for i, f := range dels {
		dq[i] = quote(f)
	}
	return fmt.Sprintf(`(SELECT d.* EXCLUDE (filename, file_row_number)
		FROM read_parquet([%s], union_by_name = true, filename = true, file_row_number = true) d
		WHERE NOT EXISTS (SELECT 1 FROM read_parquet([%s]) x JOIN (VALUES %s) m(local, uri) ON x.file_path = m.uri
			WHERE m.local = d.filename AND x.pos = d.file_row_number))`,
		strings.Join(quoted, ", "), strings.Join(dq, ", "), strings.Join(pairs, ", "))
}

// deleteFiles counts the position delete files of the dataset's current
// snapshot.
func (e *env) deleteFiles(id string) int {
	e.t.Helper()
	tbl, err := e.lw.Facade.LoadTable(e.ctx, id)
	require.NoError(e.t, err)
	tasks, err := tbl.Scan().PlanFiles(e.ctx)
	require.NoError(e.t, err)
	seen := map[string]bool{}
	for _, task := range tasks {
		for _, d := range task.DeleteFiles {
			seen[d.FilePath()] = true
		}
	}
	return len(seen)
}

// localPath turns a data file location of the local warehouse into a
// path: a file:// URL is decoded, a bare path is taken as written.
func localPath(t *testing.T, loc string) string {
	if !strings.Contains(loc, "://") {
		return loc
	}
	u, err := url.Parse(loc)
	require.NoError(t, err, loc)
	require.Equal(t, "file", u.Scheme, loc)
	return u.Path
}

// textTypes are the Postgres types compared as their text form on both
// sides: numeric as fixed-scale decimal text, json as written, uuid
// canonical, time of day to the microsecond.
// Numerics are then compared by value (trailing zeros of the fraction
// trimmed), since a decimal column's scale may differ from the query's.
var textTypes = map[uint32]int{pgtype.NumericOID: asNumeric, pgtype.JSONOID: asText, pgtype.JSONBOID: asText,
	pgtype.UUIDOID: asText, pgtype.TimeOID: asText}

// How a column is compared.
const (
	asValue   = iota // decoded by each driver, then norm
	asText           // cast to text by each engine
	asNumeric        // cast to text, trailing fractional zeros trimmed
)

// duckRead reads the business columns cols of the dataset's current data
// files with DuckDB's read_parquet (columns matched by name; a file
// without a column reads NULL), cast to text where asText says.
func (e *env) duckRead(id string, cols []string, kinds []int) ([]string, error) {
	exprs := make([]string, len(cols))
	for i, c := range cols {
		exprs[i] = `"` + c + `"`
		if kinds[i] != asValue {
			exprs[i] = `CAST("` + c + `" AS VARCHAR)`
		}
	}
	q := fmt.Sprintf(`SELECT %s FROM %s`, strings.Join(exprs, ", "), e.liveRows(id))
	rows, err := e.duck.QueryContext(e.ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, normRow(vals, kinds))
	}
	return out, rows.Err()
}

// readParquet is DuckDB's read_parquet over files, columns matched by name
// (a file without a column reads NULL).
func readParquet(files []string) string {
	quoted := make([]string, len(files))
	for i, f := range files {
		quoted[i] = "'" + strings.ReplaceAll(f, "'", "''") + "'"
	}
	return fmt.Sprintf(`read_parquet([%s], union_by_name = true)`, strings.Join(quoted, ", "))
}

// checkIdentity compares the identity columns (__row_index, __row_id,
// __created_at) read by DuckDB with iceberg-go's read of the same
// snapshot, row for row.
func (e *env) checkIdentity(id string) {
	e.t.Helper()
	q := fmt.Sprintf(`SELECT "%s", "%s", epoch_us("%s") FROM %s`, facade.ColRowIndex, facade.ColRowID, facade.ColCreatedAt, e.liveRows(id))
	rows, err := e.duck.QueryContext(e.ctx, q)
	require.NoError(e.t, err, id)
	defer rows.Close()
	var got, want []string
	for rows.Next() {
		var idx, rid, at int64
		require.NoError(e.t, rows.Scan(&idx, &rid, &at))
		got = append(got, fmt.Sprint(idx, rid, at))
	}
	require.NoError(e.t, rows.Err())
	for rec, err := range e.lw.Facade.Scan(e.ctx, id, facade.ScanOptions{Columns: []string{facade.ColRowIndex, facade.ColRowID, facade.ColCreatedAt}}) {
		require.NoError(e.t, err)
		idx, rid, at := rec.Column(0).(*array.Int64), rec.Column(1).(*array.Int64), rec.Column(2).(*array.Timestamp)
		unit := at.DataType().(*arrow.TimestampType).Unit
		require.Equal(e.t, arrow.Microsecond, unit)
		for i := range int(rec.NumRows()) {
			want = append(want, fmt.Sprint(idx.Value(i), rid.Value(i), int64(at.Value(i))))
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	require.Equal(e.t, want, got, "%s: identity columns", id)
}

// check compares the dataset, read by DuckDB, with the rows of truthSQL
// in Postgres: same columns by name, same multiset of rows, every value
// equal; and its identity columns with iceberg-go's read.
func (e *env) check(id, truthSQL string) {
	e.t.Helper()
	// The simple protocol: no statement cache to go stale as a truth table
	// gains columns.
	rows, err := e.pool.Query(e.ctx, truthSQL+" LIMIT 0", pgx.QueryExecModeSimpleProtocol)
	require.NoError(e.t, err)
	var cols []string
	var kinds []int
	for _, fd := range rows.FieldDescriptions() {
		cols = append(cols, fd.Name)
		kinds = append(kinds, textTypes[fd.DataTypeOID])
	}
	rows.Close()
	require.NoError(e.t, rows.Err())
	exprs := make([]string, len(cols))
	for i, c := range cols {
		exprs[i] = `q."` + c + `"`
		if kinds[i] != asValue {
			exprs[i] += "::text"
		}
	}
	rows, err = e.pool.Query(e.ctx, fmt.Sprintf(`SELECT %s FROM (%s) q`, strings.Join(exprs, ", "), truthSQL), pgx.QueryExecModeSimpleProtocol)
	require.NoError(e.t, err)
	var want []string
	for rows.Next() {
		vals, err := rows.Values()
		require.NoError(e.t, err)
		want = append(want, normRow(vals, kinds))
	}
	require.NoError(e.t, rows.Err())
	got, err := e.duckRead(id, cols, kinds)
	require.NoError(e.t, err, id)
	slices.Sort(want)
	slices.Sort(got)
	require.NotEmpty(e.t, want, id)
	require.Equal(e.t, len(want), len(got), "%s: row count", id)
	for i := range want {
		require.Equal(e.t, want[i], got[i], "%s: columns %v", id, cols)
	}
	e.checkIdentity(id)
}

func normRow(vals []any, kinds []int) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		if s, ok := v.(string); ok && kinds[i] == asNumeric && strings.Contains(s, ".") {
			v = strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
		}
		parts[i] = norm(v)
	}
	return strings.Join(parts, " | ")
}

// norm renders a value decoded by pgx or by DuckDB's driver in one form:
// integers of any width alike, floats bit-exact in meaning (NaN, ±Inf, -0),
// instants in UTC to the microsecond, times of day as microseconds, UUIDs
// canonical, bytes in hex, lists element by element.
func norm(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case bool:
		return strconv.FormatBool(x)
	case int8, int16, int32, int64, int, uint8, uint16, uint32, uint64:
		return fmt.Sprint(x)
	case float32:
		return normFloat(float64(x), 32)
	case float64:
		return normFloat(x, 64)
	case string:
		return strconv.Quote(x)
	case []byte:
		return "0x" + hex.EncodeToString(x)
	case [16]byte:
		return uuid.UUID(x).String()
	case time.Time:
		return x.UTC().Format("2006-01-02T15:04:05.000000Z")
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = norm(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Array && rv.Len() == 16 && rv.Type().Elem().Kind() == reflect.Uint8 {
		var b [16]byte
		reflect.Copy(reflect.ValueOf(&b).Elem(), rv)
		return uuid.UUID(b).String()
	}
	if s, ok := v.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T:%v", v, v)
}

func normFloat(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case f == 0 && math.Signbit(f):
		return "-0"
	}
	return strconv.FormatFloat(f, 'g', -1, bits)
}
