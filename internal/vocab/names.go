package vocab

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// The name rule of lakewrite, one for both sinks: a dataset id or column
// name that one sink accepts, every other sink and every downstream engine
// (Spark, Trino) accepts too.
var (
	// ErrInvalidDatasetID: a dataset id outside the rule of CheckDatasetID.
	ErrInvalidDatasetID = errors.New("facade: invalid dataset id")
	// ErrInvalidColumnName: a column name outside the rule of
	// CheckColumnNames.
	ErrInvalidColumnName = errors.New("lakewrite: invalid column name")
)

// MaxColumnNameLen is Postgres' NAMEDATALEN-1: the server truncates longer
// names, so two different long names could collide.
const MaxColumnNameLen = 63

// DatasetIDRule describes the dataset ids CheckDatasetID accepts.
const DatasetIDRule = "1-128 characters of [A-Za-z0-9_-], starting with a letter or digit"

var datasetIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_\-]{0,127}$`)

// NameError is a refused dataset id or column name. It matches
// ErrInvalidDatasetID or ErrInvalidColumnName (by What).
type NameError struct {
	What   string // "dataset id" or "column"
	Name   string
	Reason string
}

func (e *NameError) Error() string {
	return fmt.Sprintf("lakewrite: %s %q refused: %s", e.What, e.Name, e.Reason)
}

// Unwrap returns the sentinel of the kind of name.
func (e *NameError) Unwrap() error {
	if e.What == "dataset id" {
		return ErrInvalidDatasetID
	}
	return ErrInvalidColumnName
}

// CheckDatasetID refuses a dataset id outside DatasetIDRule: such ids are
// safe as SQL identifiers, path segments and table names on every
// catalog, and cannot clash with the reserved "__" prefix.
func CheckDatasetID(id string) error {
	if datasetIDPattern.MatchString(id) {
		return nil
	}
	return &NameError{What: "dataset id", Name: id, Reason: "want " + DatasetIDRule}
}

// SourceRowKey is the column of a model output holding the key of the
// source row each output row was computed from: the one name with the
// "__" prefix an output column may have.
const SourceRowKey = "__source_row_key"

// ColumnNameProblem says why one column name is refused, or "" when it is
// accepted: it must be 1 to MaxColumnNameLen bytes of valid UTF-8 without
// NUL, and must not start with "__" (reserved for identity columns) unless
// it is SourceRowKey.
func ColumnNameProblem(name string) string {
	switch {
	case name == "":
		return "empty"
	case len(name) > MaxColumnNameLen:
		return fmt.Sprintf("longer than %d bytes (Postgres would truncate it)", MaxColumnNameLen)
	case !utf8.ValidString(name):
		return "not valid UTF-8"
	case strings.ContainsRune(name, 0):
		return "contains a NUL byte"
	case strings.HasPrefix(name, "__") && name != SourceRowKey:
		return `the "__" prefix is reserved for identity columns`
	}
	return ""
}

// FoldColumnName is the key under which two column names clash: Spark and
// Trino resolve column names case-insensitively, so "a" and "A" are one
// column there.
func FoldColumnName(name string) string { return strings.ToLower(name) }

// CheckColumnNames refuses the first name ColumnNameProblem refuses, and a
// name equal to an earlier one up to case (FoldColumnName).
func CheckColumnNames(names []string) error {
	seen := make(map[string]string, len(names))
	for _, n := range names {
		if p := ColumnNameProblem(n); p != "" {
			return &NameError{What: "column", Name: n, Reason: p}
		}
		k := FoldColumnName(n)
		if prev, dup := seen[k]; dup {
			if prev == n {
				return &NameError{What: "column", Name: n, Reason: "appears twice"}
			}
			return &NameError{What: "column", Name: n, Reason: fmt.Sprintf("clashes with column %q (names are compared case-insensitively, as Spark and Trino do)", prev)}
		}
		seen[k] = n
	}
	return nil
}

// DayStart reports whether t is midnight UTC, the only time a range bound
// on a date column may hold.
func DayStart(t time.Time) bool {
	return t.Equal(t.UTC().Truncate(24 * time.Hour))
}
