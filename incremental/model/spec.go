package model

import (
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// ErrInvalid matches the error of a Spec that cannot run.
var ErrInvalid = errors.New("model: invalid model")

// DefaultWindow is the window size of a Spec whose Window is zero.
const DefaultWindow = 10_000

// Spec describes a model output: for each row of Source, the rows Func
// computes from it, correlated with the source row by KeyColumn.
type Spec struct {
	Output string
	Source string
	// Key are the source's columns identifying a row; their values
	// become KeyColumn (see KeySQL).
	Key []string
	// Columns are the source columns passed to Func after the key column
	// (none: the key only).
	Columns []string
	// Schema declares the output columns besides KeyColumn: known before
	// the first window.
	Schema *arrow.Schema
	// Func computes a window's output rows.
	Func Func
	// Window is the number of source rows per call (default DefaultWindow).
	Window int
	// Concurrency is the number of windows scored at a time (default 1).
	Concurrency int
	// Deadline bounds each call (0: none); a window past it fails the run.
	Deadline time.Duration
}

// Check refuses a Spec that cannot run, with an error matching ErrInvalid.
func (s *Spec) Check() error {
	switch {
	case s.Func == nil:
		return fmt.Errorf("%w: model %q has no Func", ErrInvalid, s.Output)
	case s.Schema == nil || s.Schema.NumFields() == 0:
		return fmt.Errorf("%w: model %q declares no output column (Schema)", ErrInvalid, s.Output)
	case len(s.Key) == 0:
		return fmt.Errorf("%w: model %q has no Key", ErrInvalid, s.Output)
	case s.Window < 0 || s.Concurrency < 0 || s.Deadline < 0:
		return fmt.Errorf("%w: model %q has a negative Window, Concurrency or Deadline", ErrInvalid, s.Output)
	}
	for _, f := range s.Schema.Fields() {
		if f.Name == KeyColumn {
			return fmt.Errorf("%w: model %q declares %s, which it writes itself", ErrInvalid, s.Output, KeyColumn)
		}
	}
	return nil
}

func (s *Spec) window() int64 {
	if s.Window == 0 {
		return DefaultWindow
	}
	return int64(s.Window)
}
