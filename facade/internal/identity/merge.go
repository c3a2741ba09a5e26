package identity

import "github.com/apache/arrow-go/v18/arrow"

// RowHashes returns in h (resized to the batch length) the row hashes of
// rec over its business columns: the hashes a Checksum sums, so a row
// read back from a table hashes as it did when it was written.
func RowHashes(rec arrow.RecordBatch, h []uint64) ([]uint64, error) {
	rh := newRowHasher(rec.Schema())
	h, err := rh.hash(rec, h)
	if err != nil {
		return nil, err
	}
	return rh.exact(h), nil
}

// Add adds the rows whose row hashes are h.
func (c *Checksum) Add(h []uint64) { c.add(h) }
