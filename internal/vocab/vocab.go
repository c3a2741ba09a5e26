package vocab

import (
	"cmp"
	"errors"
)

// Sink is where a write goes, and the value of a writer flag. Flag values
// are ordered: [Postgres] < [Shadow] < [Iceberg]; a writer's max flag caps
// its default and its overrides. The values are the text stored in the
// control-plane tables.
type Sink string

// The sinks, lowest first.
const (
	// Postgres writes rows into the dataset_rows row store.
	Postgres Sink = "pg"
	// Shadow is a flag value, not a write target: the row store stays the
	// sink of record and every write also writes the dataset's Iceberg
	// table, invisible to readers until the dataset is promoted.
	Shadow Sink = "shadow"
	// Iceberg writes one Iceberg snapshot through the facade.
	Iceberg Sink = "iceberg_native"
)

// Relation is where a dataset registered over an existing Postgres table,
// view or query lives: it is read in place and never written, so it is not
// a write target nor a flag value (Valid reports false).
const Relation Sink = "pg_relation"

// sinks lists every sink in ascending order; the index is the rank.
var sinks = [...]Sink{Postgres, Shadow, Iceberg}

// Valid reports whether s is one of the known sinks (flag values).
func (s Sink) Valid() bool { return s.rank() >= 0 }

// String returns the stored text of s.
func (s Sink) String() string { return string(s) }

func (s Sink) rank() int {
	for i, x := range sinks {
		if x == s {
			return i
		}
	}
	return -1
}

// Compare returns -1, 0 or +1 as s is below, equal to or above o in the sink
// order. Unknown sinks sort below every known sink.
func (s Sink) Compare(o Sink) int { return cmp.Compare(s.rank(), o.rank()) }

// WriteMode is how a write changes its dataset. The values are the text
// stored in the ledger (pipeline_build_transactions.write_mode) and in the
// lakewrite.mode snapshot summary key.
type WriteMode string

const (
	// Replace writes the whole dataset, replacing its contents.
	Replace WriteMode = "replace"
	// Append adds rows after the current ones.
	Append WriteMode = "append"
	// Maintenance is a ledger intent that changes no rows (compaction,
	// snapshot expiry, orphan removal). Only the ledger accepts it.
	Maintenance WriteMode = "maintenance"
)

// String returns the stored text of m.
func (m WriteMode) String() string { return string(m) }

// Arrow field metadata keys: set on every field by the cursor, read by the
// facade.
const (
	// MetaPGType holds the PostgreSQL type name of the column as in
	// pg_type.typname ("int8", "numeric", "_int4" for an int4 array, the
	// enum's own name for an enum). For a domain it is the name of the
	// domain's base type.
	MetaPGType = "lakewrite.pg_type"
	// MetaJSON is "true" on json and jsonb fields (and on the element field
	// of json/jsonb arrays), whose Arrow type is string.
	MetaJSON = "lakewrite.json"
)

// Sentinel errors shared by several packages; match them with errors.Is.
var (
	// ErrDatasetNotFound: the dataset id is not registered (no row in the
	// datasets table).
	ErrDatasetNotFound = errors.New("lakewrite: dataset not found")
)
