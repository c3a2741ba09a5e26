package writestrategy

import (
	"fmt"
	"strings"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/vocab"
)

// The name rule (facade.CheckDatasetID, facade.CheckColumnNames) is one for
// both sinks. Every dataset id a write, load or registration targets is
// checked against it before anything is written, whatever the sink, so a
// dataset written to Postgres can flip to Iceberg later. Ids only read
// (sources, checksums, maintenance of an existing table) need only be
// non-empty, so a dataset registered before the rule stays readable.

// readOnlyUses are the uses of a dataset id that do not write it.
// A dataset is dropped whatever its id, so that one named before the rule
// can be decommissioned.
var readOnlyUses = map[string]bool{"source": true, "checksummed": true, "maintained": true, "dropped": true}

// checkDatasetID refuses an empty id, and an id a write targets (every use
// but readOnlyUses) outside the name rule: the error matches ErrInvalid and
// facade.ErrInvalidDatasetID, and errors.As finds a *facade.NameError.
func checkDatasetID(what, id string) error {
	if strings.TrimSpace(id) == "" {
		return fmt.Errorf("%w: %s dataset id is empty", ErrInvalid, what)
	}
	if readOnlyUses[what] {
		return nil
	}
	if err := facade.CheckDatasetID(id); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalid, what, err)
	}
	return nil
}

// columnKey is the key under which two column names clash (see
// facade.CheckColumnNames): "a" and "A" are one column in Spark and Trino.
func columnKey(name string) string { return vocab.FoldColumnName(name) }

// clashReason says why name is refused after an earlier column prev with the
// same key.
func clashReason(prev, name string) string {
	if prev == name {
		return "appears twice"
	}
	return fmt.Sprintf("clashes with column %q (names are compared case-insensitively, as Spark and Trino do)", prev)
}
