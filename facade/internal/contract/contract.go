// Package contract is the contract test suite of facade.Lakehouse, run
// against the Iceberg backend and the in-memory double alike.
package contract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"

	"github.com/lakewrite/lakewrite/internal/vocab"
)

// Env is one backend under test.
type Env struct {
	LH facade.Lakehouse
	// Mem is the allocator the backend was configured with; the suite
	// builds its input batches from it too and asserts zero at the end.
	Mem *memory.CheckedAllocator
	// FailCommits makes the next n commit attempts of the dataset fail with
	// kind (facade.ErrCommitConflict or facade.ErrCommitStateUnknown),
	// without committing.
	FailCommits func(datasetID string, kind error, n int)
	// Cleanup releases the backend (called before the allocator check).
	Cleanup func()
	// Policies is wired into the backend's SchemaPolicyFor.
	Policies *Policies
}

// Run runs the suite. newEnv is called once per subtest.
func Run(t *testing.T, newEnv func(t *testing.T) *Env) {
	tests := map[string]func(t *testing.T, e *Env){
		"ReplaceTwiceIdentical":   testReplaceTwice,
		"ReplaceThenAppend":       testReplaceThenAppend,
		"EmptyReplace":            testEmptyReplace,
		"FailAtBatch":             testFailAtBatch,
		"ContextCancel":           testCancel,
		"CommitConflict":          testCommitConflict,
		"CommitStateUnknown":      testCommitUnknown,
		"IdempotentAppend":        testIdempotentAppend,
		"TxnLookup":               testTxnLookup,
		"Unchanged":               testUnchanged,
		"SchemaEvolution":         testSchemaEvolution,
		"EvolutionSequence":       testEvolutionSequence,
		"TypedErrors":             testTypedErrors,
		"StageThenCommit":         testStage,
		"PreserveIdentity":        testPreserve,
		"ConcurrentAppends":       testConcurrentAppends,
		"ConcurrentReplaceAppend": testConcurrentReplaceAppend,
		"Maintain":                testMaintain,
		"ScanFilter":              testScanFilter,
		"ScanIn":                  testScanIn,
		"ScopedReplace":           testScopedReplace,
	}
	names := make([]string, 0, len(tests))
	for n := range tests {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			if e.Policies == nil {
				t.Fatal("contract: Env.Policies is nil: wire a *contract.Policies into the lakehouse's per-dataset schema policy (Config.SchemaPolicyFor: pols.For)")
			}
			defer func() {
				if e.Cleanup != nil {
					e.Cleanup()
				}
				e.Mem.AssertSize(t, 0)
			}()
			tests[name](t, e)
		})
	}
}

var target = facade.Target{DatasetID: "orders", WriterID: "pipeline.output", Workspace: "ws1"}

func meta(kv ...string) arrow.Metadata {
	return arrow.NewMetadata([]string{vocab.MetaPGType}, kv)
}

// Schema is the suite's business schema (the cursor's conventions).
func Schema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true, Metadata: meta("int8")},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: meta("text")},
		{Name: "amount", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}, Nullable: true, Metadata: meta("numeric")},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true, Metadata: meta("timestamptz")},
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true, Metadata: meta("bool")},
		{Name: "attrs", Type: arrow.BinaryTypes.String, Nullable: true,
			Metadata: arrow.NewMetadata([]string{vocab.MetaPGType, vocab.MetaJSON}, []string{"jsonb", "true"})},
		{Name: "small", Type: arrow.PrimitiveTypes.Int16, Nullable: true, Metadata: meta("int2")},
		{Name: "uid", Type: &arrow.FixedSizeBinaryType{ByteWidth: 16}, Nullable: true, Metadata: meta("uuid")},
		{Name: "tags", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true, Metadata: meta("_int4")},
		{Name: "day", Type: arrow.FixedWidthTypes.Date32, Nullable: true, Metadata: meta("date")},
	}, nil)
}

