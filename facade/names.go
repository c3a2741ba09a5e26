package facade

import "github.com/lakewrite/lakewrite/internal/vocab"

// NameError is a dataset id or column name refused by the name rule of
// lakewrite (CheckDatasetID, CheckColumnNames). It matches
// ErrInvalidDatasetID or ErrInvalidColumnName.
//
// The rule is one for both sinks: package writestrategy applies it to every
// output before a write on either sink, so a dataset written to Postgres can
// always flip to Iceberg, and a column set accepted on either sink reads
// the same in Spark and Trino.
type NameError = vocab.NameError

// CheckDatasetID refuses, with a *NameError, a dataset id other than 1 to
// 128 characters of [A-Za-z0-9_-] starting with a letter or digit (so ids
// starting with "_", holding a space, a dot, a slash, a semicolon or a
// non-ASCII letter are refused).
func CheckDatasetID(id string) error { return vocab.CheckDatasetID(id) }

// CheckColumnNames refuses, with a *NameError, a column name that is
// empty, longer than 63 bytes, not valid UTF-8, holds a NUL byte or starts
// with "__" (reserved for the identity columns; "__source_row_key", the
// source key of a model output, is allowed), and a name equal to an
// earlier one up to case ("a" and "A" clash in Spark and Trino).
func CheckColumnNames(names ...string) error { return vocab.CheckColumnNames(names) }
