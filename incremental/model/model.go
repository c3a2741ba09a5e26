package model

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lakewrite/lakewrite/internal/vocab"
)

// KeyColumn is the column of a model's windows and outputs holding the
// source row's key (see the package documentation for its encoding).
const KeyColumn = vocab.SourceRowKey

// Func computes the output rows of one window of source rows. The window
// has the key column first ([KeyColumn], a string) then the columns the
// model passes in; it is borrowed for the call and released after it (Retain
// it to keep it longer). The returned batch (nil for no rows) belongs to
// the caller, who releases it; it must have the model's output schema
// ([OutputSchema]) and every row's key must be one of the window's. Func
// must honour ctx: it is cancelled at the window's deadline and when
// another window fails. Calls run concurrently when the model's
// Concurrency is above one.
type Func func(ctx context.Context, window arrow.RecordBatch) (arrow.RecordBatch, error)

// ErrPanic matches the error of a window whose function panicked.
var ErrPanic = errors.New("model: the function panicked")

// ErrOutput matches the error of a window whose output is invalid: a batch
// of another schema than the declared one, or a row whose key is NULL or is
// not the key of a row of the window.
var ErrOutput = errors.New("model: invalid output")

// WindowError is the error of a failed window: its index (from 0, in
// source order) and the keys of its first and last source rows.
type WindowError struct {
	Window      int
	First, Last string
	Err         error
}

func (e *WindowError) Error() string {
	return fmt.Sprintf("model: window %d (source keys %s to %s): %v", e.Window, e.First, e.Last, e.Err)
}

// Unwrap returns the window's error.
func (e *WindowError) Unwrap() error { return e.Err }

// WindowEvent reports one window scored: its index, its source rows, the
// rows the function returned, the function's duration, and the totals so
// far (windows come in window order).
type WindowEvent struct {
	Window   int
	Rows     int64
	Output   int64
	Duration time.Duration
	// Done and Total are the source rows scored so far and the source rows
	// of the run (Total is 0 when unknown).
	Done, Total int64
}

// Stats are the totals of a run: windows, source rows passed to the
// function and output rows it returned.
type Stats struct {
	Windows int
	Rows    int64
	Output  int64
}

// OutputSchema is the schema a model's function returns: [KeyColumn] (a
// string) then the declared columns.
func OutputSchema(declared *arrow.Schema) *arrow.Schema {
	fields := []arrow.Field{{Name: KeyColumn, Type: arrow.BinaryTypes.String, Nullable: true}}
	if declared != nil {
		fields = append(fields, declared.Fields()...)
	}
	return arrow.NewSchema(fields, nil)
}

// Runner runs a function over windows. Its zero Concurrency means one
// window at a time; a zero Deadline means none.
type Runner struct {
	Func        Func
	Concurrency int
	Deadline    time.Duration
	// Schema is the output schema (OutputSchema of the declared columns).
	Schema *arrow.Schema
	// Total is the number of source rows, for WindowEvent.Total; 0 when
	// unknown.
	Total int64
	// Progress, when set, is called after each window's output is written,
	// on the caller's goroutine.
	Progress func(WindowEvent)
}

type result struct {
	out         arrow.RecordBatch
	rows        int64
	first, last string
	dur         time.Duration
	err         error
}

type job struct {
	window int
	done   chan result
}

