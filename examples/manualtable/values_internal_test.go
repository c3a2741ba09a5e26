package manualtable

import (
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseDecimal(t *testing.T) {
	ok := []struct {
		in   string
		p, s int32
		want string
	}{
		{"12.3", 12, 2, "12.30"},
		{"-0.5", 4, 2, "-0.50"},
		{"+7", 3, 0, "7"},
		{"1.50000", 5, 2, "1.50"},
		{".5", 2, 1, "0.5"},
		{"5.", 2, 1, "5.0"},
		{"1.5e3", 6, 2, "1500.00"},
		{"1500e-3", 4, 3, "1.500"},
		{"000123.40", 5, 2, "123.40"},
		{"0", 1, 0, "0"},
		{"99999999999999999999999999999999999999", 38, 0, "99999999999999999999999999999999999999"},
		{"-1234567890123456789012.0123456789", 38, 10, "-1234567890123456789012.0123456789"},
	}
	for _, c := range ok {
		n, err := parseDecimal(c.in, c.p, c.s)
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, n.ToString(c.s), c.in)
	}
	bad := []struct {
		in   string
		p, s int32
	}{
		{"1.001", 6, 2}, {"10000.00", 6, 2}, {"1e5", 5, 0}, {"", 5, 2}, {".", 5, 2}, {"1.2.3", 5, 2},
		{"abc", 5, 2}, {"NaN", 5, 2}, {"1e", 5, 2}, {"1e99999", 5, 2}, {"--1", 5, 2}, {"1_000", 5, 0},
		{"100000000000000000000000000000000000000", 38, 0},
	}
	for _, c := range bad {
		_, err := parseDecimal(c.in, c.p, c.s)
		assert.Error(t, err, c.in)
	}
}

func TestParseTimestamp(t *testing.T) {
	for _, in := range []string{"2024-01-02T03:04:05Z", "2024-01-02 05:04:05+02", "2024-01-02T05:04:05.000000+02:00", "2024-01-02 03:04:05"} {
		ts, err := parseTimestamp(in, true)
		require.NoError(t, err, in)
		assert.Equal(t, "2024-01-02T03:04:05Z", ts.Format("2006-01-02T15:04:05Z07:00"), in)
	}
	_, err := parseTimestamp("2024-01-02T03:04:05Z", false)
	assert.ErrorContains(t, err, "without time zone")
	_, err = parseTimestamp("2024-01-02T03:04:05.0000001Z", true)
	assert.ErrorContains(t, err, "microseconds")
	ts, err := parseTimestamp("2024-01-02", false)
	require.NoError(t, err)
	assert.Zero(t, ts.Hour())
	ts, err = parseTimestamp("2024-01-02 03:04:05-15:59", true)
	require.NoError(t, err)
	assert.Equal(t, "2024-01-02T19:03:05Z", ts.Format(time.RFC3339))
	// Looser forms time.Parse takes and Postgres refuses (found by
	// FuzzParseTimestamp).
	for _, in := range []string{"2024-01-02 3:04:05", "2024-01-02 03:04:05,1", "0000-01-01 00:00", "2024-01-02 03:04:05+10:60",
		"2024-01-02 03:04:05+16:00", "24-01-02", "2024-1-02", " 2024-01-02", "2024-01-02 03:04:05+0200"} {
		_, err := parseTimestamp(in, true)
		assert.Error(t, err, in)
	}
}

func TestParseUUID(t *testing.T) {
	for _, in := range []string{"0f8fad5b-d9cb-469f-a165-70867728950e", "0F8FAD5BD9CB469FA16570867728950E", "{0f8fad5b-d9cb-469f-a165-70867728950e}"} {
		u, ok := parseUUID(in)
		assert.True(t, ok, in)
		assert.Equal(t, byte(0x0f), u[0])
		assert.Equal(t, byte(0x0e), u[15])
	}
	for _, in := range []string{"", "0f8fad5b-d9cb-469f-a165-70867728950", "0f8fad5bxd9cb-469f-a165-70867728950e", "zz8fad5b-d9cb-469f-a165-70867728950e"} {
		_, ok := parseUUID(in)
		assert.False(t, ok, in)
	}
}

func TestParsePGType(t *testing.T) {
	for in, want := range map[string]string{
		"INT8": "bigint", "Double  Precision": "double precision", "decimal(10, 2)": "numeric(10,2)",
		"numeric(5)": "numeric(5,0)", "timestamptz": "timestamp with time zone", "timestamp": "timestamp without time zone",
		"bool": "boolean", "int": "integer", "jsonb": "jsonb", "uuid": "uuid",
	} {
		pt, err := parsePGType(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, pt.name, in)
	}
	for _, in := range []string{"numeric", "numeric(0,0)", "numeric(39,1)", "numeric(5,6)", "varchar(10)", "money", ""} {
		_, err := parsePGType(in)
		assert.Error(t, err, in)
	}
}

// Values that Go's parsers take and Postgres refuses are refused (found by
// FuzzAppendValue); a manual table must stay readable by Postgres.
func TestAppendValueRefusesWhatPostgresRefuses(t *testing.T) {
	mem := memory.NewGoAllocator()
	for _, c := range []struct {
		decl, in string
		ok       bool
	}{
		{"real", "1_000", false}, {"double precision", "0x1p-2", false}, {"text", "a\x00b", false},
		{"date", "0000-01-01", false}, {"jsonb", `{"a":"\u0000"}`, false}, {"jsonb", "\"\xff\"", false},
		{"numeric(12,2)", "\u20002", false}, {"integer", "\u00a07", false},
		{"timestamp with time zone", "2024-01-02 03:04:05,1", false},
		// Still accepted: json keeps \u0000 (Postgres json does), ASCII
		// spaces around a number, an escaped backslash before u0000 in jsonb.
		{"json", `"\u0000"`, true}, {"integer", " 7\t", true}, {"jsonb", `"\\u0000"`, true},
	} {
		typ, err := parsePGType(c.decl)
		require.NoError(t, err)
		b := array.NewBuilder(mem, typ.arrowType())
		col := colBuilder{name: "v", t: typ, b: b}
		if err := col.appendValue(c.in); c.ok {
			assert.NoError(t, err, "%s %q", c.decl, c.in)
		} else {
			assert.Error(t, err, "%s %q", c.decl, c.in)
		}
		b.Release()
	}
}
