package cursor

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Column accumulators: the hot path of Batches. Each one appends the binary
// wire values of one column straight into the Arrow buffers of the batch
// being built, allocated once per batch at full batch size (variable-width
// data sized from the previous batch) from a recycler, which reuses the
// buffers of the batches the consumer has released. There is no Arrow
// builder per value, and no buffer is allocated, zeroed or copied per batch
// in the steady state.
//
// Arrays (lists) go through an Arrow ListBuilder with the element decoders
// of decode.go.

type colBuilder interface {
	// start begins a batch of at most size rows (at most the size given
	// to newColBuilder).
	start(size int)
	// decode appends one value (nil = NULL).
	decode(v []byte) error
	// build returns the batch's column as an array.
	build() arrow.Array
	// release frees what the accumulator still holds.
	release()
}

var errBatchTooLarge = errors.New("more than 2 GiB of variable-width data in one batch (lower Options.BatchSize)")

// alloc is the allocator and the batch size an accumulator works with.
type alloc struct {
	mem  memory.Allocator // a *recycler: memory is not zeroed
	size int              // rows per batch
}

func (a *alloc) bitmap() []byte {
	b := a.mem.Allocate(int(bitutil.BytesForBits(int64(a.size))))
	clear(b)
	return b
}

// free returns b (as allocated, or a prefix of it) to the allocator.
func (a *alloc) free(b []byte) {
	if b != nil {
		a.mem.Free(b)
	}
}

// validity is a column's null bitmap, allocated at the first null.
type validity struct {
	alloc
	bits  []byte
	nulls int
}

// ok marks row i valid.
func (v *validity) ok(i int) {
	if v.bits != nil {
		v.bits[i>>3] |= 1 << (i & 7)
	}
}

// null marks row i null.
func (v *validity) null(i int) {
	if v.bits == nil {
		v.bits = v.bitmap()
		bitutil.SetBitsTo(v.bits, 0, int64(i), true)
	}
	v.nulls++
}

// take hands the bitmap of n rows over (nil when there was no null).
func (v *validity) take(n int) *memory.Buffer {
	if v.bits == nil {
		return nil
	}
	b := memory.NewBufferWithAllocator(v.bits[:bitutil.BytesForBits(int64(n))], v.mem)
	v.bits, v.nulls = nil, 0
	return b
}

func (v *validity) release() {
	v.free(v.bits)
	v.bits, v.nulls = nil, 0
}

// makeArray wraps buffers (released here: the array holds them) as an array.
func makeArray(dt arrow.DataType, n, nulls int, bufs ...*memory.Buffer) arrow.Array {
	d := array.NewData(dt, n, bufs, nil, nulls, 0)
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
	a := array.MakeFromData(d)
	d.Release()
	return a
}

// fixed accumulates a fixed-width column whose Arrow layout is that of T.
type fixed[T any] struct {
	validity
	raw  []byte // the data buffer, as allocated
	vals []T    // raw as T, len = rows so far
	dt   arrow.DataType
}

func (c *fixed[T]) start(size int) {
	if c.raw != nil && c.size >= size { // kept from a batch that got no row
		return
	}
	c.release()
	c.size = size
	var z T
	c.raw = c.mem.Allocate(c.size * int(unsafe.Sizeof(z)))
	c.vals = unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(c.raw))), c.size)[:0]
}

func (c *fixed[T]) add(x T) {
	n := len(c.vals)
	c.vals = c.vals[:n+1] // never beyond size: the batch has at most size rows
	c.vals[n] = x
	c.ok(n)
}

func (c *fixed[T]) addNull() {
	n := len(c.vals)
	c.vals = c.vals[:n+1]
	var z T
	c.vals[n] = z
	c.null(n)
}

func (c *fixed[T]) build() arrow.Array {
	n := len(c.vals)
	var z T
	data := memory.NewBufferWithAllocator(c.raw[:n*int(unsafe.Sizeof(z))], c.mem)
	nulls := c.nulls
	a := makeArray(c.dt, n, nulls, c.take(n), data)
	c.raw, c.vals = nil, nil
	return a
}

func (c *fixed[T]) release() {
	c.validity.release()
	c.free(c.raw)
	c.raw, c.vals = nil, nil
}

