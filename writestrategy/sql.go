package writestrategy

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/internal/vocab"
)

// maxIdentLen is Postgres' NAMEDATALEN-1: longer names are silently
// truncated by the server, so two different long names could collide.
const maxIdentLen = 63

// quoteIdent quotes a caller-supplied identifier, or refuses one that
// cannot be quoted safely.
func quoteIdent(what, name string) (string, error) {
	if err := checkIdent(what, name); err != nil {
		return "", err
	}
	return pgx.Identifier{name}.Sanitize(), nil
}

func checkIdent(what, name string) error {
	switch {
	case name == "":
		return identifierError(what, name, "empty")
	case len(name) > maxIdentLen:
		return identifierError(what, name, fmt.Sprintf("longer than %d bytes (Postgres would truncate it)", maxIdentLen))
	case !utf8.ValidString(name):
		return identifierError(what, name, "not valid UTF-8")
	case strings.ContainsRune(name, 0):
		return identifierError(what, name, "contains a NUL byte")
	}
	return nil
}

// checkColumnName applies the column name rule (vocab.ColumnNameProblem,
// which also reserves the identity columns' prefix) to one name.
func checkColumnName(name string) error {
	if p := vocab.ColumnNameProblem(name); p != "" {
		return identifierError("column", name, p)
	}
	return nil
}

// typeRE admits Postgres type names as format_type prints them:
// "bigint", "numeric(12,2)", "timestamp with time zone", "character varying(20)", "text[]".
var typeRE = regexp.MustCompile(`^[a-z][a-z0-9_ ]{0,62}(\(\d{1,4}(,\d{1,4})?\))?( with(out)? time zone)?(\[\])?$`)

func checkType(col, typ string) error {
	if !typeRE.MatchString(typ) {
		return identifierError("type of column "+strconv.Quote(col), typ, "not a plain Postgres type name")
	}
	return nil
}

// builder assembles a statement: SQL text from quoted identifiers and
// trusted fragments, values only as numbered parameters.
type builder struct {
	sb   strings.Builder
	args []any
}

// newBuilder starts a statement whose first len(userArgs) parameters are
// the caller's ($1..$k, used by the caller's own SQL fragments).
func newBuilder(userArgs []any) *builder {
	return &builder{args: append([]any(nil), userArgs...)}
}

// param adds a value and returns its placeholder.
func (b *builder) param(v any) string {
	b.args = append(b.args, v)
	return "$" + strconv.Itoa(len(b.args))
}

func (b *builder) w(parts ...string) {
	for _, p := range parts {
		b.sb.WriteString(p)
	}
}

func (b *builder) String() string { return b.sb.String() }

func quoteIdents(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = pgx.Identifier{n}.Sanitize()
	}
	return out
}
