package cursor

import (
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// StreamMode selects how the query is run and its result streamed: [Direct]
// or [Staged]. See the package documentation. (It is unrelated to the write
// mode, facade.WriteMode, and to the read mode, incremental.ReadMode.)
type StreamMode int

const (
	// Direct runs the query in the compute transaction and streams its result
	// as it arrives. The transaction stays open for the whole stream.
	Direct StreamMode = iota
	// Staged materializes the result into a temporary table, commits the
	// compute transaction, then streams the table in a short read-only
	// transaction on the same session and drops it.
	Staged
)

// String returns "direct" or "staged".
func (m StreamMode) String() string {
	switch m {
	case Direct:
		return "direct"
	case Staged:
		return "staged"
	}
	return fmt.Sprintf("StreamMode(%d)", int(m))
}

// NumericPolicy says what a stream does with a numeric value that has more
// fractional digits than its column's scale. Only unconstrained numeric
// columns can hold such values (numeric(p,s) values always fit): they map
// to decimal128(38, Options.NumericScale), and, for example, avg() over
// numeric values below 1 returns 20 fractional digits. A value whose
// integer part does not fit the precision is an error under every policy.
type NumericPolicy int

const (
	// NumericDefault is the zero value: NumericRound in Options. (Where a
	// policy overrides a configured one, as writestrategy.Request.Numeric
	// does, it means "keep the configured policy".)
	NumericDefault NumericPolicy = iota
	// NumericRound rounds the value half-even (to the nearest, ties to the
	// even last digit) to the column's scale, exactly on its decimal
	// digits, and counts it (Stream.Rounded, ColumnIssue.Rounded).
	NumericRound
	// NumericStrict refuses the value: the stream fails with an
	// error matching ErrOutOfRange.
	NumericStrict
)

func (p NumericPolicy) String() string {
	switch p {
	case NumericDefault:
		return "default"
	case NumericRound:
		return "round"
	case NumericStrict:
		return "strict"
	}
	return fmt.Sprintf("NumericPolicy(%d)", int(p))
}

// Defaults for the zero fields of Options.
const (
	defaultBatchSize      = 16384
	defaultNumericScale   = 18
	defaultCleanupTimeout = 10 * time.Second
)

// Options configure a stream. The zero value (or a nil *Options) means the
// documented defaults.
type Options struct {
	// Mode is Direct (default) or Staged.
	Mode StreamMode
	// BatchSize is the number of rows per record batch, the last one
	// excepted. Zero means 16,384 rows after a first batch of at most
	// 1,024 rows, so that a small result takes small buffers. Unused by
	// Rows.
	BatchSize int
	// MaxRows, when > 0, fails the stream with an error matching
	// ErrRunaway once it would produce more than MaxRows rows.
	MaxRows int64
	// MaxDuration, when > 0, fails the stream with an error matching
	// ErrRunaway once it has run longer than this, counted from the start
	// of ranging (staging included).
	MaxDuration time.Duration
	// Allocator for Arrow memory (default memory.DefaultAllocator).
	Allocator memory.Allocator
	// UnknownAsText streams columns of unsupported types as their text
	// representation (Arrow string) instead of failing with
	// ErrUnsupportedType.
	UnknownAsText bool
	// NumericScale is the Arrow scale used for unconstrained numeric
	// columns, which become decimal128(38, NumericScale) (default 18). A
	// value with more fractional digits is rounded or refused as Numeric
	// says; one whose integer part does not fit is an error.
	NumericScale int
	// Numeric is the policy for numeric values with more fractional digits
	// than their column's scale (default NumericRound: rounded half-even
	// and counted; NumericStrict: an ErrOutOfRange error).
	Numeric NumericPolicy
	// CleanupTimeout bounds the cleanup (draining, rollback, drop of the
	// staging table), which runs under context.WithoutCancel (default
	// 10 s).
	CleanupTimeout time.Duration

	// smallFirst: BatchSize was defaulted; the first batch is smaller.
	smallFirst bool
}

func (o *Options) resolve() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Mode != Direct && r.Mode != Staged {
		return r, fmt.Errorf("cursor: Options.Mode %d is not Direct or Staged", int(r.Mode))
	}
	if r.BatchSize < 0 || r.MaxRows < 0 || r.MaxDuration < 0 || r.CleanupTimeout < 0 {
		return r, fmt.Errorf("cursor: Options.BatchSize, MaxRows, MaxDuration and CleanupTimeout must not be negative (0 means default or no limit)")
	}
	if r.Numeric < NumericDefault || r.Numeric > NumericStrict {
		return r, fmt.Errorf("cursor: Options.Numeric %d is not a NumericPolicy", int(r.Numeric))
	}
	if r.NumericScale < 0 || r.NumericScale > 38 {
		return r, fmt.Errorf("cursor: Options.NumericScale %d must be within 0..38", r.NumericScale)
	}
	if r.BatchSize == 0 {
		r.BatchSize, r.smallFirst = defaultBatchSize, true
	}
	if r.NumericScale == 0 {
		r.NumericScale = defaultNumericScale
	}
	if r.Numeric == NumericDefault {
		r.Numeric = NumericRound
	}
	if r.CleanupTimeout == 0 {
		r.CleanupTimeout = defaultCleanupTimeout
	}
	if r.Allocator == nil {
		r.Allocator = memory.DefaultAllocator
	}
	return r, nil
}
