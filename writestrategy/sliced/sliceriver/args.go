package sliceriver

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/writestrategy/sliced"
)

// Kind is the River job kind of a slice.
const Kind = "lakewrite_slice"

// ErrArgType: a slice's SQL argument has a Go type that does not cross
// processes exactly (see Arg); nothing was enqueued.
var ErrArgType = errors.New("sliceriver: a slice's SQL argument cannot be encoded")

// SliceArgs are the arguments of one slice's job: the write it belongs
// to, the snapshot it reads and the slice, as plain data.
type SliceArgs struct {
	// Write identifies the sliced write (facade.SlicedWrite.Ref).
	Write facade.SlicedWriteRef `json:"write"`
	// Snapshot is the coordinator's exported snapshot.
	Snapshot string `json:"snapshot"`
	// The slice: its range of the driving source and its SELECT.
	Index    int    `json:"index"`
	Lo       int64  `json:"lo"`
	Hi       int64  `json:"hi"`
	First    int64  `json:"first"`
	Capacity int64  `json:"capacity"`
	SQL      string `json:"sql"`
	Args     []Arg  `json:"args"`
	// Deadline is the write's: a slice still running then is cancelled
	// (zero: none but River's timeout).
	Deadline time.Time `json:"deadline"`
}

// Kind is the job kind (river.JobArgs).
func (SliceArgs) Kind() string { return Kind }

// NewSliceArgs is the job of slice s of the write ref, reading snapshot,
// to finish by deadline. An argument of s.Args that Arg cannot encode is
// an ErrArgType.
func NewSliceArgs(ref facade.SlicedWriteRef, snapshot string, s sliced.Slice, deadline time.Time) (SliceArgs, error) {
	args, err := EncodeArgs(s.Args)
	if err != nil {
		return SliceArgs{}, fmt.Errorf("slice %d: %w", s.Index, err)
	}
	return SliceArgs{Write: ref, Snapshot: snapshot, Index: s.Index, Lo: s.Lo, Hi: s.Hi, First: s.First, Capacity: s.Capacity,
		SQL: s.SQL, Args: args, Deadline: deadline}, nil
}

// Slice is the slice the job writes.
func (a SliceArgs) Slice() (sliced.Slice, error) {
	args, err := DecodeArgs(a.Args)
	if err != nil {
		return sliced.Slice{}, fmt.Errorf("slice %d: %w", a.Index, err)
	}
	return sliced.Slice{Range: sliced.Range{Index: a.Index, Lo: a.Lo, Hi: a.Hi, First: a.First, Capacity: a.Capacity}, SQL: a.SQL, Args: args}, nil
}

// Arg is one SQL argument with its Go type, so that it decodes to the
// value the coordinator planned (JSON alone turns an int64 into a
// float64). Types: nil, string, bool, int, int32, int64, float64,
// []string, []int64, []byte and time.Time.
type Arg struct {
	Type  string          `json:"t"`
	Value json.RawMessage `json:"v,omitempty"`
}

// EncodeArgs encodes SQL arguments; an argument of another type is an
// ErrArgType.
func EncodeArgs(args []any) ([]Arg, error) {
	out := make([]Arg, 0, len(args))
	for i, a := range args {
		var t string
		switch a.(type) {
		case nil:
			out = append(out, Arg{Type: "null"})
			continue
		case string:
			t = "string"
		case bool:
			t = "bool"
		case int:
			t = "int"
		case int32:
			t = "int32"
		case int64:
			t = "int64"
		case float64:
			t = "float64"
		case []string:
			t = "[]string"
		case []int64:
			t = "[]int64"
		case []byte:
			t = "[]byte"
		case time.Time:
			t = "time"
		default:
			return nil, fmt.Errorf("%w: argument $%d is a %T", ErrArgType, i+1, a)
		}
		v, err := json.Marshal(a)
		if err != nil {
			return nil, fmt.Errorf("%w: argument $%d: %w", ErrArgType, i+1, err)
		}
		out = append(out, Arg{Type: t, Value: v})
	}
	return out, nil
}

// DecodeArgs decodes what EncodeArgs encoded.
func DecodeArgs(args []Arg) ([]any, error) {
	out := make([]any, 0, len(args))
	for i, a := range args {
		var (
			v   any
			err error
		)
		switch a.Type {
		case "null":
		case "string":
			v, err = decode[string](a.Value)
		case "bool":
			v, err = decode[bool](a.Value)
		case "int":
			v, err = decode[int](a.Value)
		case "int32":
			v, err = decode[int32](a.Value)
		case "int64":
			v, err = decode[int64](a.Value)
		case "float64":
			v, err = decode[float64](a.Value)
		case "[]string":
			v, err = decode[[]string](a.Value)
		case "[]int64":
			v, err = decode[[]int64](a.Value)
		case "[]byte":
			v, err = decode[[]byte](a.Value)
		case "time":
			v, err = decode[time.Time](a.Value)
		default:
			err = fmt.Errorf("unknown type %q", a.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: argument $%d: %w", ErrArgType, i+1, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func decode[T any](raw json.RawMessage) (T, error) {
	var v T
	err := json.Unmarshal(raw, &v)
	return v, err
}
