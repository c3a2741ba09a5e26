package writestrategy_test

import (
	"bytes"
	"context"
	"log/slog"
	"math/big"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/writestrategy"

	"github.com/lakewrite/lakewrite/internal/vocab"
	"github.com/lakewrite/lakewrite/sink"
)

var lineitemSchema = writestrategy.Schema{Columns: []writestrategy.Column{
	{Name: "l_returnflag", Type: "text"},
	{Name: "l_linestatus", Type: "text"},
	{Name: "l_quantity", Type: "numeric(15,2)"},
	{Name: "l_extendedprice", Type: "numeric(15,2)"},
	{Name: "l_discount", Type: "numeric(15,2)"},
	{Name: "l_tax", Type: "numeric(15,2)"},
	{Name: "l_shipdate", Type: "date"},
}}

// lineitemSQL makes $1 deterministic TPC-H-shaped line items: six
// (returnflag, linestatus) groups, discounts 0.00-0.10, taxes 0.00-0.08,
// ship dates 1992-01-01 .. 1998-12-01 (some after Q1's cut-off).
const lineitemSQL = `SELECT (ARRAY['A','N','R'])[1 + g % 3] AS l_returnflag,
	(ARRAY['F','O'])[1 + (g / 3) % 2] AS l_linestatus,
	(1 + g % 50)::numeric(15,2) AS l_quantity,
	((1 + g % 50) * (90000 + (g * 7919) % 10000000) / 100.0)::numeric(15,2) AS l_extendedprice,
	((g * 7) % 11 / 100.0)::numeric(15,2) AS l_discount,
	((g * 5) % 9 / 100.0)::numeric(15,2) AS l_tax,
	date '1992-01-01' + (g * 17) % 2526 AS l_shipdate
	FROM generate_series(1, $1::int) g`

// tpchQ1 is TPC-H Q1 as written, over the source dataset lineitem.
func tpchQ1(output string) writestrategy.Transform {
	return writestrategy.Transform{Output: output, Source: "lineitem", Steps: []writestrategy.Step{{Name: "q1", SQL: `
		SELECT l_returnflag, l_linestatus,
			sum(l_quantity) AS sum_qty,
			sum(l_extendedprice) AS sum_base_price,
			sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
			sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
			avg(l_quantity) AS avg_qty,
			avg(l_extendedprice) AS avg_price,
			avg(l_discount) AS avg_disc,
			count(*) AS count_order
		FROM source
		WHERE l_shipdate <= date '1998-12-01' - interval '90' day
		GROUP BY l_returnflag, l_linestatus
		ORDER BY l_returnflag, l_linestatus`}}}
}

