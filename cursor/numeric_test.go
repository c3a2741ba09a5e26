package cursor_test

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// TestNumericRounding: by default an unconstrained numeric with more
// fractional digits than the scale is rounded half-even to it, exactly,
// in both modes and on every arithmetic path (64-bit, 128-bit, big.Int);
// Stream.Rounded counts the values that changed.
func TestNumericRounding(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	cases := []struct {
		in, want string
		rounded  bool
	}{
		// ties go to the even last digit, both ways, and for negatives
		{"0.1234567890123456785", "0.123456789012345678", true},
		{"0.1234567890123456775", "0.123456789012345678", true},
		{"-0.1234567890123456785", "-0.123456789012345678", true},
		{"-0.1234567890123456775", "-0.123456789012345678", true},
		{"0.0000000000000000005", "0.000000000000000000", true},
		{"0.0000000000000000015", "0.000000000000000002", true},
		{"-0.0000000000000000005", "0.000000000000000000", true},
		// just above and below a tie
		{"0.12345678901234567850000000001", "0.123456789012345679", true},
		{"0.12345678901234567749999999999", "0.123456789012345677", true},
		{"-0.12345678901234567850000000001", "-0.123456789012345679", true},
		// carries through every digit
		{"0.9999999999999999995", "1.000000000000000000", true},
		{"-9999.9999999999999999999", "-10000.000000000000000000", true},
		{"99999999999999999999.9999999999999999994", "99999999999999999999.999999999999999999", true},
		// exactly 18 digits, or fewer: untouched and not counted
		{"0.123456789012345678", "0.123456789012345678", false},
		{"-99999999999999999999.999999999999999999", "-99999999999999999999.999999999999999999", false},
		{"1.5", "1.500000000000000000", false},
		{"0", "0.000000000000000000", false},
		// avg()-like results, 20 fractional digits
		{"0.33333333333333333333", "0.333333333333333333", true},
		{"0.66666666666666666667", "0.666666666666666667", true},
		{"0.04997333333333333333", "0.049973333333333333", true},
		// far below the scale
		{"1e-40", "0.000000000000000000", true},
		{"6e-19", "0.000000000000000001", true},
		// more digits than 128 bits hold (the big.Int path)
		{"12345678901234567890.123456789012345678500000000000000000000000001", "12345678901234567890.123456789012345679", true},
		{"12345678901234567890.1234567890123456785", "12345678901234567890.123456789012345678", true},
	}
	in := make([]string, len(cases))
	wantRounded := int64(0)
	for i, c := range cases {
		in[i] = c.in
		if c.rounded {
			wantRounded++
		}
	}
	for _, mode := range []cursor.StreamMode{cursor.Direct, cursor.Staged} {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		s, err := cursor.Batches(ctx, pool, `SELECT v::numeric AS n, ARRAY[v::numeric, v::numeric] AS a
			FROM unnest($1::text[]) WITH ORDINALITY AS u(v, i) ORDER BY i`, []any{in},
			&cursor.Options{Mode: mode, Allocator: mem, BatchSize: 7})
		require.NoError(t, err)
		require.Equal(t, "decimal(38, 18)", s.Schema().Field(0).Type.String())
		var got []string
		for b, err := range s.All() {
			require.NoError(t, err)
			n := b.Column(0).(*array.Decimal128)
			a := b.Column(1).(*array.List)
			elems := a.ListValues().(*array.Decimal128)
			for r := 0; r < n.Len(); r++ {
				got = append(got, n.Value(r).ToString(18))
				start, end := a.ValueOffsets(r)
				require.EqualValues(t, 2, end-start)
				require.Equal(t, n.Value(r), elems.Value(int(start)), "list elements round alike")
			}
			b.Release()
		}
		require.Len(t, got, len(cases))
		for i, c := range cases {
			require.Equal(t, c.want, got[i], "%s: %s", mode, c.in)
		}
		require.Equal(t, 3*wantRounded, s.Rounded(), "scalar and both list elements are counted")
		mem.AssertSize(t, 0)
	}

	// Another scale: the 64-bit fast path, ties both ways.
	s, err := cursor.Batches(ctx, pool, `SELECT v::numeric FROM unnest('{2.345,2.355,-2.345,-2.355,2.3450001,2.34}'::text[]) WITH ORDINALITY u(v, i) ORDER BY i`,
		nil, &cursor.Options{NumericScale: 2})
	require.NoError(t, err)
	var got []string
	for b, err := range s.All() {
		require.NoError(t, err)
		for r := 0; r < int(b.NumRows()); r++ {
			got = append(got, b.Column(0).(*array.Decimal128).Value(r).ToString(2))
		}
		b.Release()
	}
	require.Equal(t, []string{"2.34", "2.36", "-2.34", "-2.36", "2.35", "2.34"}, got)
	require.Equal(t, int64(5), s.Rounded())
	require.Equal(t, int32(0), pool.Stat().AcquiredConns())
}

