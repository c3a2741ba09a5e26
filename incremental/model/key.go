package model

import (
	"fmt"
	"strings"
)

// ErrKeyType matches the error of a key column whose type has no stable
// encoding in KeyColumn.
var ErrKeyType = fmt.Errorf("model: unsupported key column type")

// KeySQL returns the SQL expression of KeyColumn for a row whose key
// columns are exprs (SQL expressions, e.g. quoted column names) of the
// Postgres types types (as format_type prints them). Key columns may be
// integers, numeric, text, character varying, uuid, boolean, date,
// timestamp and timestamp with time zone (encoded at UTC): types whose
// JSON form depends on no session setting. Any other type is refused with
// an error matching ErrKeyType.
func KeySQL(exprs, types []string) (string, error) {
	if len(exprs) == 0 || len(exprs) != len(types) {
		return "", fmt.Errorf("model: a key needs one type per column (%d columns, %d types)", len(exprs), len(types))
	}
	parts := make([]string, len(exprs))
	for i, e := range exprs {
		t := types[i]
		switch {
		case t == "timestamp with time zone":
			parts[i] = "(" + e + " AT TIME ZONE 'UTC')"
		case stableKeyType(t):
			parts[i] = e
		default:
			return "", fmt.Errorf("%w: key column %s has type %s (use integers, numeric, text, varchar, uuid, boolean, date or timestamps)", ErrKeyType, e, t)
		}
	}
	return "pg_catalog.jsonb_build_array(" + strings.Join(parts, ", ") + ")::pg_catalog.text", nil
}

func stableKeyType(t string) bool {
	switch t {
	case "smallint", "integer", "bigint", "numeric", "text", "uuid", "boolean", "date", "timestamp without time zone":
		return true
	}
	return strings.HasPrefix(t, "numeric(") || strings.HasPrefix(t, "character varying")
}