// TPC-H Q1 as written (avg() of discounts below 1 has 20 fractional digits,
// beyond decimal(38,18)) writes to both sinks: the Iceberg write rounds
// half-even and reports how many values it rounded (WriteResult, snapshot
// summary, log record), and the two sinks' checksums are equal. The
// preflight names the column before the flip; strict mode refuses the
// write, per dispatcher or per request, leaving the table as it was.
func TestDispatchTPCHQ1BothSinks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	seedRowStore(t, w.pool, "lineitem", lineitemSchema, lineitemSQL, 600)
	ensureOutputs(t, w.pool, "q1_pg", "q1_ice")

	// Before the flip: the preflight names the rounded column, with counts.
	issues := w.preflight(tpchQ1("q1_ice"), nil)
	require.Len(t, issues, 1, "%v", issues)
	require.Equal(t, "q1_ice", issues[0].DatasetID)
	require.Equal(t, "avg_disc", issues[0].Column)
	require.Equal(t, "numeric", issues[0].TypeName)
	require.Equal(t, int64(6), issues[0].Rounded, "one avg per group")
	require.Zero(t, issues[0].Refused)

	pg := w.mustWrite(tpchQ1("q1_pg"))[0]
	require.Equal(t, sink.Postgres, pg.Sink)
	require.EqualValues(t, 6, pg.Rows)
	require.Zero(t, pg.Rounded)
	// The row store keeps every digit: count the values beyond 18
	// fractional digits there, independently of the cursor.
	var beyond int64
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.dataset_rows d, jsonb_each(d.data) e
		WHERE d.dataset_id = 'q1_pg' AND jsonb_typeof(e.value) = 'number'
		AND e.value::text::numeric <> trunc(e.value::text::numeric, 18)`).Scan(&beyond))
	require.Equal(t, int64(6), beyond)

	// Strict, per dispatcher: the Iceberg write fails with the typed
	// error and commits nothing.
	w.iceberg("q1_ice")
	var logs bytes.Buffer
	strict, err := writestrategy.NewDispatcher(w.pool, &writestrategy.DispatchConfig{Ledger: w.ledger, Resolver: w.resolver,
		Lakehouse: w.lake, Workspace: "test", Cursor: &cursor.Options{Numeric: cursor.NumericStrict},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	_, err = strict.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: tpchQ1("q1_ice")})
	require.ErrorIs(t, err, cursor.ErrOutOfRange)
	require.ErrorContains(t, err, `column "avg_disc"`)
	require.Contains(t, err.Error(), "more than 18 fractional digits")
	empty, err := w.lake.Checksum(ctx, "q1_ice", 0) // the table exists, with no snapshot
	require.NoError(t, err)
	require.Zero(t, empty.Rows, "no snapshot landed")
	ds, err := w.ledger.Dataset(ctx, "q1_ice")
	require.NoError(t, err)
	require.Empty(t, ds.Sink, "the intent aborted: nothing stamped")

	// The request overrides the dispatcher's strict default: rounded.
	res, err := strict.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: tpchQ1("q1_ice"), Numeric: cursor.NumericRound})
	require.NoError(t, err)
	ice := res[0]
	require.Equal(t, sink.Iceberg, ice.Sink)
	require.EqualValues(t, 6, ice.Rows)
	require.Equal(t, beyond, ice.Rounded)
	require.Contains(t, logs.String(), "rounded=6")
	require.Contains(t, logs.String(), "dataset_id=q1_ice")

	// Parity at the written scale: the Postgres output, streamed through
	// the cursor, checksums as the Iceberg table does.
	require.Equal(t, w.checksum("q1_pg"), w.checksum("q1_ice"))
	found, ok, err := w.lake.FindTxn(ctx, "q1_ice", ice.TxnID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "6", found.Summary[vocab.SummaryNumericRounded])

	// The Iceberg values are the row store's, rounded half-even to 18
	// digits (a reference on the digits, not through the cursor).
	rows, err := w.pool.Query(ctx, `SELECT (data->>'l_returnflag') || (data->>'l_linestatus'), (data->'avg_disc')::text
		FROM lakewrite.dataset_rows WHERE dataset_id = 'q1_pg'`)
	require.NoError(t, err)
	want := map[string]string{}
	for rows.Next() {
		var k, v string
		require.NoError(t, rows.Scan(&k, &v))
		want[k] = halfEven(v, 18)
		require.NotEqual(t, v, want[k])
	}
	require.NoError(t, rows.Err())
	got := map[string]string{}
	for b, err := range w.lake.Scan(ctx, "q1_ice", facade.ScanOptions{Columns: []string{"l_returnflag", "l_linestatus", "avg_disc"}}) {
		require.NoError(t, err)
		for r := 0; r < int(b.NumRows()); r++ {
			k := b.Column(0).(*array.String).Value(r) + b.Column(1).(*array.String).Value(r)
			got[k] = b.Column(2).(*array.Decimal128).Value(r).ToString(18)
		}
	}
	require.Equal(t, want, got)

	// A default write (the dispatcher of the world rounds) is counted the
	// same way.
	again := w.mustWrite(tpchQ1("q1_ice"))[0]
	require.Equal(t, int64(6), again.Rounded)
	require.Equal(t, w.checksum("q1_pg"), w.checksum("q1_ice"))

	// Strict per request, over a rounding dispatcher: refused, the table
	// keeps its snapshot.
	_, err = w.d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: tpchQ1("q1_ice"), Numeric: cursor.NumericStrict})
	require.ErrorIs(t, err, cursor.ErrOutOfRange)
	after, ok, err := w.lake.FindTxn(ctx, "q1_ice", again.TxnID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, again.SnapshotID, after.SnapshotID)

	// Strict preflight: the same column, refused instead of rounded.
	issues = w.preflight(tpchQ1("q1_ice"), &cursor.Options{Numeric: cursor.NumericStrict})
	require.Len(t, issues, 1)
	require.Equal(t, int64(6), issues[0].Refused)
	require.Zero(t, issues[0].Rounded)
}

// A preflight reports, per output of a split pair, what the Iceberg path
// would refuse (integer digits beyond decimal(38,18), NaN) and round; an
// output with nothing to report has no issue.
func TestPreflightRefusals(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	seedRowStore(t, w.pool, "vals", writestrategy.Schema{Columns: []writestrategy.Column{
		{Name: "id", Type: "bigint"}, {Name: "v", Type: "numeric"}, {Name: "d", Type: "date"}}},
		`SELECT g::bigint AS id, CASE WHEN g = 3 THEN 1e30 WHEN g = 4 THEN 'NaN' ELSE g::numeric / 7000 END AS v,
			CASE WHEN g = 5 THEN 'infinity'::date ELSE date '2020-01-01' END AS d FROM generate_series(1, 10) g`)
	split := writestrategy.Split{Source: "vals", Predicate: "id <= $1", Args: []any{5}, Matched: "low", Unmatched: "high"}
	ensureOutputs(t, w.pool, "low", "high", "clean")
	issues := w.preflight(split, nil)
	var lines []string
	for _, is := range issues {
		lines = append(lines, is.DatasetID+" "+is.String())
	}
	sort.Strings(lines)
	require.Equal(t, []string{
		`high column "v" (numeric): 4 value(s) rounded half-even to the column's scale`,
		`low column "d" (date): 1 value(s) refused (first at row 4: date ±infinity)`,
		`low column "v" (numeric): 3 value(s) rounded half-even to the column's scale; 2 value(s) refused (first at row 2: numeric value exceeds precision 38)`,
	}, lines)

	// Refused values fail the write itself, as the preflight said.
	w.iceberg("low", "high")
	_, err := w.write(split)
	require.ErrorIs(t, err, cursor.ErrOutOfRange)

	issues = w.preflight(writestrategy.Transform{Output: "clean", Source: "vals", Steps: []writestrategy.Step{{Name: "s", SQL: `SELECT id FROM source`}}}, nil)
	require.Empty(t, issues)
}