// Run pulls windows with read until it returns a nil batch, calls the
// function on each (up to Concurrency at a time) and passes each window's
// output, in window order, to write. read and write run on the caller's
// goroutine, never concurrently with each other; read's batches belong to
// Run, write's to the caller of write only for the call (Retain to keep
// one). The first failure (of read, of a window, of write, or ctx) ends
// the run once every call in flight has returned.
func (r *Runner) Run(ctx context.Context, read func() (arrow.RecordBatch, error), write func(arrow.RecordBatch) error) (Stats, error) {
	if r.Func == nil || r.Schema == nil {
		return Stats{}, errors.New("model: Runner needs a Func and a Schema")
	}
	conc := max(r.Concurrency, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		queue []job
		st    Stats
		eof   bool
	)
	// drain waits for every window in flight and frees its output.
	drain := func() {
		cancel()
		for _, j := range queue {
			if res := <-j.done; res.out != nil {
				res.out.Release()
			}
		}
		queue = nil
	}
	defer drain()
	next := 0
	for {
		for !eof && len(queue) < conc {
			if err := ctx.Err(); err != nil {
				return st, err
			}
			in, err := read()
			if err != nil {
				return st, err
			}
			if in == nil || in.NumRows() == 0 {
				if in != nil {
					in.Release()
				}
				eof = true
				break
			}
			j := job{window: next, done: make(chan result, 1)}
			next++
			queue = append(queue, j)
			go func() { j.done <- r.call(ctx, j.window, in) }()
		}
		if len(queue) == 0 {
			return st, nil
		}
		j := queue[0]
		res := <-j.done
		queue = queue[1:]
		if res.err != nil {
			if res.out != nil {
				res.out.Release()
			}
			return st, &WindowError{Window: j.window, First: res.first, Last: res.last, Err: res.err}
		}
		var out int64
		if res.out != nil {
			out = res.out.NumRows()
			err := write(res.out)
			res.out.Release()
			if err != nil {
				return st, err
			}
		}
		st.Windows++
		st.Rows += res.rows
		st.Output += out
		if r.Progress != nil {
			r.Progress(WindowEvent{Window: j.window, Rows: res.rows, Output: out, Duration: res.dur, Done: st.Rows, Total: r.Total})
		}
	}
}

// call runs the function on one window (which it releases), recovering a
// panic and checking the output.
func (r *Runner) call(ctx context.Context, window int, in arrow.RecordBatch) (res result) {
	defer in.Release()
	res.rows = in.NumRows()
	keys, err := windowKeys(in)
	if err != nil {
		res.err = err
		return res
	}
	res.first, res.last = keys.Value(0), keys.Value(keys.Len()-1)
	if r.Deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Deadline)
		defer cancel()
	}
	t0 := time.Now()
	func() {
		defer func() {
			if p := recover(); p != nil {
				res.out, res.err = nil, fmt.Errorf("%w: %v\n%s", ErrPanic, p, trimStack(debug.Stack()))
			}
		}()
		res.out, res.err = r.Func(ctx, in)
	}()
	res.dur = time.Since(t0)
	if res.err == nil {
		// A function that ignored its deadline (or a cancelled run) does
		// not get its late output written.
		res.err = ctx.Err()
	}
	if res.err == nil && res.out != nil {
		res.err = r.check(keys, res.out)
	}
	return res
}

// windowKeys returns the key column of a window.
func windowKeys(in arrow.RecordBatch) (*array.String, error) {
	if in.NumCols() == 0 || in.ColumnName(0) != KeyColumn {
		return nil, fmt.Errorf("model: a window's first column must be %s", KeyColumn)
	}
	keys, ok := in.Column(0).(*array.String)
	if !ok {
		return nil, fmt.Errorf("model: a window's %s column is %s, not a string", KeyColumn, in.Column(0).DataType())
	}
	return keys, nil
}

// check refuses an output batch of another schema than r.Schema, or
// holding a key that is NULL or not the key of a row of the window.
func (r *Runner) check(keys *array.String, out arrow.RecordBatch) error {
	if !sameFields(out.Schema(), r.Schema) {
		return fmt.Errorf("%w: the function returned schema %s, want %s", ErrOutput, out.Schema(), r.Schema)
	}
	if out.NumRows() == 0 {
		return nil
	}
	in := make(map[string]struct{}, keys.Len())
	for i := range keys.Len() {
		in[keys.Value(i)] = struct{}{}
	}
	ok := out.Column(0).(*array.String)
	for i := range ok.Len() {
		if ok.IsNull(i) {
			return fmt.Errorf("%w: output row %d has a NULL %s", ErrOutput, i, KeyColumn)
		}
		if _, found := in[ok.Value(i)]; !found {
			return fmt.Errorf("%w: output row %d has %s %s, not the key of a row of its window", ErrOutput, i, KeyColumn, ok.Value(i))
		}
	}
	return nil
}

// sameFields compares names and types, not nullability or metadata.
func sameFields(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.NumFields() {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || !arrow.TypeEqual(fa.Type, fb.Type) {
			return false
		}
	}
	return true
}

// trimStack keeps the stack of a recovered panic short: the frames from
// the panic on, at most 20 lines.
func trimStack(stack []byte) string {
	lines := strings.Split(strings.TrimSpace(string(stack)), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "panic(") {
			lines = lines[i:]
			break
		}
	}
	if len(lines) > 20 {
		lines = lines[:20]
	}
	return strings.Join(lines, "\n")
}
