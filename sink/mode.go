package sink

import (
	"fmt"

	"github.com/lakewrite/lakewrite/internal/vocab"
)

// Sink is where a write goes, and the value of a writer flag. Sinks are
// ordered: [Postgres] < [Iceberg]. A writer's default and its per-dataset
// overrides are capped by its max sink (the ceiling). The values are the text
// stored in the writer flag tables and in the ledger's
// pipeline_build_transactions.sink; ledger.OpenParams.Sink and
// writestrategy's results use this same type.
type Sink = vocab.Sink

// The sinks, lowest first.
const (
	// Postgres writes rows into the dataset_rows row store ("pg").
	Postgres = vocab.Postgres
	// Iceberg writes one Iceberg snapshot through the facade
	// ("iceberg_native").
	Iceberg = vocab.Iceberg
)

// Relation is the storage of a dataset registered over an existing Postgres
// table, view or query (writestrategy.RegisterRelation): read in place,
// never written; not a flag value.
const Relation = vocab.Relation

// Sinks returns every sink in ascending order.
func Sinks() []Sink { return []Sink{Postgres, Iceberg} }

// ParseSink returns the sink named s, or an error wrapping [ErrInvalidSink].
func ParseSink(s string) (Sink, error) {
	k := Sink(s)
	if !k.Valid() {
		return "", fmt.Errorf("sink: %w: %q (want one of %q, %q)", ErrInvalidSink, s, Postgres, Iceberg)
	}
	return k, nil
}

// atLeast returns the sinks at or above s: the max sinks that allow s.
func atLeast(s Sink) []string {
	var out []string
	for _, x := range Sinks() {
		if x.Compare(s) >= 0 {
			out = append(out, string(x))
		}
	}
	return out
}