// Batches builds rows [from, from+n) in batches of size; row i's content is
// a function of i%distinct (so duplicates exist when distinct < n). The
// caller releases the batches.
func Batches(mem memory.Allocator, sc *arrow.Schema, from, n, size, distinct int) []arrow.RecordBatch {
	var out []arrow.RecordBatch
	for lo := from; lo < from+n; lo += size {
		hi := min(lo+size, from+n)
		b := array.NewRecordBuilder(mem, sc)
		for i := lo; i < hi; i++ {
			k := i % distinct
			for c, f := range sc.Fields() {
				fb := b.Field(c)
				if k%7 == 3 && f.Name != "id" {
					fb.AppendNull()
					continue
				}
				switch f.Name {
				case "id":
					fb.(*array.Int64Builder).Append(int64(k))
				case "name":
					fb.(*array.StringBuilder).Append(fmt.Sprintf("name-%d", k))
				case "amount":
					fb.(*array.Decimal128Builder).Append(decimal128.FromI64(int64(k)*1234 - 5000))
				case "ts":
					fb.(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + int64(k)*1_000_003))
				case "flag":
					fb.(*array.BooleanBuilder).Append(k%2 == 0)
				case "attrs":
					fb.(*array.StringBuilder).Append(fmt.Sprintf(`{"k":%d,"tag":"t%d"}`, k, k%5))
				case "small":
					if sb, ok := fb.(*array.StringBuilder); ok {
						sb.Append(fmt.Sprintf("s%d", k))
					} else {
						fb.(*array.Int16Builder).Append(int16(k % 1000))
					}
				case "uid":
					var u [16]byte
					u[0], u[15] = byte(k), byte(k>>8)
					fb.(*array.FixedSizeBinaryBuilder).Append(u[:])
				case "tags":
					lb := fb.(*array.ListBuilder)
					lb.Append(true)
					for j := range k % 3 {
						lb.ValueBuilder().(*array.Int32Builder).Append(int32(k + j))
					}
				case "day":
					fb.(*array.Date32Builder).Append(arrow.Date32(19000 + k%365))
				case "extra":
					fb.(*array.StringBuilder).Append("x")
				}
			}
		}
		out = append(out, b.NewRecordBatch())
		b.Release()
	}
	return out
}

// Seq yields the batches (borrowed).
func Seq(bs []arrow.RecordBatch) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for _, b := range bs {
			if !yield(b, nil) {
				return
			}
		}
	}
}

func release(bs []arrow.RecordBatch) {
	for _, b := range bs {
		b.Release()
	}
}

func write(t *testing.T, e *Env, mode facade.WriteMode, bs []arrow.RecordBatch, txn string) facade.CommitResult {
	t.Helper()
	res, err := e.LH.Write(context.Background(), target, facade.WriteRequest{
		Mode: mode, Schema: Schema(), Rows: Seq(bs), TxnID: txn,
		SourceRefs: []string{"src-a", "src-b"}, Metadata: map[string]string{"deploy": "d1"},
	})
	require.NoError(t, err)
	return res
}

// rows renders a snapshot as strings "index|id|row" sorted by __row_index.
func rows(t *testing.T, e *Env, snap int64, withIdentity bool) []string {
	t.Helper()
	var out []string
	for rec, err := range e.LH.Scan(context.Background(), target.DatasetID, facade.ScanOptions{SnapshotID: snap}) {
		require.NoError(t, err)
		sc := rec.Schema()
		for r := range int(rec.NumRows()) {
			var idx, parts []string
			for c, f := range sc.Fields() {
				v := rec.Column(c).ValueStr(r)
				switch f.Name {
				case facade.ColRowIndex:
					idx = append([]string{fmt.Sprintf("%012s", v)}, idx...)
				case facade.ColRowID:
					idx = append(idx, v)
				case facade.ColCreatedAt:
				default:
					parts = append(parts, f.Name+"="+v)
				}
			}
			if withIdentity {
				out = append(out, strings.Join(idx, "|")+"|"+strings.Join(parts, ","))
			} else {
				out = append(out, strings.Join(parts, ","))
			}
		}
	}
	sort.Strings(out)
	return out
}

func checksum(t *testing.T, bs []arrow.RecordBatch) facade.Checksum {
	c, err := facade.ChecksumBatches(Seq(bs))
	require.NoError(t, err)
	return c
}