// TestNumericRoundingOverflow: rounding never hides an integer part that
// does not fit, including one reached by the rounding carry.
func TestNumericRoundingOverflow(t *testing.T) {
	pool := pgtest.Pool(t)
	for _, in := range []string{"99999999999999999999.9999999999999999995", "100000000000000000000", "-123456789012345678901.5"} {
		for _, p := range []cursor.NumericPolicy{cursor.NumericDefault, cursor.NumericRound, cursor.NumericStrict} {
			_, done, err := decodeOneWith(t, pool, `$1::text::numeric`, in, p)
			require.ErrorIs(t, err, cursor.ErrOutOfRange, "%s %s", p, in)
			var de *cursor.DecodeError
			require.ErrorAs(t, err, &de)
			if p != cursor.NumericStrict { // strict may refuse the fraction first
				require.Contains(t, de.Error(), "exceeds precision 38", "%s %s", p, in)
			}
			done()
		}
	}
}

// TestNumericStrict keeps the typed error for a value that would need
// rounding; the values that fit still decode.
func TestNumericStrict(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	s, err := cursor.Batches(ctx, pool, `SELECT 1.5::numeric AS n UNION ALL SELECT 1::numeric / 3`, nil,
		&cursor.Options{Allocator: mem, Numeric: cursor.NumericStrict, BatchSize: 1})
	require.NoError(t, err)
	var rows int64
	var gotErr error
	for b, err := range s.All() {
		if err != nil {
			gotErr = err
			continue
		}
		rows += b.NumRows()
		b.Release()
	}
	require.Equal(t, int64(1), rows)
	require.ErrorIs(t, gotErr, cursor.ErrOutOfRange)
	var de *cursor.DecodeError
	require.ErrorAs(t, gotErr, &de)
	require.Equal(t, "n", cursor.DecodeErrorColumn(de))
	require.Equal(t, int64(1), cursor.DecodeErrorRow(de))
	require.Contains(t, de.Error(), "numeric value has more than 18 fractional digits")
	require.Zero(t, s.Rounded())
	mem.AssertSize(t, 0)

	_, err = cursor.Batches(ctx, pool, `SELECT 1`, nil, &cursor.Options{Numeric: 7})
	require.Error(t, err)
	require.Equal(t, int32(0), pool.Stat().AcquiredConns())
}

