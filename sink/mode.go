package sink

import (
	"cmp"
	"fmt"
)

// Mode is a writer flag value. Modes are ordered: [ModePG] < [ModeIcebergNative].
// A writer's default mode and its per-dataset overrides are capped by its
// max mode (the ceiling).
type Mode string

// The modes, lowest first.
const (
	ModePG            Mode = "pg"
	ModeIcebergNative Mode = "iceberg_native"
)

// modes lists every mode in ascending order; the index is the rank.
var modes = [...]Mode{ModePG, ModeIcebergNative}

// Modes returns every mode in ascending order.
func Modes() []Mode { return append([]Mode(nil), modes[:]...) }

// ParseMode returns the mode named s, or an error wrapping [ErrInvalidMode].
func ParseMode(s string) (Mode, error) {
	m := Mode(s)
	if !m.Valid() {
		return "", fmt.Errorf("sink: %w: %q (want one of %q, %q)", ErrInvalidMode, s, ModePG, ModeIcebergNative)
	}
	return m, nil
}

// Valid reports whether m is one of the known modes.
func (m Mode) Valid() bool { return m.rank() >= 0 }

func (m Mode) rank() int {
	for i, x := range modes {
		if x == m {
			return i
		}
	}
	return -1
}

// Compare returns -1, 0 or +1 as m is below, equal to or above o in the mode
// order. Unknown modes sort below every known mode.
func (m Mode) Compare(o Mode) int {
	return cmp.Compare(m.rank(), o.rank())
}

// atLeast returns the modes at or above m: the max modes that allow m.
func (m Mode) atLeast() []string {
	var out []string
	for _, x := range modes {
		if x.Compare(m) >= 0 {
			out = append(out, string(x))
		}
	}
	return out
}

// Sink returns where a write in mode m goes, or "" for an unknown mode.
func (m Mode) Sink() Sink {
	switch m {
	case ModePG:
		return Postgres
	case ModeIcebergNative:
		return Iceberg
	}
	return ""
}

// Sink is where a write goes. Its values are the text the ledger records in
// pipeline_build_transactions.sink (pass string(decision.Sink)).
type Sink string

// The sinks.
const (
	// Postgres writes rows into the dataset_rows row store.
	Postgres Sink = "pg"
	// Iceberg writes one Iceberg snapshot through the facade.
	Iceberg Sink = "iceberg_native"
)

// Valid reports whether s is one of the known sinks.
func (s Sink) Valid() bool { return s == Postgres || s == Iceberg }