// preflight runs writestrategy.Preflight in a transaction it rolls back.
func (w *world) preflight(s writestrategy.WriteStrategy, opts *cursor.Options) []writestrategy.ColumnIssue {
	w.t.Helper()
	ctx := context.Background()
	tx, err := w.pool.Begin(ctx)
	require.NoError(w.t, err)
	defer func() { require.NoError(w.t, tx.Rollback(ctx)) }()
	issues, err := writestrategy.Preflight(ctx, tx, &writestrategy.Env{}, s, opts)
	require.NoError(w.t, err)
	return issues
}

// halfEven rounds the decimal text s to scale digits, ties to even.
func halfEven(s string, scale int) string {
	neg := strings.HasPrefix(s, "-")
	ip, fp, _ := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	keep, rest := fp, ""
	if len(fp) > scale {
		keep, rest = fp[:scale], fp[scale:]
	}
	keep += strings.Repeat("0", scale-len(keep))
	n, _ := new(big.Int).SetString(ip+keep, 10)
	if rest != "" && (rest[0] > '5' || (rest[0] == '5' && (strings.Trim(rest[1:], "0") != "" || n.Bit(0) == 1))) {
		n.Add(n, big.NewInt(1))
	}
	d := n.String()
	if len(d) <= scale {
		d = strings.Repeat("0", scale+1-len(d)) + d
	}
	out := d[:len(d)-scale] + "." + d[len(d)-scale:]
	if neg && n.Sign() != 0 {
		out = "-" + out
	}
	return out
}