// TestPreflight lists the columns whose values a stream would round or
// refuse, with counts and the first refusal, without failing at it; a
// stream that carries everything exactly has no issue.
func TestPreflight(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	const q = `SELECT g AS id,
		g::numeric / 3000 AS third,                               -- 20 fractional digits unless g % 3 = 0
		CASE WHEN g = 7 THEN 1e25 ELSE g END::numeric AS big,     -- one overflow
		CASE WHEN g % 4 = 0 THEN 'NaN' ELSE '1' END::numeric AS nan,
		CASE WHEN g = 9 THEN 'infinity' ELSE '2020-01-01' END::timestamptz AS ts,
		CASE WHEN g = 3 THEN '-infinity' ELSE '2020-01-01' END::date AS d,
		ARRAY[g::numeric / 7000] AS arr,                          -- likewise unless g % 7 = 0
		(g * 1.25)::numeric(12,2) AS exact
		FROM generate_series(1, 20) g`
	for _, mode := range []cursor.StreamMode{cursor.Direct, cursor.Staged} {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		s, err := cursor.Batches(ctx, pool, q, nil, &cursor.Options{Mode: mode, Allocator: mem, BatchSize: 6})
		require.NoError(t, err)
		issues, err := s.Preflight()
		require.NoError(t, err)
		byCol := map[string]cursor.ColumnIssue{}
		for _, is := range issues {
			byCol[is.Column] = is
		}
		require.Len(t, issues, 6, "%v", issues)
		require.Equal(t, []string{"third", "big", "nan", "ts", "d", "arr"}, []string{issues[0].Column, issues[1].Column, issues[2].Column, issues[3].Column, issues[4].Column, issues[5].Column})
		require.Equal(t, cursor.IssueFields{Column: "third", Index: 1, TypeName: "numeric", Rounded: 14}, cursor.Fields(byCol["third"]))
		require.Equal(t, cursor.IssueFields{Column: "big", Index: 2, TypeName: "numeric", Refused: 1, Refusal: "numeric value exceeds precision 38", RefusedRow: 6}, cursor.Fields(byCol["big"]))
		require.Equal(t, cursor.IssueFields{Column: "nan", Index: 3, TypeName: "numeric", Refused: 5, Refusal: "numeric NaN", RefusedRow: 3}, cursor.Fields(byCol["nan"]))
		require.Equal(t, cursor.IssueFields{Column: "ts", Index: 4, TypeName: "timestamptz", Refused: 1, Refusal: "timestamp ±infinity", RefusedRow: 8}, cursor.Fields(byCol["ts"]))
		require.Equal(t, cursor.IssueFields{Column: "d", Index: 5, TypeName: "date", Refused: 1, Refusal: "date ±infinity", RefusedRow: 2}, cursor.Fields(byCol["d"]))
		require.Equal(t, cursor.IssueFields{Column: "arr", Index: 6, TypeName: "_numeric", Rounded: 18}, cursor.Fields(byCol["arr"]))
		require.Equal(t, `column "big" (numeric): 1 value(s) refused (first at row 6: numeric value exceeds precision 38)`, byCol["big"].String())
		require.Equal(t, `column "third" (numeric): 14 value(s) rounded half-even to the column's scale`, byCol["third"].String())
		require.Equal(t, int64(14+18), s.Rounded())
		_, err = s.Preflight()
		require.ErrorIs(t, err, cursor.ErrAlreadyConsumed)
		mem.AssertSize(t, 0)

		// Strict: the values that would be rounded are refused instead.
		s, err = cursor.Batches(ctx, pool, `SELECT g::numeric / 3000 AS third, g AS id FROM generate_series(1, 20) g`, nil,
			&cursor.Options{Mode: mode, Numeric: cursor.NumericStrict})
		require.NoError(t, err)
		issues, err = s.Preflight()
		require.NoError(t, err)
		require.Len(t, issues, 1)
		require.Equal(t, cursor.IssueFields{Column: "third", TypeName: "numeric", Refused: 14,
			Refusal: "numeric value has more than 18 fractional digits", RefusedRow: 0}, cursor.Fields(issues[0]))

		// Nothing to report.
		s, err = cursor.Batches(ctx, pool, `SELECT g, g::numeric / 4 AS q FROM generate_series(1, 100) g`, nil, &cursor.Options{Mode: mode})
		require.NoError(t, err)
		issues, err = s.Preflight()
		require.NoError(t, err)
		require.Empty(t, issues)

		// Other errors are errors.
		s, err = cursor.Batches(ctx, pool, `SELECT 1 / (g - 5) FROM generate_series(1, 10) g`, nil, &cursor.Options{Mode: mode})
		require.NoError(t, err)
		_, err = s.Preflight()
		var qe *cursor.QueryError
		require.ErrorAs(t, err, &qe)
		s, err = cursor.Batches(ctx, pool, `SELECT g FROM generate_series(1, 10) g`, nil, &cursor.Options{Mode: mode, MaxRows: 5})
		require.NoError(t, err)
		_, err = s.Preflight()
		require.ErrorIs(t, err, cursor.ErrRunaway)
	}
	require.Equal(t, int32(0), pool.Stat().AcquiredConns())
}