func testReplaceTwice(t *testing.T, e *Env) {
	bs := Batches(e.Mem, Schema(), 0, 500, 128, 200) // duplicates: 500 rows, 200 distinct
	defer release(bs)
	r1 := write(t, e, facade.Replace, bs, "t1")
	r2 := write(t, e, facade.Replace, bs, "t2")
	assert.EqualValues(t, 500, r1.Rows)
	assert.EqualValues(t, 500, r2.Rows)
	assert.NotEqual(t, r1.SnapshotID, r2.SnapshotID)
	a, b := rows(t, e, r1.SnapshotID, true), rows(t, e, r2.SnapshotID, true)
	require.Len(t, a, 500)
	assert.Equal(t, a, b, "same replace, same contents and identity")
	ids := map[string]bool{}
	for _, r := range a {
		ids[strings.Split(r, "|")[1]] = true
	}
	assert.Len(t, ids, 500, "__row_id unique even for equal rows")
	assert.Equal(t, "000000000000", strings.Split(a[0], "|")[0])
	want := checksum(t, bs)
	assert.Equal(t, want, r2.Checksum)
	got, err := e.LH.Checksum(context.Background(), target.DatasetID, 0)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, "d1", r2.Summary[facade.SummaryMetaPrefix+"deploy"])
	assert.Equal(t, "pipeline.output", r2.Summary[vocab.SummaryWriterID])
	assert.Equal(t, "ws1", r2.Summary[vocab.SummaryWorkspace])
	assert.Equal(t, `["src-a","src-b"]`, r2.Summary[vocab.SummarySourceRefs])
	assert.Equal(t, "t2", r2.Summary[facade.SummaryTxnID])
	assert.False(t, r2.CommittedAt.IsZero())
	assert.NotNil(t, r2.Schema)
}

func testReplaceThenAppend(t *testing.T, e *Env) {
	b1 := Batches(e.Mem, Schema(), 0, 300, 100, 300)
	b2 := Batches(e.Mem, Schema(), 0, 200, 64, 300) // same contents as the first 200 rows
	defer release(b1)
	defer release(b2)
	write(t, e, facade.Replace, b1, "t1")
	r := write(t, e, facade.Append, b2, "t2")
	assert.EqualValues(t, 200, r.Rows)
	got := rows(t, e, 0, true)
	require.Len(t, got, 500)
	ids := map[string]bool{}
	for i, row := range got {
		p := strings.Split(row, "|")
		assert.Equal(t, fmt.Sprintf("%012d", i), p[0])
		ids[p[1]] = true
	}
	assert.Len(t, ids, 500, "appended duplicates of existing rows get new ids")
	c, err := e.LH.Checksum(context.Background(), target.DatasetID, 0)
	require.NoError(t, err)
	assert.Equal(t, checksum(t, append(slices.Clone(b1), b2...)), c)
}

func testEmptyReplace(t *testing.T, e *Env) {
	b1 := Batches(e.Mem, Schema(), 0, 50, 50, 50)
	defer release(b1)
	write(t, e, facade.Replace, b1, "t1")
	r := write(t, e, facade.Replace, nil, "t2")
	assert.EqualValues(t, 0, r.Rows)
	assert.Empty(t, rows(t, e, 0, false), "replace with no rows empties the table")
	assert.Len(t, rows(t, e, 0, false), 0)
	f, found, err := e.LH.FindTxn(context.Background(), target.DatasetID, "t2")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, r.SnapshotID, f.SnapshotID)
	// an empty first write creates the table with a snapshot
	r2, err := e.LH.Write(context.Background(), facade.Target{DatasetID: "fresh"}, facade.WriteRequest{Mode: facade.Replace, Schema: Schema(), Rows: Seq(nil), TxnID: "t3"})
	require.NoError(t, err)
	assert.NotZero(t, r2.SnapshotID)
}

func failingAt(bs []arrow.RecordBatch, n int, err error) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for i, b := range bs {
			if i == n {
				yield(nil, err)
				return
			}
			if !yield(b, nil) {
				return
			}
		}
	}
}

func testFailAtBatch(t *testing.T, e *Env) {
	b1 := Batches(e.Mem, Schema(), 0, 100, 50, 100)
	b2 := Batches(e.Mem, Schema(), 1000, 400, 50, 400)
	defer release(b1)
	defer release(b2)
	r1 := write(t, e, facade.Replace, b1, "t1")
	before := rows(t, e, 0, true)
	boom := errors.New("producer failed")
	for _, mode := range []facade.WriteMode{facade.Replace, facade.Append} {
		_, err := e.LH.Write(context.Background(), target, facade.WriteRequest{Mode: mode, Schema: Schema(), Rows: failingAt(b2, 5, boom), TxnID: "t2"})
		require.ErrorIs(t, err, boom)
		assert.Equal(t, before, rows(t, e, 0, true), "table unchanged")
		_, found, err := e.LH.FindTxn(context.Background(), target.DatasetID, "t2")
		require.NoError(t, err)
		assert.False(t, found)
	}
	last, found, err := e.LH.FindTxn(context.Background(), target.DatasetID, "t1")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, r1.SnapshotID, last.SnapshotID)
}

