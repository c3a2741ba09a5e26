package cursor

import (
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// RecordReader adapts the Stream to array.RecordReader, for example to feed
// iceberg-go's table.Transaction.Append or Overwrite directly.
//
// Usual RecordReader ownership applies: the batch returned by RecordBatch
// belongs to the reader and is valid until the next call to Next or the
// final Release; Retain it to keep it longer. The query starts on the
// first Next. The caller must Release the reader: that ends the query and
// returns the connection if the reader was not read to its end. Like All,
// it is single-use: a Stream yields either All or one RecordReader.
func (s *Stream) RecordReader() array.RecordReader {
	r := &reader{schema: s.schema}
	r.refs.Add(1)
	if !s.used.CompareAndSwap(false, true) {
		r.err, r.done = errAlreadyConsumed, true
		return r
	}
	r.b = s.start()
	return r
}

type reader struct {
	refs   atomic.Int64
	schema *arrow.Schema
	b      *batcher
	cur    arrow.RecordBatch
	err    error
	done   bool
}

var _ array.RecordReader = (*reader)(nil)

func (r *reader) Schema() *arrow.Schema          { return r.schema }
func (r *reader) RecordBatch() arrow.RecordBatch { return r.cur }

// Record is the deprecated spelling of RecordBatch.
//
// Deprecated: use RecordBatch.
func (r *reader) Record() arrow.RecordBatch { return r.cur }
func (r *reader) Err() error                { return r.err }
func (r *reader) Retain()                   { r.refs.Add(1) }

func (r *reader) Release() {
	if r.refs.Add(-1) != 0 {
		return
	}
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if !r.done {
		r.done = true
		r.b.finish(nil, true)
	}
}

func (r *reader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.done {
		return false
	}
	rec, err := r.b.next()
	if err != nil || rec == nil {
		r.done = true
		r.err = r.b.finish(err, false)
		return false
	}
	r.cur = rec
	return true
}
