// Package slicetest holds what the tests of sliced writes share (package
// writestrategy/sliced and its River integration, sliceriver): the
// source they write from, its seeding into the row store or a table, the
// output they write, and a table's rows read with their identity.
package slicetest

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// SrcSQL gives the source's n rows ($1): NULLs, a float -0, and values
// repeated across the whole source (so equal rows fall in different
// slices).
const SrcSQL = `SELECT g AS id, CASE WHEN g % 7 = 0 THEN NULL ELSE 'n' || (g % 1000) END AS name,
	(g % 5000) / 100.0 AS amount, CASE WHEN g % 11 = 0 THEN '-0'::float8 ELSE g / 3.0 END AS x,
	timestamptz '2026-01-01 00:00:00+00' + g * interval '1 second' AS ts FROM generate_series(1, $1::int) g`

// SrcSchema is the source's columns.
func SrcSchema() writestrategy.Schema {
	return writestrategy.Schema{Columns: []writestrategy.Column{
		{Name: "id", Type: "bigint"}, {Name: "name", Type: "text"}, {Name: "amount", Type: "numeric(12,2)"},
		{Name: "x", Type: "double precision"}, {Name: "ts", Type: "timestamp with time zone"},
	}}
}

// SeedRowStore writes the source dataset id (n rows) into the row store.
func SeedRowStore(t testing.TB, pool *pgxpool.Pool, l *ledger.Ledger, id string, n int) {
	t.Helper()
	ctx := context.Background()
	_, err := l.EnsureDataset(ctx, id, id, nil)
	require.NoError(t, err)
	in, err := l.Open(ctx, ledger.OpenParams{DatasetID: id, WriterID: "seed", Sink: "pg", WriteMode: facade.Replace})
	require.NoError(t, err)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	rows, _, err := writestrategy.RowStoreInsert(ctx, tx, nil, id, in.ID, SrcSQL, n)
	require.NoError(t, err)
	var now time.Time
	require.NoError(t, tx.QueryRow(ctx, `SELECT now()`).Scan(&now))
	require.NoError(t, l.CommitTx(ctx, tx, in, ledger.Outcome{RowCount: rows, CommittedAt: now, Schema: SrcSchema().JSON()}))
	require.NoError(t, tx.Commit(ctx))
}

// SeedTable creates table (n rows) and registers it as dataset id.
func SeedTable(t testing.TB, pool *pgxpool.Pool, id, table string, n int) {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `CREATE TABLE `+table+` AS `+strings.Replace(SrcSQL, "$1::int", fmt.Sprint(n), 1))
	require.NoError(t, err)
	_, err = writestrategy.RegisterRelation(ctx, pool, nil, id, table)
	require.NoError(t, err)
}

// Transform is the row-wise output the tests write: every column of the
// source, amount doubled, every 13th id dropped.
func Transform(out, src string) writestrategy.Transform {
	return writestrategy.Transform{Output: out, Source: src, Steps: []writestrategy.Step{{Name: "t",
		SQL: `SELECT id, name, amount * 2 AS amount, x, ts FROM source WHERE id % 13 <> 0`}}}
}

// Row is a table row: its identity and its business values as text.
type Row struct {
	Idx, ID int64
	Vals    string
}

// RowsOf returns the rows of rec.
func RowsOf(rec arrow.RecordBatch) []Row {
	var out []Row
	sc := rec.Schema()
	for i := 0; i < int(rec.NumRows()); i++ {
		var r Row
		var vals []string
		for c, fld := range sc.Fields() {
			col := rec.Column(c)
			switch fld.Name {
			case facade.ColRowIndex:
				r.Idx = col.(*array.Int64).Value(i)
			case facade.ColRowID:
				r.ID = col.(*array.Int64).Value(i)
			case facade.ColCreatedAt:
			default:
				vals = append(vals, col.ValueStr(i))
			}
		}
		r.Vals = strings.Join(vals, "|")
		out = append(out, r)
	}
	return out
}

// Table reads dataset id's rows in __row_index order.
func Table(t testing.TB, f *facade.Facade, id string) []Row {
	t.Helper()
	var out []Row
	for rec, err := range f.Scan(context.Background(), id, facade.ScanOptions{}) {
		require.NoError(t, err)
		out = append(out, RowsOf(rec)...)
	}
	slices.SortFunc(out, func(a, b Row) int { return int(a.Idx - b.Idx) })
	return out
}

// RequireSameRows checks that b holds the rows of a in the same
// __row_index order, with unique __row_index and __row_id; the same
// identity too when sameIdentity.
func RequireSameRows(t testing.TB, a, b []Row, sameIdentity bool) {
	t.Helper()
	require.Len(t, b, len(a))
	ids := map[int64]bool{}
	for i := range a {
		require.Equal(t, a[i].Vals, b[i].Vals, "row %d in __row_index order", i)
		if i > 0 {
			require.Less(t, b[i-1].Idx, b[i].Idx, "__row_index unique")
		}
		require.False(t, ids[b[i].ID], "__row_id %d twice", b[i].ID)
		ids[b[i].ID] = true
		if sameIdentity {
			require.Equal(t, a[i].Idx, b[i].Idx, "__row_index of row %d", i)
			require.Equal(t, a[i].ID, b[i].ID, "__row_id of row %d", i)
		}
	}
}

// DataFiles lists the Parquet files under warehouse.
func DataFiles(t testing.TB, warehouse string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(warehouse, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			out = append(out, p)
		}
		return err
	}))
	slices.Sort(out)
	return out
}
