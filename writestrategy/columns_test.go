package writestrategy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// rowStoreWorld is a dispatcher writing the row store through a pool of
// two connections (so that every session has the writes' statements
// cached after a few writes).
func rowStoreWorld(t *testing.T) (*writestrategy.Dispatcher, *pgxpool.Pool, *ledger.Ledger) {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	require.NoError(t, err)
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	l, err := ledger.New(pool, nil)
	require.NoError(t, err)
	flags, err := sink.NewFlags(pool, nil)
	require.NoError(t, err)
	require.NoError(t, flags.SetWriter(ctx, sink.WriterFlags{WriterID: writer, Default: sink.Postgres, Max: sink.Postgres}))
	res, err := sink.NewResolver(flags, nil)
	require.NoError(t, err)
	d, err := writestrategy.NewDispatcher(pool, &writestrategy.DispatchConfig{Ledger: l, Resolver: res, Workspace: "test"})
	require.NoError(t, err)
	return d, pool, l
}

func columnTypes(s writestrategy.Schema) string {
	var parts []string
	for _, c := range s.Columns {
		parts = append(parts, c.Name+" "+c.Type)
	}
	return strings.Join(parts, ", ")
}

// A replace whose output query is the same text as an earlier write's but
// whose columns changed in between (a retyped column, with an encoding of
// its own; a renamed one; a widened one) writes and declares the columns
// as they are now, on sessions that ran the earlier writes' statements or
// on new ones.
func TestDispatchOutputColumnsChangeBetweenWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, pool, l := rowStoreWorld(t)
	_, err := pool.Exec(ctx, `CREATE TABLE spec_src (id int4, v int4, f float8);
		INSERT INTO spec_src VALUES (1, 10, 0.5), (2, 20, '-0'), (3, NULL, 'NaN')`)
	require.NoError(t, err)
	ensureOutputs(t, pool, "spec")
	q := writestrategy.Query{Output: "spec", SQL: `SELECT * FROM spec_src ORDER BY id`}
	write := func(wantCols string, wantRows ...string) {
		t.Helper()
		rs, err := d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: q})
		require.NoError(t, err)
		require.Len(t, rs, 1)
		require.EqualValues(t, 3, rs[0].Rows)
		require.Equal(t, wantCols, columnTypes(writestrategy.ResultColumns(rs[0])))
		require.Equal(t, wantRows, rowStoreRows(t, pool, "spec"))
		ds, err := l.Dataset(ctx, "spec")
		require.NoError(t, err)
		declared, err := writestrategy.ParseSchema(ds.Schema)
		require.NoError(t, err)
		require.Equal(t, wantCols, columnTypes(declared))
		require.EqualValues(t, 3, ds.RowCount)
	}
	first := []string{`{"f": "-0", "v": 20, "id": 2}`, `{"f": "0.5", "v": 10, "id": 1}`, `{"f": "NaN", "v": null, "id": 3}`}
	for range 4 {
		write("id integer, v integer, f double precision", first...)
	}

	// v becomes a float: stored as its text form, declared as double.
	_, err = pool.Exec(ctx, `ALTER TABLE spec_src ALTER v TYPE float8; UPDATE spec_src SET v = '-0' WHERE id = 1`)
	require.NoError(t, err)
	for range 3 {
		write("id integer, v double precision, f double precision",
			`{"f": "-0", "v": "20", "id": 2}`, `{"f": "0.5", "v": "-0", "id": 1}`, `{"f": "NaN", "v": null, "id": 3}`)
	}
	// Same types, a column renamed, on new sessions.
	_, err = pool.Exec(ctx, `ALTER TABLE spec_src RENAME f TO g`)
	require.NoError(t, err)
	pool.Reset()
	for range 3 {
		write("id integer, v double precision, g double precision",
			`{"g": "-0", "v": "20", "id": 2}`, `{"g": "0.5", "v": "-0", "id": 1}`, `{"g": "NaN", "v": null, "id": 3}`)
	}
	// Same encoding, another type: id widened to bigint, on new sessions.
	_, err = pool.Exec(ctx, `ALTER TABLE spec_src ALTER id TYPE int8`)
	require.NoError(t, err)
	pool.Reset()
	write("id bigint, v double precision, g double precision",
		`{"g": "-0", "v": "20", "id": 2}`, `{"g": "0.5", "v": "-0", "id": 1}`, `{"g": "NaN", "v": null, "id": 3}`)

	require.Zero(t, pool.Stat().AcquiredConns(), "nothing held")
	var open int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE status <> 'committed'`).Scan(&open))
	require.Zero(t, open, "every write committed")
}

// A write of a query written before that fails on its data fails with a
// QueryError, the earlier rows kept, the intent aborted; the next write
// lands. Appends of one query written again and again number their rows
// after the last one.
func TestDispatchRewriteFailsOnDataAndAppends(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, pool, l := rowStoreWorld(t)
	_, err := pool.Exec(ctx, `CREATE TABLE spec_div (id int4, d int4); INSERT INTO spec_div VALUES (1, 1), (2, 2)`)
	require.NoError(t, err)
	ensureOutputs(t, pool, "div", "log")
	q := writestrategy.Query{Output: "div", SQL: `SELECT id, 10 / d AS q FROM spec_div ORDER BY id`}
	want := []string{`{"q": 10, "id": 1}`, `{"q": 5, "id": 2}`}
	for range 4 {
		_, err := d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: q})
		require.NoError(t, err)
		require.Equal(t, want, rowStoreRows(t, pool, "div"))
	}
	_, err = pool.Exec(ctx, `UPDATE spec_div SET d = 0 WHERE id = 2`)
	require.NoError(t, err)
	for range 2 {
		_, err = d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: q})
		var qe *writestrategy.QueryError
		require.True(t, errors.As(err, &qe), "%v", err)
		require.Contains(t, err.Error(), "division by zero")
		require.Equal(t, want, rowStoreRows(t, pool, "div"), "the earlier rows stay")
		ds, err := l.Dataset(ctx, "div")
		require.NoError(t, err)
		require.EqualValues(t, 2, ds.RowCount)
	}
	var aborted int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.pipeline_build_transactions WHERE dataset_id = 'div' AND status = 'aborted'`).Scan(&aborted))
	require.Equal(t, 2, aborted)
	_, err = pool.Exec(ctx, `UPDATE spec_div SET d = 5 WHERE id = 2`)
	require.NoError(t, err)
	_, err = d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: q})
	require.NoError(t, err)
	require.Equal(t, []string{`{"q": 10, "id": 1}`, `{"q": 2, "id": 2}`}, rowStoreRows(t, pool, "div"))

	a := writestrategy.Query{Output: "log", SQL: `SELECT id FROM spec_div ORDER BY id`, Mode: facade.Append}
	for i := range 5 {
		rs, err := d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: a})
		require.NoError(t, err)
		require.EqualValues(t, 2, rs[0].Rows)
		require.Equal(t, facade.Append, rs[0].Mode)
		ds, err := l.Dataset(ctx, "log")
		require.NoError(t, err)
		require.EqualValues(t, 2*(i+1), ds.RowCount)
	}
	require.Equal(t, "0,1,2,3,4,5,6,7,8,9", rowIndexes(t, pool, "log"))
	require.Zero(t, pool.Stat().AcquiredConns(), "nothing held")
}

