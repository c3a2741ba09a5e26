package facade_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/internal/identity"

	"github.com/lakewrite/lakewrite/cursor"
)

// goldenBatch has one column per supported type family, with edge values
// (nulls, -0, NaN, infinities, empty strings, extreme integers, repeated
// rows).
func goldenBatch(mem memory.Allocator) arrow.RecordBatch {
	pg := func(t string) arrow.Metadata { return arrow.NewMetadata([]string{cursor.MetaPGType}, []string{t}) }
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true, Metadata: pg("int8")},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true, Metadata: pg("int4")},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true, Metadata: pg("float8")},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: pg("text")},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true, Metadata: pg("bool")},
		{Name: "d", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}, Nullable: true, Metadata: pg("numeric")},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true, Metadata: pg("timestamptz")},
		{Name: "day", Type: arrow.FixedWidthTypes.Date32, Nullable: true, Metadata: pg("date")},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true, Metadata: pg("_int8")},
	}, nil)
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	i64 := []int64{0, 1, -1, math.MaxInt64, math.MinInt64, 42, 0, 7}
	f64 := []float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), 1.5, 0, -2.25}
	strs := []string{"", "a", "é", strings.Repeat("x", 100), "\x00nul", "dup", "", "z"}
	for row := range len(i64) {
		r := row
		if row == 6 {
			r = 5 // rows 5 and 6 are equal: they differ by their ordinal only
		}
		b.Field(0).(*array.Int64Builder).Append(i64[r])
		if r == 7 {
			for c := 1; c < sc.NumFields(); c++ {
				b.Field(c).AppendNull()
			}
			continue
		}
		b.Field(1).(*array.Int32Builder).Append(int32(r*1000 - 3000))
		b.Field(2).(*array.Float64Builder).Append(f64[r])
		b.Field(3).(*array.StringBuilder).Append(strs[r])
		b.Field(4).(*array.BooleanBuilder).Append(r%2 == 0)
		b.Field(5).(*array.Decimal128Builder).Append(decimal128.FromI64(int64(r)*12345 - 50000))
		b.Field(6).(*array.TimestampBuilder).Append(arrow.Timestamp(time.Date(1999+r, 12, 31, 23, 59, 59, 999999000, time.UTC).UnixMicro()))
		b.Field(7).(*array.Date32Builder).Append(arrow.Date32(r*400 - 1000))
		lb := b.Field(8).(*array.ListBuilder)
		lb.Append(true)
		for k := range r {
			lb.ValueBuilder().(*array.Int64Builder).Append(int64(k * r))
		}
	}
	return b.NewRecordBatch()
}

// The row ids and the checksum of a fixed set of rows are frozen for
// facade.RowIDVersion "1": a change to the hash, to how a type is fed to it
// or to the ordinal of equal rows would give every row already stored in a
// table another __row_id. If this test fails, the change is not compatible
// with existing tables. Such a change must be a deliberate, visible
// migration: bump RowIDVersion (tables record it as
// lakewrite.row-id-version, and the facade refuses to write a table whose
// recorded version is not its own), pin the new values here under the new
// version, and give existing tables a migration path.
//
// The checksum tells a float -0 from +0 where the row ids do not (row 1
// holds a -0): the checksum of the rows without a -0 is the one version 1
// computed, pinned separately.
func TestRowIDsAndChecksumFrozen(t *testing.T) {
	require.Equal(t, "1", facade.RowIDVersion, "the golden values below are version 1's")
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := goldenBatch(mem)
	defer rec.Release()
	tsc, _, err := identity.PlanSchema("golden", facade.Replace, identity.SchemaPolicy{}, nil, rec.Schema())
	require.NoError(t, err)
	st, err := identity.NewTableStamper(mem, "golden", rec.Schema(), tsc, 0, time.Unix(0, 0))
	require.NoError(t, err)
	out, err := st.Stamp(rec)
	require.NoError(t, err)
	defer out.Release()
	idx := out.Schema().FieldIndices(facade.ColRowID)
	require.Len(t, idx, 1)
	ids := out.Column(idx[0]).(*array.Int64)
	var got []string
	for i := range ids.Len() {
		got = append(got, fmt.Sprint(ids.Value(i)))
	}
	want := []string{"2857209713494145369", "4701304292977990456", "5881600563733353618", "7063197154120658126",
		"1795510920371424477", "5535660648942533482", "7703091793346976001", "1197956310541792057"}
	require.Equal(t, want, got, "row ids")
	require.Equal(t, "8:17657d908730f6e8c9d239e8aade1469", st.Checksum().String(), "checksum")

	// Without row 1 (the only -0), the checksum of version 1.
	head, tail := rec.NewSlice(0, 1), rec.NewSlice(2, rec.NumRows())
	defer head.Release()
	defer tail.Release()
	sum, err := facade.ChecksumBatches(func(yield func(arrow.RecordBatch, error) bool) {
		_ = yield(head, nil) && yield(tail, nil)
	})
	require.NoError(t, err)
	require.Equal(t, "7:c738ce8fd3e067d0a859c8c640498cbe", sum.String(), "checksum of the rows without -0")
}
