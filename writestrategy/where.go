package writestrategy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
)

// splitPredicateStep is QueryError.Step for a position in a Split's
// Predicate.
const splitPredicateStep = "predicate"

// fragment is a piece of caller SQL inside a generated statement: a
// Transform step's SQL, a Split's Predicate or a Query's SQL.
type fragment struct {
	step  string // "" for a Query
	start int    // byte offset in projection.sql
	text  string
}

// locate names p's output on the *QueryError in err and maps the server's
// error position, a character position in stmt (which holds p.sql), into
// the caller's fragment it falls in.
func (p *projection) locate(err error, stmt string) error {
	var qe *QueryError
	if !errors.As(err, &qe) {
		return err
	}
	if qe.Output == "" {
		qe.Output = p.output
	}
	var pe *pgconn.PgError
	if qe.Position > 0 || !errors.As(err, &pe) || pe.Position <= 0 {
		return err
	}
	base := strings.Index(stmt, p.sql)
	if base < 0 {
		return err
	}
	at, ok := byteOffset(stmt, int(pe.Position)-1)
	if !ok {
		return err
	}
	at -= base
	for _, f := range p.frags {
		if at >= f.start && at < f.start+len(f.text) {
			qe.Step = f.step
			qe.Position = utf8.RuneCountInString(f.text[:at-f.start]) + 1
			break
		}
	}
	return err
}

// byteOffset is the byte offset of the n-th character (0-based) of s.
func byteOffset(s string, n int) (int, bool) {
	i := 0
	for off := range s {
		if i == n {
			return off, true
		}
		i++
	}
	return 0, false
}

// whereError gives every query failure of a write one type, whatever the
// sink: a *cursor.QueryError (the Iceberg sink's stream) becomes a
// *QueryError wrapping it; a single-output write's *QueryError names its
// output.
func whereError(err error, outs []string) error {
	if err == nil {
		return nil
	}
	var qe *QueryError
	if !errors.As(err, &qe) {
		var ce *cursor.QueryError
		if !errors.As(err, &ce) {
			return err
		}
		qe = &QueryError{op: "compute: " + ce.Op, err: err}
		err = qe
	}
	if qe.Output == "" && len(outs) == 1 {
		qe.Output = outs[0]
	}
	return err
}

// writeError is what Dispatcher.Write returns for err: one query error
// type on both sinks (whereError), the server timeout that ended the write
// (nameReason), a catalog that did not answer within its bound
// (catalogNoConnection), or the connection lost (connectionLost).
func (d *Dispatcher) writeError(ctx context.Context, started time.Time, outs []string, err error) error {
	if err == nil {
		return nil
	}
	err = catalogNoConnection(d.nameReason(ctx, started, whereError(err, outs)))
	if ctx.Err() != nil {
		return err
	}
	return connectionLost(err, outs)
}

// ErrConnectionLost: the connection to Postgres went away during a write
// (the server was stopped or restarted, the backend was terminated, the
// network failed). The error names the outputs, says what became of the
// write and unwraps to the error the write failed with.
//
// When it says "nothing was written", the write failed before anything of
// it committed, and the next write of the outputs reconciles their intents
// (aborted). When it says "the outcome is unknown", the write may have
// landed (the connection went during its commit; the error also matches
// ledger.ErrOutcomeUnknown): the next write or Dispatcher.Recover rolls it
// forward or aborts it, and a retry with the same Request.IdempotencyKey
// returns the landed result instead of writing again.
var ErrConnectionLost = errors.New("writestrategy: connection to Postgres lost during the write")

// connectionLostError is an error matching ErrConnectionLost.
type connectionLostError struct {
	outputs []string
	unknown bool // the write may have landed
	err     error
}

func (e *connectionLostError) Error() string {
	outcome := "nothing was written"
	if e.unknown {
		outcome = "the outcome is unknown (the next write or Recover reconciles it)"
	}
	return fmt.Sprintf("writestrategy: connection to Postgres lost while writing %s: %s: %v",
		strings.Join(quoted(e.outputs), ", "), outcome, e.err)
}

// Is reports ErrConnectionLost.
func (e *connectionLostError) Is(target error) bool { return target == ErrConnectionLost }

// OutcomeUnknown reports whether the write may have landed (the ledger's
// convention).
func (e *connectionLostError) OutcomeUnknown() bool { return e.unknown }

func (e *connectionLostError) Unwrap() error { return e.err }

