package facade

import (
	"context"
	"fmt"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"
)

// Deletion vectors (format v3). A merge on a v3 table writes its deletes
// as deletion vectors, one per data file that loses rows, all in one
// Puffin file. The spec allows at most one live deletion vector per data
// file: a data file that already has deletes (a deletion vector, or the
// position delete files of a merge before the table's upgrade) gets a new
// vector holding the old positions and the new ones, and the merge's
// snapshot removes the vector it supersedes. The old position delete
// files stay until compaction rewrites the file: a reader ignores them
// once a deletion vector covers the file, and applying both removes the
// same rows.

// readDeletionVectors adds to dead the positions t's deletion vectors
// remove.
func readDeletionVectors(fs iceio.IO, t table.FileScanTask, dead map[int64]bool) error {
	if len(t.DeletionVectorFiles) > 1 {
		return fmt.Errorf("%w: data file %s has %d deletion vectors", errMergeShape, t.File.FilePath(), len(t.DeletionVectorFiles))
	}
	for _, d := range t.DeletionVectorFiles {
		bm, err := dv.ReadDV(fs, d)
		if err != nil {
			return fmt.Errorf("facade: merge: read deletion vector %s: %w", d.FilePath(), err)
		}
		for pos := range bm.Positions() {
			dead[int64(pos)] = true
		}
	}
	return nil
}

// isDV reports whether d is a deletion vector.
func isDV(d iceberg.DataFile) bool {
	return d.ContentType() == iceberg.EntryContentPosDeletes && d.FileFormat() == iceberg.PuffinFile
}

// writeDVs writes the merge's deletes as deletion vectors in one Puffin
// file at path: for each data file in order, its positions in dels merged
// with the positions its existing deletes remove. The live vectors they
// replace are recorded in p.superseded.
func (p *mergePlan) writeDVs(ctx context.Context, tbl *table.Table, wfs iceio.WriteFileIO, dels map[int32][]int64, order []int32, path string) ([]iceberg.DataFile, error) {
	meta := tbl.Metadata()
	w := dv.NewDVWriter(wfs, func(id int32) *iceberg.PartitionSpec { return meta.PartitionSpecByID(int(id)) })
	p.superseded = nil
	for _, fi := range order {
		df := p.files[fi]
		if dead := p.dead[fi]; len(dead) > 0 {
			bm := dv.NewRoaringPositionBitmap()
			for pos := range dead {
				bm.Set(uint64(pos))
			}
			w.Load(df.FilePath(), bm, df.SpecID(), df.Partition())
			for _, d := range p.olds[fi] {
				if isDV(d) {
					p.superseded = append(p.superseded, d)
				}
			}
		}
		if err := w.Add(df.FilePath(), dels[fi], df.SpecID(), df.Partition()); err != nil {
			return nil, fmt.Errorf("facade: merge: deletion vector of %s: %w", df.FilePath(), err)
		}
	}
	out, err := w.Flush(ctx, path)
	if err != nil {
		_ = wfs.Remove(path)
		return nil, fmt.Errorf("facade: merge: write %s: %w", path, err)
	}
	return out, nil
}