func testCancel(t *testing.T, e *Env) {
	b1 := Batches(e.Mem, Schema(), 0, 100, 50, 100)
	b2 := Batches(e.Mem, Schema(), 0, 400, 50, 400)
	defer release(b1)
	defer release(b2)
	write(t, e, facade.Replace, b1, "t1")
	before := rows(t, e, 0, true)
	ctx, cancel := context.WithCancel(context.Background())
	seq := func(yield func(arrow.RecordBatch, error) bool) {
		for i, b := range b2 {
			if i == 3 {
				cancel()
			}
			if !yield(b, nil) {
				return
			}
		}
	}
	_, err := e.LH.Write(ctx, target, facade.WriteRequest{Mode: facade.Replace, Schema: Schema(), Rows: seq, TxnID: "t2"})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, before, rows(t, e, 0, true))
}

func testCommitConflict(t *testing.T, e *Env) {
	b1 := Batches(e.Mem, Schema(), 0, 100, 50, 100)
	defer release(b1)
	write(t, e, facade.Replace, b1, "t1")
	before := rows(t, e, 0, true)
	for _, mode := range []facade.WriteMode{facade.Replace, facade.Append} {
		e.FailCommits(target.DatasetID, facade.ErrCommitConflict, 100)
		_, err := e.LH.Write(context.Background(), target, facade.WriteRequest{Mode: mode, Schema: Schema(), Rows: Seq(b1), TxnID: "t2"})
		require.ErrorIs(t, err, facade.ErrCommitConflict)
		require.NotErrorIs(t, err, facade.ErrCommitStateUnknown)
		e.FailCommits(target.DatasetID, facade.ErrCommitConflict, 0)
		assert.Equal(t, before, rows(t, e, 0, true))
	}
}

func testCommitUnknown(t *testing.T, e *Env) {
	b1 := Batches(e.Mem, Schema(), 0, 100, 50, 100)
	defer release(b1)
	write(t, e, facade.Replace, b1, "t1")
	before := rows(t, e, 0, true)
	e.FailCommits(target.DatasetID, facade.ErrCommitStateUnknown, 1)
	_, err := e.LH.Write(context.Background(), target, facade.WriteRequest{Mode: facade.Append, Schema: Schema(), Rows: Seq(b1), TxnID: "t2"})
	require.ErrorIs(t, err, facade.ErrCommitStateUnknown)
	require.ErrorContains(t, err, fmt.Sprintf("dataset %q", target.DatasetID))
	assert.Equal(t, before, rows(t, e, 0, true))
	_, found, err := e.LH.FindTxn(context.Background(), target.DatasetID, "t2")
	require.NoError(t, err)
	assert.False(t, found, "reconciled: absent")
}

func testIdempotentAppend(t *testing.T, e *Env) {
	b1 := Batches(e.Mem, Schema(), 0, 100, 50, 100)
	defer release(b1)
	write(t, e, facade.Replace, b1, "t1")
	a1 := write(t, e, facade.Append, b1, "a1")
	a2 := write(t, e, facade.Append, b1, "a1")
	assert.False(t, a1.Replayed)
	assert.True(t, a2.Replayed)
	assert.Equal(t, a1.SnapshotID, a2.SnapshotID)
	assert.Equal(t, a1.Rows, a2.Rows)
	assert.Equal(t, a1.CommittedAt, a2.CommittedAt)
	assert.Len(t, rows(t, e, 0, false), 200)
}

func testTxnLookup(t *testing.T, e *Env) {
	bs := Batches(e.Mem, Schema(), 0, 30, 10, 30)
	defer release(bs)
	var res []facade.CommitResult
	res = append(res, write(t, e, facade.Replace, bs, "x0"))
	for i := 1; i < 5; i++ {
		res = append(res, write(t, e, facade.Append, bs[:1], fmt.Sprintf("x%d", i)))
	}
	for i, r := range res {
		got, found, err := e.LH.FindTxn(context.Background(), target.DatasetID, fmt.Sprintf("x%d", i))
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, r.SnapshotID, got.SnapshotID)
		assert.Equal(t, r.Rows, got.Rows)
		assert.Equal(t, r.CommittedAt, got.CommittedAt)
		assert.Equal(t, len(r.DataFiles), len(got.DataFiles))
	}
	_, found, err := e.LH.FindTxn(context.Background(), target.DatasetID, "nope")
	require.NoError(t, err)
	assert.False(t, found)
	_, found, err = e.LH.FindTxn(context.Background(), "no_such_dataset", "x0")
	require.NoError(t, err)
	assert.False(t, found)
	_, _, err = e.LH.FindTxn(context.Background(), "bad id!", "x0")
	require.ErrorIs(t, err, facade.ErrInvalidDatasetID)
}

