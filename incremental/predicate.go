package incremental

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/ledger"
)

// Errors of the predicate builders; test with errors.Is.
var (
	// errNoDelta: the window does not allow a delta read (see
	// windowAllowsDelta); read a snapshot instead.
	errNoDelta = errors.New("window does not allow a delta read")
	// errInvalidArgument: an empty column name or a parameter number below 1.
	errInvalidArgument = errors.New("invalid argument")
)

// predicate is a SQL boolean expression with positional parameters and
// their values. Values are always passed as parameters, never spliced into
// the text; column names are quoted identifiers.
type predicate struct {
	// SQL uses parameters $N .. $N+len(Args)-1.
	SQL  string
	Args []any
}

// deltaPredicate builds `column > $N AND column <= $N+1` for window w over
// a timestamp column holding commit times (for example an Iceberg table's
// __created_at, which is the snapshot commit time). column is one or more
// identifier parts (e.g. "t", "__created_at"), each quoted. firstParam is the
// number of the first parameter (1 when the predicate's are the first).
// A window that does not allow a delta read gives errNoDelta.
func deltaPredicate(w Window, firstParam int, column ...string) (predicate, error) {
	col, err := quoteColumn(firstParam, column)
	if err != nil {
		return predicate{}, err
	}
	if !windowAllowsDelta(w) {
		return predicate{}, fmt.Errorf("incremental: deltaPredicate %s: %w", w, errNoDelta)
	}
	return predicate{
		SQL:  fmt.Sprintf("(%s > $%d AND %s <= $%d)", col, firstParam, col, firstParam+1),
		Args: []any{w.Low, w.High},
	}, nil
}

// txnPredicate builds `column = ANY($N::pg_catalog.uuid[])` over the ids of
// txns: the rows written by exactly the window's transactions (for the row
// store: dataset_rows.txn_id). Exact even where commit times collide; an
// empty txns matches nothing. The cast names the built-in type, so it means
// the same on a session where another type or a temporary table is named
// uuid.
func txnPredicate(txns []ledger.Txn, firstParam int, column ...string) (predicate, error) {
	col, err := quoteColumn(firstParam, column)
	if err != nil {
		return predicate{}, err
	}
	ids := make([]string, len(txns))
	for i, t := range txns {
		ids[i] = t.ID
	}
	return predicate{SQL: fmt.Sprintf("%s = ANY($%d::pg_catalog.uuid[])", col, firstParam), Args: []any{ids}}, nil
}

func quoteColumn(firstParam int, parts []string) (string, error) {
	if firstParam < 1 {
		return "", fmt.Errorf("incremental: %w: first parameter $%s; parameters start at $1", errInvalidArgument, strconv.Itoa(firstParam))
	}
	if len(parts) == 0 {
		return "", fmt.Errorf("incremental: %w: no column", errInvalidArgument)
	}
	for _, p := range parts {
		if strings.ReplaceAll(p, "\x00", "") == "" {
			return "", fmt.Errorf("incremental: %w: empty column name part in %q", errInvalidArgument, parts)
		}
	}
	return pgx.Identifier(parts).Sanitize(), nil
}
