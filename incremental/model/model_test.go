package model_test

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/incremental/model"
)

var declared = arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)

// windows yields n windows of two keys each, "[2i]" and "[2i+1]".
func windows(mem memory.Allocator, n int) func() (arrow.RecordBatch, error) {
	i := 0
	sc := arrow.NewSchema([]arrow.Field{{Name: model.KeyColumn, Type: arrow.BinaryTypes.String}}, nil)
	return func() (arrow.RecordBatch, error) {
		if i == n {
			return nil, nil
		}
		b := array.NewRecordBuilder(mem, sc)
		defer b.Release()
		b.Field(0).(*array.StringBuilder).AppendValues([]string{key(2 * i), key(2*i + 1)}, nil)
		i++
		return b.NewRecordBatch(), nil
	}
}

func key(i int) string { return "[" + string(rune('a'+i%26)) + "]" }

// echo returns one row per window row with its key; bad keys the rows with
// key "[z]" instead.
func echo(mem memory.Allocator, bad bool) model.Func {
	return func(_ context.Context, in arrow.RecordBatch) (arrow.RecordBatch, error) {
		b := array.NewRecordBuilder(mem, model.OutputSchema(declared))
		defer b.Release()
		keys := in.Column(0).(*array.String)
		for i := range keys.Len() {
			k := keys.Value(i)
			if bad {
				k = "[z]"
			}
			b.Field(0).(*array.StringBuilder).Append(k)
			b.Field(1).(*array.Int64Builder).Append(int64(i))
		}
		return b.NewRecordBatch(), nil
	}
}

// Windows run concurrently and their outputs are written in window
// order; every batch is released.
func TestRunnerOrderAndRelease(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var got []string
	r := &model.Runner{Func: echo(mem, false), Concurrency: 4, Schema: model.OutputSchema(declared)}
	st, err := r.Run(context.Background(), windows(mem, 10), func(rec arrow.RecordBatch) error {
		k := rec.Column(0).(*array.String)
		for i := range k.Len() {
			got = append(got, k.Value(i))
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, model.Stats{Windows: 10, Rows: 20, Output: 20}, st)
	for i, k := range got {
		require.Equal(t, key(i), k)
	}
}

// An output row whose key is not its window's, an error and a panic fail
// the run with a *WindowError naming the window and its keys.
func TestRunnerFailures(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	boom := errors.New("boom")
	for name, f := range map[string]model.Func{
		"bad key": echo(mem, true),
		"error":   func(context.Context, arrow.RecordBatch) (arrow.RecordBatch, error) { return nil, boom },
		"panic":   func(context.Context, arrow.RecordBatch) (arrow.RecordBatch, error) { panic("exploded") },
	} {
		r := &model.Runner{Func: f, Concurrency: 2, Schema: model.OutputSchema(declared)}
		_, err := r.Run(context.Background(), windows(mem, 3), func(arrow.RecordBatch) error { return nil })
		var we *model.WindowError
		require.ErrorAs(t, err, &we, name)
		require.Equal(t, 0, we.Window, name)
		require.Equal(t, "[a]", we.First, name)
		require.Equal(t, "[b]", we.Last, name)
		switch name {
		case "bad key":
			require.ErrorIs(t, err, model.ErrOutput)
		case "error":
			require.ErrorIs(t, err, boom)
		case "panic":
			require.ErrorIs(t, err, model.ErrPanic)
		}
	}
}
