package manualtable

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net/http"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// rowReader reads one row of the body into the column builders, or returns
// io.EOF at the end of the body, or an *InputError.
type rowReader interface {
	readRow(cols []colBuilder) error
}

// upload streams a request body as Arrow record batches of the declared
// schema.
type upload struct {
	mem       memory.Allocator
	schema    *arrow.Schema
	tbl       *table
	src       rowReader
	batchRows int
	// err is the input error the stream ended with (nil when it ended
	// cleanly or was not consumed to the end).
	err  *InputError
	rows int64
	// requireRows: a body with no rows is an error (a replace that would
	// empty the table without saying so).
	requireRows bool
}

// Rows yields the body as record batches of at most batchRows rows. Each
// batch is valid during the yield only and released afterwards. The first
// input error is recorded in u.err and yielded once; then the sequence
// ends. Single-use.
func (u *upload) Rows() iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		rb := array.NewRecordBuilder(u.mem, u.schema)
		defer rb.Release()
		cols := make([]colBuilder, len(u.tbl.cols))
		for i := range cols {
			cols[i] = colBuilder{name: u.tbl.cols[i].Name, t: u.tbl.types[i], b: rb.Field(i)}
		}
		flush := func() bool {
			rec := rb.NewRecordBatch()
			defer rec.Release()
			return yield(rec, nil)
		}
		n := 0
		for {
			err := u.src.readRow(cols)
			if err == io.EOF {
				break
			}
			if err != nil {
				var ie *InputError
				if !errors.As(err, &ie) {
					ie = &InputError{Status: http.StatusBadRequest, Code: CodeBadRequest, Msg: err.Error(), Err: err}
				}
				u.err = ie
				yield(nil, ie)
				return
			}
			u.rows++
			if n++; n == u.batchRows {
				if !flush() {
					return
				}
				n = 0
			}
		}
		if u.rows == 0 && u.requireRows {
			u.err = &InputError{Status: http.StatusBadRequest, Code: CodeEmptyUpload, Err: ErrEmptyUpload,
				Msg: "the body has no rows: a replace with it would empty the table; send ?allow_empty=true to empty it on purpose"}
			yield(nil, u.err)
			return
		}
		if n > 0 {
			flush()
		}
	}
}

// csvReader reads CSV rows whose first line is a header naming every
// declared column once, in any order.
type csvReader struct {
	r        *csv.Reader
	pos      []int // field index -> declared column index
	lastLine int   // last line of the last record read
}

// newCSVReader reads and checks the header row.
func newCSVReader(body io.Reader, tbl *table) (*csvReader, error) {
	r := csv.NewReader(body)
	r.ReuseRecord = true
	header, err := r.Read()
	if err == io.EOF {
		return nil, badInput(http.StatusBadRequest, CodeBadCSV, 1, "", "empty body: want a header row naming the columns %s", strings.Join(tbl.names(), ", "))
	}
	if err != nil {
		return nil, csvError(err, 1)
	}
	pos := make([]int, len(header))
	seen := make([]bool, len(tbl.cols))
	for i, name := range header {
		if i == 0 {
			name = strings.TrimPrefix(name, "\ufeff") // byte order mark
		}
		name = strings.TrimSpace(name)
		j, ok := tbl.index[name]
		if !ok {
			return nil, badInput(http.StatusBadRequest, CodeBadCSV, 1, name, "header names a column that is not declared (declared: %s)", strings.Join(tbl.names(), ", "))
		}
		if seen[j] {
			return nil, badInput(http.StatusBadRequest, CodeBadCSV, 1, name, "header names the column twice")
		}
		seen[j] = true
		pos[i] = j
	}
	for j, ok := range seen {
		if !ok {
			return nil, badInput(http.StatusBadRequest, CodeBadCSV, 1, tbl.cols[j].Name, "header is missing a declared column")
		}
	}
	r.FieldsPerRecord = len(header)
	return &csvReader{r: r, pos: pos, lastLine: 1}, nil
}

