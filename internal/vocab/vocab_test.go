package vocab

import (
	"errors"
	"fmt"
	"testing"
)

// The values are persisted in the control-plane tables and in Iceberg
// snapshot summaries: they must never change.
func TestStoredText(t *testing.T) {
	for got, want := range map[string]string{
		string(Postgres):    "pg",
		string(Iceberg):     "iceberg_native",
		string(Replace):     "replace",
		string(Append):      "append",
		string(Maintenance): "maintenance",
		MetaPGType:          "lakewrite.pg_type",
		MetaJSON:            "lakewrite.json",
		Iceberg.String():    "iceberg_native",
		Append.String():     "append",
	} {
		if got != want {
			t.Errorf("stored text %q, want %q", got, want)
		}
	}
}

func TestSinkOrder(t *testing.T) {
	if !Postgres.Valid() || !Iceberg.Valid() || Sink("dual").Valid() || Sink("").Valid() {
		t.Fatal("Valid: want exactly pg and iceberg_native")
	}
	cases := []struct {
		a, b Sink
		want int
	}{
		{Postgres, Iceberg, -1}, {Iceberg, Postgres, 1}, {Postgres, Postgres, 0},
		{"dual", Postgres, -1}, // unknown sorts below every known sink
	}
	for _, c := range cases {
		if got := c.a.Compare(c.b); got != c.want {
			t.Errorf("%q.Compare(%q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestErrDatasetNotFoundWraps(t *testing.T) {
	err := fmt.Errorf("ledger: %w: %q", ErrDatasetNotFound, "orders")
	if !errors.Is(err, ErrDatasetNotFound) {
		t.Fatal("errors.Is through a wrap")
	}
}
