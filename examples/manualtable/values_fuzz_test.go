package manualtable

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// plainNumber is the syntax parseDecimal reads; Postgres also reads
// others (spaces, NaN, Infinity), which the handler refuses on purpose.
var plainNumber = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// FuzzParseDecimal checks parseDecimal against Postgres' numeric: a value it
// accepts is one Postgres stores in numeric(p,s) unchanged (no rounding) and
// with the same digits; a plain number that Postgres stores in numeric(p,s)
// without rounding is accepted. Run the engine with
//
//	go test -run '^$' -fuzz FuzzParseDecimal -fuzztime 60s -fuzzminimizetime 20x ./examples/manualtable/
func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"12.3", "-0.5", "+7", "1.50000", ".5", "5.", "1.5e3", "1500e-3", "000123.40", "0", "-0",
		"1.001", "10000.00", "1e5", "1e-3", "99999999999999999999999999999999999999", "-1234567890123456789012.0123456789",
		"NaN", " 1", "1e", "0.000000000000000000000000000000000000001", "9.995", "1e37", "-.0e-0"} {
		f.Add(s, uint8(12), uint8(2))
	}
	f.Add("99999999999999999999999999999999999999", uint8(38), uint8(0))
	f.Add("0.1", uint8(1), uint8(1))
	pool := pgtest.Pool(f)
	f.Fuzz(func(t *testing.T, in string, pb, sb uint8) {
		p := int32(pb%38) + 1
		s := int32(sb) % (p + 1)
		n, err := parseDecimal(in, p, s)
		// What Postgres makes of it: stored in numeric(p,s), and whether
		// that changed the value.
		var stored *string
		var exact bool
		pgErr := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
			return tx.QueryRow(context.Background(), `SELECT x::text, x = $1::numeric FROM (SELECT $1::numeric(`+strconv.Itoa(int(p))+`,`+strconv.Itoa(int(s))+`) AS x) v`, in).
				Scan(&stored, &exact)
		})
		if err == nil {
			require.NoError(t, pgErr, "parseDecimal accepted %q (%d,%d) but Postgres refused it", in, p, s)
			require.True(t, exact, "parseDecimal accepted %q (%d,%d), which Postgres rounds to %s", in, p, s, *stored)
			require.Equal(t, *stored, n.ToString(s), "%q (%d,%d)", in, p, s)
			return
		}
		if pgErr == nil && exact && plainNumber.MatchString(in) && len(in) < 200 {
			t.Fatalf("parseDecimal refused %q (%d,%d): %v; Postgres stores it exactly as %s", in, p, s, err, *stored)
		}
	})
}

// FuzzParseTimestamp checks parseTimestamp against Postgres: a value it
// accepts for timestamptz (an offset, or UTC when none) or timestamp (no
// offset) is one Postgres reads as the same instant, to the microsecond.
func FuzzParseTimestamp(f *testing.F) {
	for _, s := range []string{"2024-01-02T03:04:05Z", "2024-01-02 03:04:05.123456+02", "2024-01-02T03:04:05.1234567Z",
		"2024-01-02 03:04", "2024-01-02", "1999-12-31T23:59:59-08:00", "2024-02-30 00:00:00", "0001-01-01 00:00:00Z",
		"2024-01-02T24:00:00Z", "2024-01-02 03:04:05+14:00", "9999-12-31 23:59:59.999999Z"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	pool := pgtest.Pool(f)
	f.Fuzz(func(t *testing.T, in string, zoned bool) {
		ts, err := parseTimestamp(in, zoned)
		if err != nil {
			return // stricter than Postgres on purpose (layouts, precision, offsets)
		}
		typ := "timestamp"
		if zoned {
			typ = "timestamptz"
		}
		var micros int64
		pgErr := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(context.Background(), `SET LOCAL TimeZone = 'UTC'`); err != nil {
				return err
			}
			// Microseconds since the Unix epoch, the instant read as UTC
			// for a timestamp without time zone.
			return tx.QueryRow(context.Background(), `SELECT (extract(epoch FROM $1::`+typ+`) * 1000000)::bigint`, in).Scan(&micros)
		})
		require.NoError(t, pgErr, "parseTimestamp accepted %q (%s) but Postgres refused it", in, typ)
		require.Equal(t, micros, ts.UnixMicro(), "%q (%s): parseTimestamp read %s", in, typ, ts)
	})
}

// FuzzAppendValue checks every supported column type against Postgres: a
// value the handler accepts is one Postgres accepts for the declared type,
// so a manual table stays readable as a source of Postgres queries (its
// rows are copied into Postgres when a pipeline reads it).
func FuzzAppendValue(f *testing.F) {
	types := []string{"smallint", "integer", "bigint", "real", "double precision", "numeric(12,2)", "boolean", "text",
		"date", "timestamp with time zone", "timestamp without time zone", "jsonb", "json", "uuid"}
	for i := range types {
		for _, s := range []string{"1", "-0", "1.5", "1e3", "NaN", "Inf", "0x10", "true", "on", "abc", "\x00", "a\x00b",
			"2024-01-02", "0000-01-01", "2024-01-02 03:04:05Z", `{"a":1}`, `"\u0000"`, `[1,2]`, "null",
			"0f8fad5b-d9cb-469f-a165-70867728950e", " 7 ", "1_000", "+5"} {
			f.Add(s, uint8(i))
		}
	}
	pool := pgtest.Pool(f)
	mem := memory.NewGoAllocator()
	f.Fuzz(func(t *testing.T, in string, ti uint8) {
		decl := types[int(ti)%len(types)]
		typ, err := parsePGType(decl)
		require.NoError(t, err)
		b := array.NewBuilder(mem, typ.arrowType())
		defer b.Release()
		c := colBuilder{name: "v", t: typ, b: b}
		// value is what the column holds once accepted; refusing more than
		// Postgres does is allowed.
		check := func(path, value string) {
			t.Helper()
			err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
				_, err := tx.Exec(context.Background(), `SELECT $1::text::`+typ.name, value)
				return err
			})
			require.NoError(t, err, "the handler accepted %q for %s (%s) but Postgres refuses it", value, decl, path)
		}
		if c.appendValue(in) == nil {
			check("CSV", in)
		}
		// NDJSON: the value as a JSON string, and as a raw JSON value.
		q, _ := json.Marshal(in)
		if c.appendJSON(q) == nil {
			var dec string
			require.NoError(t, json.Unmarshal(q, &dec))
			if typ.kind == kindJSON {
				dec = string(q)
			}
			check("NDJSON string", dec)
		}
		if json.Valid([]byte(in)) && in != "null" && c.appendJSON(json.RawMessage(in)) == nil {
			value := in
			var dec string
			if typ.kind != kindJSON && json.Unmarshal([]byte(in), &dec) == nil {
				value = dec // a JSON string holds the value
			}
			check("NDJSON value", value)
		}
	})
}
