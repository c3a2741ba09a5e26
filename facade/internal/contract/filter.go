package contract

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
)

// scanRows renders the rows of a scan as "name=value" lists, sorted.
func scanRows(t *testing.T, e *Env, opts facade.ScanOptions, keep func(rec arrow.RecordBatch, r int) bool) []string {
	t.Helper()
	out := []string{}
	for rec, err := range e.LH.Scan(context.Background(), target.DatasetID, opts) {
		require.NoError(t, err)
		for r := range int(rec.NumRows()) {
			if keep != nil && !keep(rec, r) {
				continue
			}
			var parts []string
			for c, f := range rec.Schema().Fields() {
				parts = append(parts, f.Name+"="+rec.Column(c).ValueStr(r))
			}
			out = append(out, strings.Join(parts, ","))
		}
	}
	sort.Strings(out)
	return out
}

func col(rec arrow.RecordBatch, name string) arrow.Array {
	return rec.Column(rec.Schema().FieldIndices(name)[0])
}

// testScanFilter: a filtered scan returns exactly the rows of the
// unfiltered scan that satisfy every range, NULLs never match, and badly
// typed ranges are ErrInvalidRequest.
func testScanFilter(t *testing.T, e *Env) {
	bs := Batches(e.Mem, Schema(), 0, 600, 100, 300)
	defer release(bs)
	write(t, e, facade.Replace, bs, "")
	const tsBase = 1_700_000_000_000_000
	tsOf := func(k int64) time.Time { return time.UnixMicro(tsBase + k*1_000_003).UTC() }
	dayOf := func(d int) time.Time { return time.Unix(int64(d)*86400, 0).UTC() }
	id := func(rec arrow.RecordBatch, r int) int64 { return col(rec, "id").(*array.Int64).Value(r) }
	ts := func(rec arrow.RecordBatch, r int) (int64, bool) {
		a := col(rec, "ts").(*array.Timestamp)
		return int64(a.Value(r)), a.IsValid(r)
	}
	day := func(rec arrow.RecordBatch, r int) (int32, bool) {
		a := col(rec, "day").(*array.Date32)
		return int32(a.Value(r)), a.IsValid(r)
	}
	name := func(rec arrow.RecordBatch, r int) (string, bool) {
		a := col(rec, "name").(*array.String)
		return a.Value(r), a.IsValid(r)
	}
	cases := []struct {
		name   string
		filter []facade.Range
		keep   func(rec arrow.RecordBatch, r int) bool
	}{
		{"int half-open", []facade.Range{{Column: "id", Min: 50, Max: int64(120), MaxExclusive: true}},
			func(rec arrow.RecordBatch, r int) bool { return id(rec, r) >= 50 && id(rec, r) < 120 }},
		{"timestamp window", []facade.Range{{Column: "ts", Min: tsOf(20), MinExclusive: true, Max: tsOf(60)}},
			func(rec arrow.RecordBatch, r int) bool {
				v, ok := ts(rec, r)
				return ok && v > tsOf(20).UnixMicro() && v <= tsOf(60).UnixMicro()
			}},
		{"date lower bound", []facade.Range{{Column: "day", Min: dayOf(19100)}},
			func(rec arrow.RecordBatch, r int) bool { v, ok := day(rec, r); return ok && v >= 19100 }},
		{"text upper bound", []facade.Range{{Column: "name", Max: "name-5"}},
			func(rec arrow.RecordBatch, r int) bool { v, ok := name(rec, r); return ok && v <= "name-5" }},
		{"conjunction", []facade.Range{{Column: "id", Min: int32(10)}, {Column: "day", Max: dayOf(19050), MaxExclusive: true}},
			func(rec arrow.RecordBatch, r int) bool {
				v, ok := day(rec, r)
				return id(rec, r) >= 10 && ok && v < 19050
			}},
		{"empty", []facade.Range{{Column: "id", Min: 1000}}, func(arrow.RecordBatch, int) bool { return false }},
	}
	for _, c := range cases {
		want := scanRows(t, e, facade.ScanOptions{ExcludeIdentity: true}, c.keep)
		got := scanRows(t, e, facade.ScanOptions{ExcludeIdentity: true, Filter: c.filter}, nil)
		assert.Equal(t, want, got, c.name)
		if c.name != "empty" {
			assert.NotEmpty(t, got, c.name)
			assert.Less(t, len(got), 600, c.name)
		}
	}
	// A filter column need not be projected.
	want := scanRows(t, e, facade.ScanOptions{Columns: []string{"id"}}, func(rec arrow.RecordBatch, r int) bool {
		return id(rec, r) >= 250 && id(rec, r)%7 != 3 // ts is NULL when id%7 == 3
	})
	got := scanRows(t, e, facade.ScanOptions{Columns: []string{"id"}, Filter: []facade.Range{{Column: "ts", Min: tsOf(250)}}}, nil)
	assert.Equal(t, want, got)
	assert.Len(t, got, 2*50-2*7) // 50 ids twice, minus the NULL ts of k%7==3

	for _, bad := range [][]facade.Range{
		{{Column: "nope", Min: 1}},
		{{Column: "id"}},
		{{Column: "id", Min: "1"}},
		{{Column: "id", Min: 1.5}},
		{{Column: "day", Min: dayOf(19100).Add(time.Hour)}},
		{{Column: "ts", Max: 5}},
	} {
		var err error
		for _, e2 := range e.LH.Scan(context.Background(), target.DatasetID, facade.ScanOptions{Filter: bad}) {
			if e2 != nil {
				err = e2
			}
		}
		assert.ErrorIs(t, err, facade.ErrInvalidRequest, fmt.Sprint(bad))
	}
}