func (c *csvReader) readRow(cols []colBuilder) error {
	rec, err := c.r.Read()
	if err == io.EOF {
		return io.EOF
	}
	if err != nil {
		// A *csv.ParseError carries its line; for a read error the line
		// after the last complete record is the best estimate.
		return csvError(err, int64(c.lastLine+1))
	}
	c.lastLine, _ = c.r.FieldPos(len(rec) - 1)
	for i, v := range rec {
		col := &cols[c.pos[i]]
		if err := col.appendCSV(v); err != nil {
			line, _ := c.r.FieldPos(i)
			return &InputError{Status: http.StatusBadRequest, Code: CodeTypeMismatch, Line: int64(line), Column: col.name, Msg: err.Error()}
		}
	}
	return nil
}

func csvError(err error, line int64) *InputError {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		msg := pe.Err.Error()
		if errors.Is(pe.Err, csv.ErrFieldCount) {
			msg = "wrong number of fields (the header has a different number)"
		}
		return &InputError{Status: http.StatusBadRequest, Code: CodeBadCSV, Line: int64(pe.Line), Msg: "malformed CSV: " + msg, Err: err}
	}
	return readError(err, line, CodeBadCSV)
}

// ndjsonReader reads one JSON object per line, keyed by column name.
// Missing keys are NULL; unknown keys are an error; blank lines are
// skipped.
type ndjsonReader struct {
	br      *bufio.Reader
	maxLine int
	tbl     *table
	line    int64
	buf     []byte
	obj     map[string]json.RawMessage
}

func newNDJSONReader(body io.Reader, tbl *table, maxLine int) *ndjsonReader {
	return &ndjsonReader{br: bufio.NewReaderSize(body, 64<<10), maxLine: maxLine, tbl: tbl}
}

// nextLine returns the next line without its line ending, or io.EOF.
func (n *ndjsonReader) nextLine() ([]byte, error) {
	n.buf = n.buf[:0]
	n.line++
	for {
		chunk, err := n.br.ReadSlice('\n')
		if len(n.buf)+len(chunk) > n.maxLine+2 {
			return nil, badInput(http.StatusRequestEntityTooLarge, CodeTooLarge, n.line, "", "line is longer than %d bytes", n.maxLine)
		}
		n.buf = append(n.buf, chunk...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && len(n.buf) == 0:
			return nil, io.EOF
		case err != nil && err != io.EOF:
			return nil, readError(err, n.line, CodeBadJSON)
		}
		return bytes.TrimRight(n.buf, "\r\n"), nil
	}
}

func (n *ndjsonReader) readRow(cols []colBuilder) error {
	var line []byte
	for {
		l, err := n.nextLine()
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(l)) > 0 {
			line = l
			break
		}
	}
	clear(n.obj)
	if n.obj == nil {
		n.obj = make(map[string]json.RawMessage, len(cols))
	}
	if err := json.Unmarshal(line, &n.obj); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return badInput(http.StatusBadRequest, CodeBadJSON, n.line, "", "want one JSON object per line, got a JSON %s", ute.Value)
		}
		return badInput(http.StatusBadRequest, CodeBadJSON, n.line, "", "malformed JSON: %v", err)
	}
	if n.obj == nil { // the line was null
		return badInput(http.StatusBadRequest, CodeBadJSON, n.line, "", "want one JSON object per line, got null")
	}
	for k := range n.obj {
		if _, ok := n.tbl.index[k]; !ok {
			return badInput(http.StatusBadRequest, CodeBadJSON, n.line, k, "not a declared column (declared: %s)", strings.Join(n.tbl.names(), ", "))
		}
	}
	for i := range cols {
		raw, ok := n.obj[cols[i].name]
		if !ok {
			cols[i].b.AppendNull()
			continue
		}
		if err := cols[i].appendJSON(raw); err != nil {
			return &InputError{Status: http.StatusBadRequest, Code: CodeTypeMismatch, Line: n.line, Column: cols[i].name, Msg: err.Error()}
		}
	}
	return nil
}

// names lists the declared column names in order.
func (t *table) names() []string {
	names := make([]string, len(t.cols))
	for i, c := range t.cols {
		names[i] = c.Name
	}
	return names
}

// sameColumns reports whether two declarations are equal.
func (t *table) sameColumns(o *table) bool {
	return slices.Equal(t.cols, o.cols)
}

// format of an upload body.
type format int

const (
	formatCSV format = iota + 1
	formatNDJSON
)

func (f format) String() string {
	if f == formatCSV {
		return "text/csv"
	}
	return "application/x-ndjson"
}
