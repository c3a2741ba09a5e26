package cursor

import (
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// ColumnIssue is a result column some of whose values a stream would not
// carry as they are: numeric values it rounds to the column's scale
// (Options.Numeric = NumericRound), or values it refuses (ErrOutOfRange: an
// integer part beyond the precision, with NumericStrict more fractional
// digits than the scale, numeric NaN or ±Infinity, ±infinity dates and
// timestamps, timestamps after 294247-01-10 04:00:54.775807 UTC, arrays of
// more than one dimension). A stream fails at the first refused value.
type ColumnIssue struct {
	Column   string
	TypeName string // MetaPGType of the column
	// Rounded is the number of values rounded half-even to the scale.
	Rounded int64
	// Refused is the number of values refused; String says why the first
	// one was, and at which 0-based row.
	Refused int64

	index      int    // 0-based position in the result
	refusal    string // why the first refused value was refused
	refusedRow int64  // 0-based row of the first refused value
}

func (c ColumnIssue) String() string {
	var parts []string
	if c.Rounded > 0 {
		parts = append(parts, fmt.Sprintf("%d value(s) rounded half-even to the column's scale", c.Rounded))
	}
	if c.Refused > 0 {
		parts = append(parts, fmt.Sprintf("%d value(s) refused (first at row %d: %s)", c.Refused, c.refusedRow, c.refusal))
	}
	return fmt.Sprintf("column %q (%s): %s", c.Column, c.TypeName, strings.Join(parts, "; "))
}

// Preflight runs the stream's query and decodes every value as All would,
// without keeping any batch and without failing at a refused value: it
// returns the columns with values that would be rounded or refused, with
// their counts, in column order (none: the stream would carry every value
// exactly). Other errors (a query error, a malformed value, a runaway
// guard) are returned as All would yield them. It consumes the Stream, like
// All; Rounded counts the values it rounded.
func (s *Stream) Preflight() ([]ColumnIssue, error) {
	if !s.used.CompareAndSwap(false, true) {
		return nil, errAlreadyConsumed
	}
	r := &run{o: s.o, db: s.db, sql: s.sql, args: s.args}
	issues := make([]ColumnIssue, len(s.cols))
	builders := make([]array.Builder, 0, len(s.cols))
	err := func() error {
		if err := s.open(r); err != nil {
			return err
		}
		// Arrow builders (not the batch accumulators): a refused value
		// leaves its column a row short, which only matters to a batch,
		// and no batch is built here.
		decs := make([]decoder, len(s.cols))
		for i := range s.cols {
			b := array.NewBuilder(s.o.Allocator, s.cols[i].field.Type)
			builders = append(builders, b)
			decs[i] = newDecoder(s.cols[i].kind, &s.cols[i], b)
		}
		rows := r.rows
		pending := 0
		for rows.Next() {
			if err := r.limitRows(); err != nil {
				return err
			}
			raw := rows.RawValues()
			for i, d := range decs {
				err := d.decode(raw[i])
				if err == nil {
					continue
				}
				c := &s.cols[i]
				if !errors.Is(err, ErrOutOfRange) {
					return &decodeError{column: c.name, typeName: c.typeName, row: r.n - 1, err: err}
				}
				is := &issues[i]
				if is.Refused == 0 {
					is.refusal = strings.TrimPrefix(err.Error(), ErrOutOfRange.Error()+": ")
					is.refusedRow = r.n - 1
				}
				is.Refused++
			}
			if pending++; pending == s.o.BatchSize {
				pending = 0
				for _, b := range builders {
					b.NewArray().Release()
				}
				if err := r.checkDuration(); err != nil {
					return err
				}
			}
		}
		if err := rows.Err(); err != nil {
			return wrapErr("stream", err, r.qctx)
		}
		r.done = true
		return nil
	}()
	for _, b := range builders {
		b.Release()
	}
	if cerr := r.close(s.ctx, err, false); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	var out []ColumnIssue
	for i := range issues {
		is := issues[i]
		is.Rounded = s.rounded[i].Load()
		if is.Rounded == 0 && is.Refused == 0 {
			continue
		}
		c := &s.cols[i]
		is.Column, is.index, is.TypeName = c.name, i, c.typeName
		out = append(out, is)
	}
	return out, nil
}