// unchanged is a lakehouse that tells whether a table still holds the
// rows of a snapshot (facade.Facade.Unchanged).
type unchanged interface {
	Unchanged(ctx context.Context, datasetID string, snapshotID int64) (string, error)
}

func testUnchanged(t *testing.T, e *Env) {
	u, ok := e.LH.(unchanged)
	require.True(t, ok, "%T tells whether a table holds a snapshot's rows", e.LH)
	ctx := context.Background()
	why, err := u.Unchanged(ctx, target.DatasetID, 1)
	require.NoError(t, err)
	assert.NotEmpty(t, why, "no table")
	bs := Batches(e.Mem, Schema(), 0, 30, 10, 30)
	defer release(bs)
	first := write(t, e, facade.Replace, bs, "u0")
	second := write(t, e, facade.Append, bs[:1], "u1")
	why, err = u.Unchanged(ctx, target.DatasetID, second.SnapshotID)
	require.NoError(t, err)
	assert.Empty(t, why, "the head")
	why, err = u.Unchanged(ctx, target.DatasetID, first.SnapshotID)
	require.NoError(t, err)
	assert.NotEmpty(t, why, "a write after it")
	why, err = u.Unchanged(ctx, target.DatasetID, 12345)
	require.NoError(t, err)
	assert.NotEmpty(t, why, "not in its history")
}

