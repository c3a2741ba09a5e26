package facade

import (
	"iter"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakewrite/lakewrite/facade/internal/identity"
)

// defaultOrdinalSlots is the largest size of the table that numbers equal
// rows for __row_id (1<<20 entries, see "Identity").
const defaultOrdinalSlots = identity.DefaultOrdinalSlots

// Checksum is an order-independent fingerprint of a set of rows: the row
// count and two independent 64-bit sums of the row hashes over the business
// columns (identity columns excluded). Equal multisets of rows give equal
// checksums whatever the order or batching.
type Checksum struct {
	Rows int64
	Sum  uint64
	Sum2 uint64
}

// String renders the checksum as rows:hex:hex.
func (c Checksum) String() string { return identity.Checksum(c).String() }

// ChecksumBatches computes the checksum of a stream of batches (for
// example rows read from Postgres by the cursor package). Batches are
// borrowed, never released. Identity columns present in the batches are
// ignored, so the result compares with (*Facade).Checksum.
func ChecksumBatches(batches iter.Seq2[arrow.RecordBatch, error]) (Checksum, error) {
	c, err := identity.ChecksumBatches(batches)
	return Checksum(c), err
}