type boolCol struct {
	validity
	vals []byte // value bitmap
	n    int
	dt   arrow.DataType
}

func (c *boolCol) start(size int) {
	if c.vals != nil && c.size < size {
		c.release()
	}
	if c.vals == nil {
		c.validity.release()
		c.size = size
		c.vals = c.bitmap()
	}
}

func (c *boolCol) decode(v []byte) error {
	i := c.n
	if v == nil {
		c.null(i)
		c.n++
		return nil
	}
	if len(v) != 1 {
		return errShort
	}
	if v[0] != 0 {
		c.vals[i>>3] |= 1 << (i & 7)
	}
	c.ok(i)
	c.n++
	return nil
}

func (c *boolCol) build() arrow.Array {
	n, nulls := c.n, c.nulls
	data := memory.NewBufferWithAllocator(c.vals[:bitutil.BytesForBits(int64(n))], c.mem)
	a := makeArray(c.dt, n, nulls, c.take(n), data)
	c.vals, c.n = nil, 0
	return a
}

func (c *boolCol) release() {
	c.validity.release()
	c.free(c.vals)
	c.vals, c.n = nil, 0
}

type int2Col struct{ fixed[int16] }

func (c *int2Col) decode(v []byte) error {
	if v == nil {
		c.addNull()
		return nil
	}
	if len(v) != 2 {
		return errShort
	}
	c.add(int16(be.Uint16(v)))
	return nil
}

type int4Col struct{ fixed[int32] }

func (c *int4Col) decode(v []byte) error {
	if v == nil {
		c.addNull()
		return nil
	}
	if len(v) != 4 {
		return errShort
	}
	c.add(int32(be.Uint32(v)))
	return nil
}

// int8Col also serves float8 (the same bits) and time (microseconds).
type int8Col struct{ fixed[uint64] }

func (c *int8Col) decode(v []byte) error {
	if v == nil {
		c.addNull()
		return nil
	}
	if len(v) != 8 {
		return errShort
	}
	c.add(be.Uint64(v))
	return nil
}

// float4Col keeps the bits of float4 as they are.
type float4Col struct{ fixed[uint32] }

func (c *float4Col) decode(v []byte) error {
	if v == nil {
		c.addNull()
		return nil
	}
	if len(v) != 4 {
		return errShort
	}
	c.add(be.Uint32(v))
	return nil
}

type dateCol struct{ fixed[int32] }

func (c *dateCol) decode(v []byte) error {
	if v == nil {
		c.addNull()
		return nil
	}
	days, err := parseDate(v)
	if err != nil {
		return err
	}
	c.add(days)
	return nil
}

type tsCol struct{ fixed[int64] }

func (c *tsCol) decode(v []byte) error {
	if v == nil {
		c.addNull()
		return nil
	}
	us, err := parseTimestamp(v)
	if err != nil {
		return err
	}
	c.add(us)
	return nil
}

type uuidCol struct{ fixed[[16]byte] }

func (c *uuidCol) decode(v []byte) error {
	if v == nil {
		c.addNull()
		return nil
	}
	if len(v) != 16 {
		return errShort
	}
	c.add([16]byte(v))
	return nil
}

type numericCol struct {
	fixed[decimal128.Num]
	numericFit
}

func (c *numericCol) decode(v []byte) error {
	if v == nil {
		c.addNull()
		return nil
	}
	n, err := c.fit(v)
	if err != nil {
		return err
	}
	c.add(n)
	return nil
}

// varCol accumulates a string or binary column (int32 offsets); for jsonb
// it checks and drops the version byte (1) of the binary format.
type varCol struct {
	validity
	offRaw  []byte  // the offsets buffer, as allocated
	offsets []int32 // offRaw as int32, len = rows so far + 1
	data    []byte  // the data buffer: len used, cap allocated
	want    int     // data capacity to start the next batch with
	dt      arrow.DataType
	jsonb   bool
}

func (c *varCol) start(size int) {
	if c.offRaw != nil && c.size < size {
		c.free(c.offRaw)
		c.offRaw, c.offsets = nil, nil
	}
	if c.offRaw == nil {
		c.validity.release()
		c.size = size
		c.offRaw = c.mem.Allocate((c.size + 1) * 4)
		c.offsets = unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(c.offRaw))), c.size+1)[:1]
		c.offsets[0] = 0
	}
	if c.data == nil {
		c.data = c.mem.Allocate(max(c.want, 4096))[:0]
	}
}