func testSchemaEvolution(t *testing.T, e *Env) {
	b1 := Batches(e.Mem, Schema(), 0, 40, 40, 40)
	defer release(b1)
	write(t, e, facade.Replace, b1, "t1")
	// v2: drop "flag", retype "small" to text, add "extra"
	var fields []arrow.Field
	for _, f := range Schema().Fields() {
		switch f.Name {
		case "flag":
			continue
		case "small":
			f.Type = arrow.BinaryTypes.String
			f.Metadata = meta("text")
		}
		fields = append(fields, f)
	}
	fields = append(fields, arrow.Field{Name: "extra", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: meta("text")})
	v2 := arrow.NewSchema(fields, nil)
	b2 := Batches(e.Mem, v2, 0, 25, 25, 25)
	defer release(b2)
	r, err := e.LH.Write(context.Background(), target, facade.WriteRequest{Mode: facade.Replace, Schema: v2, Rows: Seq(b2), TxnID: "t2"})
	require.NoError(t, err)
	var names []string
	for _, f := range r.Schema.Fields() {
		names = append(names, f.Name)
	}
	assert.NotContains(t, names, "flag")
	assert.Contains(t, names, "extra")
	got := rows(t, e, 0, false)
	require.Len(t, got, 25)
	assert.Contains(t, got[0], "extra=x")
	c, err := e.LH.Checksum(context.Background(), target.DatasetID, 0)
	require.NoError(t, err)
	assert.Equal(t, checksum(t, b2), c)
	// append with the old schema: "flag" could be added, but "small" is
	// retyped incompatibly: typed mismatch naming it, nothing written
	_, err = e.LH.Write(context.Background(), target, facade.WriteRequest{Mode: facade.Append, Schema: Schema(), Rows: Seq(b1), TxnID: "t3"})
	var sm *facade.SchemaMismatchError
	require.ErrorAs(t, err, &sm)
	assert.Equal(t, []string{"small"}, sm.Columns)
	assert.Len(t, rows(t, e, 0, false), 25)
	// under RefuseAppendAdds the new column is named too
	e.Policies.Set(target.DatasetID, facade.SchemaPolicy{RefuseAppendAdds: true})
	_, err = e.LH.Write(context.Background(), target, facade.WriteRequest{Mode: facade.Append, Schema: Schema(), Rows: Seq(b1), TxnID: "t3"})
	require.ErrorAs(t, err, &sm)
	assert.Equal(t, []string{"flag", "small"}, sm.Columns)
	e.Policies.Set(target.DatasetID, facade.SchemaPolicy{})
	// an append of the v1 schema less "small": "flag" is added as an
	// optional column; the 25 rows already there read NULL in it
	var v3 []arrow.Field
	for _, f := range Schema().Fields() {
		if f.Name != "small" {
			v3 = append(v3, f)
		}
	}
	b3 := Batches(e.Mem, arrow.NewSchema(v3, nil), 100, 10, 10, 10)
	defer release(b3)
	r, err = e.LH.Write(context.Background(), target, facade.WriteRequest{Mode: facade.Append, Schema: b3[0].Schema(), Rows: Seq(b3), TxnID: "t4"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"added":["flag"]}`, r.Summary[vocab.SummarySchemaChange])
	got = rows(t, e, 0, false)
	require.Len(t, got, 35)
	old := 0
	for _, row := range got {
		if strings.Contains(row, "extra=x") { // the rows of the replace (k%7 != 3)
			old++
			assert.Contains(t, row, "flag=(null)", "a row already in the table reads NULL in the added column")
		}
	}
	assert.Equal(t, 21, old)
}

func testTypedErrors(t *testing.T, e *Env) {
	ctx := context.Background()
	// unsupported type
	bad := arrow.NewSchema([]arrow.Field{{Name: "d", Type: arrow.FixedWidthTypes.Duration_us, Nullable: true}}, nil)
	_, err := e.LH.Write(ctx, target, facade.WriteRequest{Mode: facade.Replace, Schema: bad, Rows: Seq(nil)})
	var ut *facade.UnsupportedTypeError
	require.ErrorAs(t, err, &ut)
	assert.Equal(t, "d", ut.Column)
	// invalid dataset id
	_, err = e.LH.Write(ctx, facade.Target{DatasetID: "x'; drop table y;--"}, facade.WriteRequest{Mode: facade.Replace, Schema: Schema(), Rows: Seq(nil)})
	require.ErrorIs(t, err, facade.ErrInvalidDatasetID)
	// null in a required column: first create the table with id NOT NULL
	req := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: false},
		{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	mk := func(ids []int64, valid []bool) arrow.RecordBatch {
		b := array.NewRecordBuilder(e.Mem, req)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).AppendValues(ids, valid)
		for range ids {
			b.Field(1).(*array.StringBuilder).Append("v")
		}
		return b.NewRecordBatch()
	}
	ok := mk([]int64{1, 2}, nil)
	defer ok.Release()
	nt := facade.Target{DatasetID: "notnull"}
	_, err = e.LH.Write(ctx, nt, facade.WriteRequest{Mode: facade.Replace, Schema: req, Rows: Seq([]arrow.RecordBatch{ok})})
	require.NoError(t, err)
	withNull := mk([]int64{3, 0}, []bool{true, false})
	defer withNull.Release()
	for _, mode := range []facade.WriteMode{facade.Replace, facade.Append} {
		_, err = e.LH.Write(ctx, nt, facade.WriteRequest{Mode: mode, Schema: req, Rows: Seq([]arrow.RecordBatch{ok, withNull})})
		var nr *facade.NullInRequiredError
		require.ErrorAs(t, err, &nr, string(mode))
		assert.Equal(t, "id", nr.Column)
	}
	c, err := e.LH.Checksum(ctx, nt.DatasetID, 0)
	require.NoError(t, err)
	assert.EqualValues(t, 2, c.Rows, "table unchanged")
	// bad mode, nil rows
	_, err = e.LH.Write(ctx, target, facade.WriteRequest{Mode: "upsert", Schema: Schema(), Rows: Seq(nil)})
	require.ErrorIs(t, err, facade.ErrInvalidRequest)
	_, err = e.LH.Write(ctx, target, facade.WriteRequest{Mode: facade.Replace, Schema: Schema()})
	require.ErrorIs(t, err, facade.ErrInvalidRequest)
	// scans of unknown things
	for _, err := range e.LH.Scan(ctx, "missing", facade.ScanOptions{}) {
		require.ErrorIs(t, err, facade.ErrTableNotFound)
	}
	for _, err := range e.LH.Scan(ctx, nt.DatasetID, facade.ScanOptions{SnapshotID: 12345}) {
		require.ErrorIs(t, err, facade.ErrSnapshotNotFound)
	}
}

func testStage(t *testing.T, e *Env) {
	ctx := context.Background()
	b1 := Batches(e.Mem, Schema(), 0, 100, 50, 100)
	defer release(b1)
	write(t, e, facade.Replace, b1, "t1")
	before := rows(t, e, 0, true)
	st, err := e.LH.Stage(ctx, target, facade.WriteRequest{Mode: facade.Append, Schema: Schema(), Rows: Seq(b1), TxnID: "s1"})
	require.NoError(t, err)
	info := st.Info()
	assert.EqualValues(t, 100, info.Rows)
	assert.NotEmpty(t, info.DataFiles)
	assert.NotEmpty(t, info.WriteID)
	assert.Equal(t, before, rows(t, e, 0, true), "nothing visible before commit")
	_, found, err := e.LH.FindTxn(ctx, target.DatasetID, "s1")
	require.NoError(t, err)
	assert.False(t, found)
	res, err := st.Commit(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 100, res.Rows)
	_, err = st.Commit(ctx)
	require.ErrorIs(t, err, facade.ErrAlreadyFinished)
	// abort
	st2, err := e.LH.Stage(ctx, target, facade.WriteRequest{Mode: facade.Append, Schema: Schema(), Rows: Seq(b1), TxnID: "s2"})
	require.NoError(t, err)
	require.NoError(t, st2.Abort(ctx))
	assert.Len(t, rows(t, e, 0, false), 200)
}

func testPreserve(t *testing.T, e *Env) {
	ctx := context.Background()
	created := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	fields := append(Schema().Fields(),
		arrow.Field{Name: facade.ColRowID, Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: facade.ColCreatedAt, Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true})
	sc := arrow.NewSchema(fields, nil)
	base := Batches(e.Mem, Schema(), 0, 4, 4, 4)
	defer release(base)
	cols := slices.Clone(base[0].Columns())
	ib := array.NewInt64Builder(e.Mem)
	ib.AppendValues([]int64{42, 0, 43, 0}, []bool{true, false, true, false})
	tb := array.NewTimestampBuilder(e.Mem, &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"})
	tb.AppendValues([]arrow.Timestamp{arrow.Timestamp(created.UnixMicro()), 0, 0, 0}, []bool{true, false, false, false})
	ia, ta := ib.NewArray(), tb.NewArray()
	ib.Release()
	tb.Release()
	rec := array.NewRecordBatch(sc, append(cols, ia, ta), 4)
	ia.Release()
	ta.Release()
	defer rec.Release()
	_, err := e.LH.Write(ctx, target, facade.WriteRequest{Mode: facade.Replace, Schema: sc, Rows: Seq([]arrow.RecordBatch{rec})})
	require.NoError(t, err)
	var ids []int64
	var ts []int64
	for b, err := range e.LH.Scan(ctx, target.DatasetID, facade.ScanOptions{Columns: []string{facade.ColRowIndex, facade.ColRowID, facade.ColCreatedAt}}) {
		require.NoError(t, err)
		for r := range int(b.NumRows()) {
			ids = append(ids, b.Column(1).(*array.Int64).Value(r))
			ts = append(ts, int64(b.Column(2).(*array.Timestamp).Value(r)))
		}
	}
	require.Len(t, ids, 4)
	assert.EqualValues(t, 42, ids[0])
	assert.EqualValues(t, 43, ids[2])
	assert.NotEqualValues(t, 0, ids[1])
	assert.Equal(t, created.UnixMicro(), ts[0])
	assert.NotEqual(t, created.UnixMicro(), ts[1])
}

func testConcurrentAppends(t *testing.T, e *Env) {
	ctx := context.Background()
	b1 := Batches(e.Mem, Schema(), 0, 50, 50, 50)
	defer release(b1)
	write(t, e, facade.Replace, b1, "t0")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			_, errs[i] = e.LH.Write(ctx, target, facade.WriteRequest{Mode: facade.Append, Schema: Schema(), Rows: Seq(b1), TxnID: fmt.Sprintf("c%d", i)})
		})
	}
	wg.Wait()
	landed := 0
	for _, err := range errs {
		if err == nil {
			landed++
		} else {
			require.ErrorIs(t, err, facade.ErrCommitConflict)
		}
	}
	require.GreaterOrEqual(t, landed, 1)
	got := rows(t, e, 0, true)
	require.Len(t, got, 50*(1+landed))
	for i, r := range got {
		assert.Equal(t, fmt.Sprintf("%012d", i), strings.Split(r, "|")[0])
	}
}

func testConcurrentReplaceAppend(t *testing.T, e *Env) {
	ctx := context.Background()
	b1 := Batches(e.Mem, Schema(), 0, 50, 50, 50)
	b2 := Batches(e.Mem, Schema(), 100, 30, 30, 30)
	defer release(b1)
	defer release(b2)
	write(t, e, facade.Replace, b1, "t0")
	var wg sync.WaitGroup
	var errR, errA error
	wg.Go(func() {
		_, errR = e.LH.Write(ctx, target, facade.WriteRequest{Mode: facade.Replace, Schema: Schema(), Rows: Seq(b2), TxnID: "r"})
	})
	wg.Go(func() {
		_, errA = e.LH.Write(ctx, target, facade.WriteRequest{Mode: facade.Append, Schema: Schema(), Rows: Seq(b1), TxnID: "a"})
	})
	wg.Wait()
	for _, err := range []error{errR, errA} {
		if err != nil {
			require.ErrorIs(t, err, facade.ErrCommitConflict)
		}
	}
	got := rows(t, e, 0, true)
	// Whatever the interleaving, the table is one of the serial outcomes.
	switch len(got) {
	case 30, 60, 80, 100: // replace last; replace then append (30+... no: 30+50=80); append only (100)
	default:
		t.Fatalf("unexpected row count %d (replace err %v, append err %v)", len(got), errR, errA)
	}
	for i, r := range got {
		assert.Equal(t, fmt.Sprintf("%012d", i), strings.Split(r, "|")[0])
	}
}

// testMaintain: with the default lifecycle policy, the 20th commit says
// maintenance is due; Maintain expires the 10 oldest snapshots and keeps
// contents, the head's txn, appends and replays intact.
func testMaintain(t *testing.T, e *Env) {
	ctx := context.Background()
	m, ok := e.LH.(facade.Maintainer)
	require.True(t, ok, "%T implements facade.Maintainer", e.LH)
	rep, err := m.Maintain(ctx, "never-written")
	require.NoError(t, err)
	assert.Equal(t, "no table", rep.Skipped)

	bs := Batches(e.Mem, Schema(), 0, 10, 10, 10)
	defer release(bs)
	var last facade.CommitResult
	for i := range 20 {
		last = write(t, e, facade.Replace, bs, fmt.Sprintf("m%d", i))
		require.Equal(t, i == 19, last.MaintenanceDue, "write %d", i)
	}
	rep, err = m.Maintain(ctx, target.DatasetID)
	require.NoError(t, err)
	assert.Equal(t, target.DatasetID, rep.DatasetID)
	assert.Equal(t, 10, rep.SnapshotsExpired)
	assert.Empty(t, rep.Skipped)
	js, err := json.Marshal(rep)
	require.NoError(t, err)
	assert.Contains(t, string(js), `"snapshots_expired":10`)

	got, found, err := e.LH.FindTxn(ctx, target.DatasetID, "m19")
	require.NoError(t, err)
	require.True(t, found, "the head's txn")
	assert.Equal(t, last.SnapshotID, got.SnapshotID)
	_, found, err = e.LH.FindTxn(ctx, target.DatasetID, "m10")
	require.NoError(t, err)
	assert.True(t, found, "retained")
	_, found, err = e.LH.FindTxn(ctx, target.DatasetID, "m9")
	require.NoError(t, err)
	assert.False(t, found, "expired")
	sum, err := e.LH.Checksum(ctx, target.DatasetID, 0)
	require.NoError(t, err)
	assert.Equal(t, last.Checksum, sum)

	more := Batches(e.Mem, Schema(), 10, 5, 5, 5)
	defer release(more)
	a := write(t, e, facade.Append, more, "ma")
	assert.False(t, a.MaintenanceDue)
	r := rows(t, e, 0, true)
	require.Len(t, r, 15)
	assert.Equal(t, fmt.Sprintf("%012d", 14), strings.Split(r[14], "|")[0], "__row_index continues")
	again := write(t, e, facade.Append, more, "ma")
	assert.True(t, again.Replayed)
	assert.Equal(t, a.SnapshotID, again.SnapshotID)

	rep, err = m.Maintain(ctx, target.DatasetID)
	require.NoError(t, err)
	assert.Zero(t, rep.SnapshotsExpired, "expiry waits for EveryCommits expirable snapshots")
}