// An append of an output query written before whose columns changed in
// between (on sessions that ran the earlier writes, or on new ones)
// appends with the columns as they are now.
func TestDispatchAppendColumnsChangeBetweenWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, pool, l := rowStoreWorld(t)
	_, err := pool.Exec(ctx, `CREATE TABLE spec_app (id int4, f float8); INSERT INTO spec_app VALUES (1, '-0')`)
	require.NoError(t, err)
	ensureOutputs(t, pool, "app")
	a := writestrategy.Query{Output: "app", SQL: `SELECT * FROM spec_app`, Mode: facade.Append}
	write := func(wantCols string) {
		t.Helper()
		rs, err := d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: a})
		require.NoError(t, err)
		require.EqualValues(t, 1, rs[0].Rows)
		require.Equal(t, wantCols, columnTypes(writestrategy.ResultColumns(rs[0])))
		ds, err := l.Dataset(ctx, "app")
		require.NoError(t, err)
		declared, err := writestrategy.ParseSchema(ds.Schema)
		require.NoError(t, err)
		require.Equal(t, wantCols, columnTypes(declared))
	}
	for range 4 {
		write("id integer, f double precision")
	}
	_, err = pool.Exec(ctx, `ALTER TABLE spec_app ALTER id TYPE int8`)
	require.NoError(t, err)
	for range 2 {
		write("id bigint, f double precision")
	}
	_, err = pool.Exec(ctx, `ALTER TABLE spec_app ALTER id TYPE int4`)
	require.NoError(t, err)
	pool.Reset() // new sessions
	write("id integer, f double precision")
	rows := rowStoreRows(t, pool, "app")
	require.Len(t, rows, 7)
	for _, r := range rows {
		require.Equal(t, `{"f": "-0", "id": 1}`, r)
	}
	require.Equal(t, "0,1,2,3,4,5,6", rowIndexes(t, pool, "app"))
}

// Writes of many different output queries leave no statement of the
// library's own prepared on the sessions (their descriptions are read
// unnamed; only pgx's statement cache, bounded, keeps statements), and
// every write lands.
func TestDispatchManyQueriesLeaveNoStatements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, pool, _ := rowStoreWorld(t)
	ensureOutputs(t, pool, "many")
	for i := range 80 {
		q := writestrategy.Query{Output: "many", SQL: fmt.Sprintf(`SELECT %d AS n, g AS m FROM generate_series(1, %d) g`, i, i%5+1)}
		rs, err := d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: q})
		require.NoError(t, err)
		require.EqualValues(t, i%5+1, rs[0].Rows)
	}
	var conns []*pgxpool.Conn
	for range 2 {
		c, err := pool.Acquire(ctx)
		require.NoError(t, err)
		conns = append(conns, c)
	}
	for _, c := range conns {
		var n int
		require.NoError(t, c.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE name NOT LIKE 'stmtcache\_%'`).Scan(&n))
		require.Zero(t, n)
		c.Release()
	}
}
