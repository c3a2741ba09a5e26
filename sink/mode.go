package sink

import (
	"fmt"

	"github.com/lakewrite/lakewrite/internal/vocab"
)

// Sink is where a write goes, and the value of a writer flag. Flag values
// are ordered: [Postgres] < [Shadow] < [Iceberg]. A writer's default and its per-dataset
// overrides are capped by its max sink (the ceiling). The values are the text
// stored in the writer flag tables and in the ledger's
// pipeline_build_transactions.sink; ledger.OpenParams.Sink and
// writestrategy's results use this same type.
type Sink = vocab.Sink

// The sinks, lowest first.
const (
	// Postgres writes rows into the dataset_rows row store ("pg").
	Postgres = vocab.Postgres
	// Shadow is a flag value: Postgres stays the sink of record (readers,
	// watermark, row counts and expectations follow it) and every write
	// also writes the dataset's Iceberg table and records whether the two
	// agree ([Decision].Shadow; writestrategy's Dispatcher.Promote makes
	// Iceberg the sink of record once they do). A writer's max of Shadow
	// allows shadowing but not the flip; a max of Postgres stops shadows.
	Shadow = vocab.Shadow
	// Iceberg writes one Iceberg snapshot through the facade
	// ("iceberg_native").
	Iceberg = vocab.Iceberg
)

// Relation is the storage of a dataset registered over an existing Postgres
// table, view or query (writestrategy.RegisterRelation): read in place,
// never written; not a flag value.
const Relation = vocab.Relation

// sinks returns every write target in ascending order (not [Shadow],
// which writes both).
func sinks() []Sink { return []Sink{Postgres, Iceberg} }

// flagValues are the values of a writer flag, in ascending order.
var flagValues = []Sink{Postgres, Shadow, Iceberg}

// ParseSink returns the flag value named s, or an error naming the valid
// values.
func ParseSink(s string) (Sink, error) {
	k := Sink(s)
	if !k.Valid() {
		return "", fmt.Errorf("sink: %w: %q (want one of %q, %q, %q)", errInvalidSink, s, Postgres, Shadow, Iceberg)
	}
	return k, nil
}

// atLeast returns the flag values at or above s: the max sinks that allow s.
func atLeast(s Sink) []string {
	var out []string
	for _, x := range flagValues {
		if x.Compare(s) >= 0 {
			out = append(out, string(x))
		}
	}
	return out
}