func (c *varCol) decode(v []byte) error {
	n := len(c.offsets)
	if v == nil {
		c.offsets = c.offsets[:n+1]
		c.offsets[n] = int32(len(c.data))
		c.null(n - 1)
		return nil
	}
	if c.jsonb {
		if len(v) < 1 || v[0] != 1 {
			return fmt.Errorf("unknown binary jsonb version")
		}
		v = v[1:]
	}
	if len(c.data)+len(v) > cap(c.data) {
		if err := c.grow(len(v)); err != nil {
			return err
		}
	}
	c.data = append(c.data, v...)
	c.offsets = c.offsets[:n+1]
	c.offsets[n] = int32(len(c.data))
	c.ok(n - 1)
	return nil
}

func (c *varCol) grow(extra int) error {
	need := len(c.data) + extra
	if need > math.MaxInt32 {
		return errBatchTooLarge
	}
	nb := c.mem.Allocate(min(max(need, 2*cap(c.data)), math.MaxInt32))
	n := copy(nb, c.data)
	c.free(c.data)
	c.data = nb[:n]
	return nil
}

func (c *varCol) build() arrow.Array {
	n := len(c.offsets) - 1
	nulls := c.nulls
	offsets := memory.NewBufferWithAllocator(c.offRaw[:(n+1)*4], c.mem)
	var data *memory.Buffer
	if c.data == nil {
		// Not a nil slice: Parquet writers take a nil value for "no
		// value" and would leave "" out of their statistics.
		data = memory.NewBufferBytes([]byte{})
	} else {
		data = memory.NewBufferWithAllocator(c.data, c.mem)
	}
	c.want = len(c.data) + len(c.data)/8
	a := makeArray(c.dt, n, nulls, c.take(n), offsets, data)
	c.offRaw, c.offsets, c.data = nil, nil, nil
	return a
}

func (c *varCol) release() {
	c.validity.release()
	c.free(c.offRaw)
	c.free(c.data)
	c.offRaw, c.offsets, c.data = nil, nil, nil
}

// builderCol decodes through an Arrow builder (lists).
type builderCol struct {
	b array.Builder
	d decoder
}

func (c *builderCol) start(int)             {}
func (c *builderCol) decode(v []byte) error { return c.d.decode(v) }
func (c *builderCol) build() arrow.Array    { return c.b.NewArray() }
func (c *builderCol) release()              { c.b.Release() }

// newColBuilder returns the accumulator of column c, for batches of at
// most size rows: rec allocates the buffers of the batches, mem (the
// stream's allocator) those of Arrow builders.
func newColBuilder(c *column, rec *recycler, mem memory.Allocator, size int) colBuilder {
	dt := c.field.Type
	a := alloc{mem: rec, size: size}
	v := validity{alloc: a}
	switch c.kind {
	case kBool:
		return &boolCol{validity: v, dt: dt}
	case kInt2:
		return &int2Col{fixed[int16]{validity: v, dt: dt}}
	case kInt4:
		return &int4Col{fixed[int32]{validity: v, dt: dt}}
	case kInt8, kFloat8, kTime:
		return &int8Col{fixed[uint64]{validity: v, dt: dt}}
	case kFloat4:
		return &float4Col{fixed[uint32]{validity: v, dt: dt}}
	case kNumeric:
		return &numericCol{fixed: fixed[decimal128.Num]{validity: v, dt: dt}, numericFit: c.numericFit}
	case kString, kText, kBytea:
		return &varCol{validity: v, dt: dt}
	case kJSONB:
		return &varCol{validity: v, dt: dt, jsonb: true}
	case kUUID:
		return &uuidCol{fixed[[16]byte]{validity: v, dt: dt}}
	case kDate:
		return &dateCol{fixed[int32]{validity: v, dt: dt}}
	case kTimestamp, kTimestamptz:
		return &tsCol{fixed[int64]{validity: v, dt: dt}}
	}
	b := array.NewBuilder(mem, dt)
	return &builderCol{b: b, d: newDecoder(c.kind, c, b)}
}