// testScanIn: a key-set scan returns exactly the rows whose column holds
// one of the values (NULL matching NULL when nil is among them), combines
// with ranges and other sets, an empty set matches nothing, and badly
// typed values are ErrInvalidRequest.
func testScanIn(t *testing.T, e *Env) {
	bs := Batches(e.Mem, Schema(), 0, 600, 100, 300)
	defer release(bs)
	write(t, e, facade.Replace, bs, "")
	id := func(rec arrow.RecordBatch, r int) int64 { return col(rec, "id").(*array.Int64).Value(r) }
	name := func(rec arrow.RecordBatch, r int) (string, bool) {
		a := col(rec, "name").(*array.String)
		return a.Value(r), a.IsValid(r)
	}
	many := make([]any, 0, 300)
	for k := 0; k < 600; k += 2 { // more values than iceberg-go prunes by
		many = append(many, int64(k))
	}
	cases := []struct {
		name string
		in   []facade.In
		keep func(rec arrow.RecordBatch, r int) bool
	}{
		{"ints", []facade.In{{Column: "id", Values: []any{5, int32(17), int64(250), int64(9999)}}},
			func(rec arrow.RecordBatch, r int) bool { v := id(rec, r); return v == 5 || v == 17 || v == 250 }},
		{"many", []facade.In{{Column: "id", Values: many}},
			func(rec arrow.RecordBatch, r int) bool { return id(rec, r)%2 == 0 }},
		{"text with NULL", []facade.In{{Column: "name", Values: []any{"name-4", nil, "name-40"}}},
			func(rec arrow.RecordBatch, r int) bool {
				v, ok := name(rec, r)
				return !ok || v == "name-4" || v == "name-40"
			}},
		{"text without NULL", []facade.In{{Column: "name", Values: []any{"name-3", "name-4"}}},
			func(rec arrow.RecordBatch, r int) bool { v, ok := name(rec, r); return ok && v == "name-4" }},
		{"two sets", []facade.In{{Column: "id", Values: []any{4, 11, 25}}, {Column: "name", Values: []any{"name-11", "name-25"}}},
			func(rec arrow.RecordBatch, r int) bool { v := id(rec, r); return v == 11 || v == 25 }},
		{"empty", []facade.In{{Column: "id", Values: []any{}}}, func(arrow.RecordBatch, int) bool { return false }},
	}
	for _, c := range cases {
		want := scanRows(t, e, facade.ScanOptions{ExcludeIdentity: true}, c.keep)
		got := scanRows(t, e, facade.ScanOptions{ExcludeIdentity: true, In: c.in}, nil)
		assert.Equal(t, want, got, c.name)
		if c.name != "empty" {
			assert.NotEmpty(t, got, c.name)
		}
	}
	// with a range, the set column not projected
	got := scanRows(t, e, facade.ScanOptions{Columns: []string{"name"}, In: []facade.In{{Column: "id", Values: []any{1, 2, 200}}},
		Filter: []facade.Range{{Column: "id", Max: 100}}}, nil)
	assert.Equal(t, []string{"name=name-1", "name=name-1", "name=name-2", "name=name-2"}, got)

	for _, bad := range [][]facade.In{
		{{Column: "nope", Values: []any{1}}},
		{{Column: "id", Values: []any{"1"}}},
		{{Column: "id", Values: []any{1.5}}},
		{{Column: "ts", Values: []any{5}}},
	} {
		var err error
		for _, e2 := range e.LH.Scan(context.Background(), target.DatasetID, facade.ScanOptions{In: bad}) {
			if e2 != nil {
				err = e2
			}
		}
		assert.ErrorIs(t, err, facade.ErrInvalidRequest, fmt.Sprint(bad))
	}
}