func quoted(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// lostCodes are the SQLSTATEs a server sends as it closes a session:
// admin_shutdown (pg_terminate_backend, a fast shutdown), crash_shutdown,
// cannot_connect_now.
var lostCodes = map[string]bool{"57P01": true, "57P02": true, "57P03": true}

// connectionLost returns err as an error matching ErrConnectionLost when
// the write failed because its connection went away, and err otherwise. A
// server timeout that ended the session is named by its own error
// (ErrServerTimeout) instead.
func connectionLost(err error, outs []string) error {
	if err == nil || errors.Is(err, ErrServerTimeout) || errors.Is(err, ErrConnectionLost) {
		return err
	}
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe):
		if !lostCodes[pe.Code] {
			return err
		}
	case !transportError(err) && !errors.Is(err, ledger.ErrLostHold):
		return err
	}
	unknown := errors.Is(err, ledger.ErrOutcomeUnknown) || errors.Is(err, facade.ErrCommitStateUnknown)
	return &connectionLostError{outputs: append([]string(nil), outs...), unknown: unknown, err: err}
}

// ErrPartitionKey: an Iceberg output's partition or sort declaration does
// not fit the output's columns: a key naming no column, a year, month, day
// or hour transform of a column that is not a date or timestamp (hour: not
// a timestamp), or a truncate of a type Iceberg does not truncate. It is
// returned before anything is computed; the error names the dataset, the
// key and the column's type (or the output's columns), and also matches
// ErrInvalid. (A bucket of an unsupported type matches ErrInvalid only.)
var ErrPartitionKey = fmt.Errorf("%w: partition or sort key does not fit the output", ErrInvalid)

// partitionKeyError refuses key transform(column) of dataset: typ is the
// column's Postgres type, empty when the output (of columns) has no such
// column. It matches ErrPartitionKey and ErrInvalid.
func partitionKeyError(dataset, column, transform, typ string, columns []string) error {
	if typ == "" {
		return fmt.Errorf("%w: dataset %q: %s(%s) names no column of the output (columns: %s)",
			ErrPartitionKey, dataset, transform, column, strings.Join(columns, ", "))
	}
	want := "a date, timestamp or timestamptz column"
	switch {
	case transform == "hour":
		want = "a timestamp or timestamptz column"
	case strings.HasPrefix(transform, "truncate"):
		want = "an integer, numeric, text, varchar, char or bytea column"
	}
	return fmt.Errorf("%w: dataset %q: %s(%s): column %q has type %s; %s takes %s",
		ErrPartitionKey, dataset, transform, column, column, typ, transform, want)
}

// checkOrderKeys refuses the row-order keys of an Iceberg output (its
// partition fields, then its sort order) that do not fit its columns:
// cols, oids and types describe the output.
func checkOrderKeys(dataset string, cols Schema, oids []uint32, types map[uint32]*pgTypeRow, keys []facade.OrderKey) error {
	if err := checkBucketKeys(dataset, cols, oids, keys); err != nil {
		return err
	}
	for _, k := range keys {
		idx := -1
		for i, c := range cols.Columns {
			if c.Name == k.Column {
				idx = i
				break
			}
		}
		tr := "identity"
		switch {
		case k.Bucket > 0:
			tr = fmt.Sprintf("bucket[%d]", k.Bucket)
		case k.Unit != "":
			tr = k.Unit
		case k.Width > 0:
			tr = fmt.Sprintf("truncate[%d]", k.Width)
		}
		if idx < 0 {
			return partitionKeyError(dataset, k.Column, tr, "", cols.names())
		}
		if idx >= len(oids) || (k.Unit == "" && k.Width <= 0) {
			continue
		}
		o := oids[idx]
		t := types[o]
		for t != nil && t.base != 0 {
			o = t.base
			t = types[o]
		}
		var ok bool
		switch {
		case k.Unit == "hour":
			ok = o == 1114 || o == 1184
		case k.Unit != "":
			ok = o == 1082 || o == 1114 || o == 1184
		default: // truncate: integers, numeric, strings, bytea
			ok = o == 20 || o == 21 || o == 23 || o == 1700 || o == 17 || o == 25 || o == 1043 || o == 1042 || o == 19 ||
				(t != nil && t.category == 'S')
		}
		if !ok {
			return partitionKeyError(dataset, k.Column, tr, cols.Columns[idx].Type, nil)
		}
	}
	return nil
}
