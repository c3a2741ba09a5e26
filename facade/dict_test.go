package facade

import (
	"fmt"
	"maps"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/stretchr/testify/require"
)

func TestDictionaryOff(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "category", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	}, nil)
	batch := func(n int) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.NewGoAllocator(), sc)
		defer b.Release()
		for i := range n {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("n%d", i))
			b.Field(2).(*array.StringBuilder).Append([]string{"a", "b", "c"}[i%3])
			b.Field(3).(*array.BooleanBuilder).Append(i%2 == 0)
			lb := b.Field(4).(*array.ListBuilder)
			lb.Append(true)
			lb.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprintf("t%d", i))
		}
		return b.NewRecordBatch()
	}
	rec := batch(4096)
	defer rec.Release()
	ids := iceberg.Properties{dictColumnKey + ColRowID: "false", dictColumnKey + ColRowIndex: "false"}
	with := func(cols ...string) iceberg.Properties {
		p := maps.Clone(ids)
		for _, c := range cols {
			p[dictColumnKey+c] = "false"
		}
		return p
	}
	require.Equal(t, with("id", "name"), dictionaryOff(rec, nil))
	// explicit table settings win
	require.Equal(t, with("name"), dictionaryOff(rec, iceberg.Properties{dictColumnKey + "id": "true"}))
	require.Nil(t, dictionaryOff(rec, iceberg.Properties{dictEnabledKey: "FALSE"}))
	require.Nil(t, dictionaryOff(rec, iceberg.Properties{dictColumnKey + ColRowID: "false", dictColumnKey + ColRowIndex: "false",
		dictColumnKey + "id": "true", dictColumnKey + "name": "true"}))
	// too small a sample: identity columns only
	small := batch(100)
	defer small.Release()
	require.Equal(t, ids, dictionaryOff(small, nil))
	require.Equal(t, ids, dictionaryOff(nil, nil))
}

func TestPeekFirst(t *testing.T) {
	seq := func(yield func(arrow.RecordBatch, error) bool) {
		for i := range 3 {
			if !yield(nil, fmt.Errorf("e%d", i)) {
				return
			}
		}
	}
	all, stop, _, err := peekFirst(seq)
	defer stop()
	require.EqualError(t, err, "e0")
	var got []string
	for _, e := range all {
		got = append(got, e.Error())
	}
	require.Equal(t, []string{"e0", "e1", "e2"}, got)

	empty := func(func(arrow.RecordBatch, error) bool) {}
	all, stop2, first, err := peekFirst(empty)
	defer stop2()
	require.Nil(t, first)
	require.NoError(t, err)
	for range all {
		t.Fatal("empty sequence yielded")
	}
}
