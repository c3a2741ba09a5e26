package icechanges

import (
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
)

// Columns are the values of integer columns of one data file, every row in
// file order (deletes not applied), kept between reads in a Reader's
// Cache. A data file never changes, so they never go stale.
type Columns struct {
	fields []arrow.Field // as read, before Relabel
	vals   [][]int64
	nulls  [][]bool // per column; nil when the column holds no NULL
	rows   int64
}

// Bytes is the memory the columns hold.
func (c *Columns) Bytes() int64 {
	b := int64(64 + 64*len(c.fields))
	for i := range c.vals {
		b += 8 * int64(len(c.vals[i]))
		b += int64(len(c.nulls[i]))
	}
	return b
}

// Cache keeps the requested columns of the data files a Reader reads whole
// to pick the old images of removed rows: the next read of the same file
// and columns, typically the next run's deletes on a large file, picks
// them from memory. Only integer columns are kept.
type Cache interface {
	// Get returns the columns kept under id, or nil.
	Get(id string) *Columns
	// Put keeps c under id (or drops it).
	Put(id string, c *Columns)
	// MaxBytes is the most the cache holds; a file whose columns would
	// take more is not collected.
	MaxBytes() int64
}

// emitChunk is the most rows of one batch built from kept columns.
const emitChunk = 1 << 16

// cacheID is the id of df's columns in the Cache, "" when none is kept
// for this read.
func (rd *run) cacheID(df iceberg.DataFile) string {
	if rd.r.Cache == nil || df.Count() <= 0 || df.Count()*int64(9*len(rd.cols)) > rd.r.Cache.MaxBytes() {
		return ""
	}
	return fmt.Sprintf("icechanges\x00%s\x00%d\x00%d\x00%d\x00%s", df.FilePath(), df.FileSizeBytes(), df.Count(), rd.schemaID, strings.Join(rd.cols, "\x00"))
}

// emitRemoved yields the old images of df's rows at the sorted positions
// pos, or, when pos is nil, at every position keep accepts. It reads them
// from the Cache when df's columns are kept there, else reads df and keeps
// its columns when they are all integers.
func (rd *run) emitRemoved(df iceberg.DataFile, pos []int64, keep func(int64) bool) error {
	id := rd.cacheID(df)
	if id == "" {
		if pos != nil {
			keep = inSorted(pos)
		}
		return rd.emitFile(rd.proj, df, true, keep)
	}
	if c := rd.r.Cache.Get(id); c != nil && c.rows == df.Count() {
		return rd.emitColumns(c, pos, keep)
	}
	if pos != nil {
		keep = inSorted(pos)
	}
	col := &collector{c: &Columns{}, ok: true}
	err := rd.readFile(rd.proj, df, func(rec arrow.RecordBatch, at int64) error {
		col.add(rec, rd.cols)
		return rd.emit(rec, true, func(i int) bool { return keep(at + int64(i)) })
	})
	if err == nil && col.ok && col.c.rows == df.Count() {
		rd.r.Cache.Put(id, col.c)
	}
	return err
}

func inSorted(pos []int64) func(int64) bool {
	return func(p int64) bool {
		_, ok := slices.BinarySearch(pos, p)
		return ok
	}
}

// collector gathers a file's columns, batch after batch.
type collector struct {
	c  *Columns
	ok bool
}

func (k *collector) add(rec arrow.RecordBatch, cols []string) {
	if !k.ok {
		return
	}
	sc := rec.Schema()
	if k.c.fields == nil {
		for _, name := range cols {
			ix := sc.FieldIndices(name)
			if len(ix) != 1 || !isInt(sc.Field(ix[0]).Type) {
				k.ok = false
				return
			}
			k.c.fields = append(k.c.fields, sc.Field(ix[0]))
		}
		k.c.vals = make([][]int64, len(cols))
		k.c.nulls = make([][]bool, len(cols))
	}
	n := int(rec.NumRows())
	for j, name := range cols {
		ix := sc.FieldIndices(name)
		if len(ix) != 1 || !arrow.TypeEqual(sc.Field(ix[0]).Type, k.c.fields[j].Type) {
			k.ok = false
			return
		}
		a := rec.Column(ix[0])
		vals := k.c.vals[j]
		for i := range n {
			vals = append(vals, intAt(a, i))
		}
		k.c.vals[j] = vals
		if a.NullN() > 0 && k.c.nulls[j] == nil {
			k.c.nulls[j] = make([]bool, k.c.rows, k.c.rows+int64(n))
		}
		if k.c.nulls[j] != nil {
			for i := range n {
				k.c.nulls[j] = append(k.c.nulls[j], a.IsNull(i))
			}
		}
	}
	k.c.rows += int64(n)
}

func isInt(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64:
		return true
	}
	return false
}

func intAt(a arrow.Array, i int) int64 {
	switch a := a.(type) {
	case *array.Int64:
		return a.Value(i)
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Int16:
		return int64(a.Value(i))
	case *array.Int8:
		return int64(a.Value(i))
	}
	return 0
}

// emitColumns yields, from kept columns, the old images at the sorted
// positions pos, or at every position keep accepts when pos is nil.
func (rd *run) emitColumns(c *Columns, pos []int64, keep func(int64) bool) error {
	sc := arrow.NewSchema(c.fields, nil)
	bs := make([]array.Builder, len(c.fields))
	for j, f := range c.fields {
		bs[j] = array.NewBuilder(rd.r.Mem, f.Type)
		defer bs[j].Release()
	}
	n := 0
	flush := func() error {
		if n == 0 {
			return nil
		}
		cols := make([]arrow.Array, len(bs))
		for j, b := range bs {
			cols[j] = b.NewArray()
		}
		rec := array.NewRecordBatch(sc, cols, int64(n))
		for _, a := range cols {
			a.Release()
		}
		n = 0
		err := rd.emit(rec, true, func(int) bool { return true })
		rec.Release()
		return err
	}
	add := func(p int64) error {
		for j, b := range bs {
			if nl := c.nulls[j]; nl != nil && nl[p] {
				b.AppendNull()
				continue
			}
			switch b := b.(type) {
			case *array.Int64Builder:
				b.Append(c.vals[j][p])
			case *array.Int32Builder:
				b.Append(int32(c.vals[j][p]))
			case *array.Int16Builder:
				b.Append(int16(c.vals[j][p]))
			case *array.Int8Builder:
				b.Append(int8(c.vals[j][p]))
			}
		}
		if n++; n == emitChunk {
			return flush()
		}
		return nil
	}
	if pos != nil {
		for _, p := range pos {
			if p < 0 || p >= c.rows {
				return fmt.Errorf("%w: a delete at position %d of a file of %d rows", ErrUnknown, p, c.rows)
			}
			if err := add(p); err != nil {
				return err
			}
		}
	} else {
		for p := range c.rows {
			if keep(p) {
				if err := add(p); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}
