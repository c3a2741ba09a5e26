package writestrategy_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"math"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/scanfiles"
)

// An independent reader of an Iceberg snapshot for the history test: the
// files come from iceberg-go's planner (manifest list, manifests, which
// delete file applies to which data file), and everything after that is
// this file's own code: each Parquet data file read with arrow's Parquet
// reader and mapped to the snapshot's schema by field id (a column the
// file lacks reads NULL), its position delete files and deletion vectors
// (the Puffin blob decoded here: length, magic, portable 64-bit roaring
// bitmap, CRC) applied. Rows come back in a canonical text form that
// tells apart every value the sinks tell apart (floats by their bits).

// canonNull is the canonical form of NULL.
const canonNull = "∅"

// canon is the canonical text of a[i].
func canon(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return canonNull
	}
	switch a := a.(type) {
	case *array.Float64:
		return fmt.Sprintf("f%016x", math.Float64bits(a.Value(i)))
	case *array.Float32:
		return fmt.Sprintf("f%016x", math.Float64bits(float64(a.Value(i))))
	case *array.Int8:
		return strconv.FormatInt(int64(a.Value(i)), 10)
	case *array.Int16:
		return strconv.FormatInt(int64(a.Value(i)), 10)
	case *array.Int32:
		return strconv.FormatInt(int64(a.Value(i)), 10)
	case *array.Int64:
		return strconv.FormatInt(a.Value(i), 10)
	case *array.String:
		return strconv.Quote(a.Value(i))
	case *array.LargeString:
		return strconv.Quote(a.Value(i))
	case *array.Binary:
		return "x" + hex.EncodeToString(a.Value(i))
	case *array.LargeBinary:
		return "x" + hex.EncodeToString(a.Value(i))
	case *array.Decimal128:
		return a.Value(i).ToString(a.DataType().(*arrow.Decimal128Type).Scale)
	case *array.Timestamp:
		return "t" + strconv.FormatInt(int64(a.Value(i)), 10)
	case array.ListLike:
		start, end := a.ValueOffsets(i)
		vals := a.ListValues()
		parts := make([]string, 0, end-start)
		for j := start; j < end; j++ {
			parts = append(parts, canon(vals, int(j)))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return a.ValueStr(i)
}

// snapshotSchema is the schema of snapshot snap of tbl.
func snapshotSchema(tbl *table.Table, snap *table.Snapshot) *iceberg.Schema {
	if snap.SchemaID != nil {
		for _, s := range tbl.Metadata().Schemas() {
			if s.ID == *snap.SchemaID {
				return s
			}
		}
	}
	return tbl.Schema()
}

// localPath is the file system path of a table file.
func localPath(p string) string {
	if u, err := url.Parse(p); err == nil && u.Scheme == "file" {
		return u.Path
	}
	return p
}

// readParquet reads a whole Parquet file.
func readParquet(ctx context.Context, path string) (arrow.Table, error) {
	rd, err := file.OpenParquetFile(localPath(path), false)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	fr, err := pqarrow.NewFileReader(rd, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	return fr.ReadTable(ctx)
}

// fieldID is the Iceberg field id of a column read by pqarrow, -1 if none.
func fieldID(f arrow.Field) int {
	if v, ok := f.Metadata.GetValue("PARQUET:field_id"); ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return -1
}

// positionDeletes adds to dead the positions of dataPath that the
// position delete file at path removes.
func positionDeletes(ctx context.Context, path, dataPath string, dead map[int64]bool) error {
	tb, err := readParquet(ctx, path)
	if err != nil {
		return fmt.Errorf("position delete file %s: %w", path, err)
	}
	defer tb.Release()
	fp, pos := tb.Schema().FieldIndices("file_path"), tb.Schema().FieldIndices("pos")
	if len(fp) != 1 || len(pos) != 1 {
		return fmt.Errorf("position delete file %s: columns %s", path, tb.Schema())
	}
	paths, poss := tb.Column(fp[0]).Data().Chunks(), tb.Column(pos[0]).Data().Chunks()
	for c := range paths {
		for r := 0; r < paths[c].Len(); r++ {
			if !paths[c].IsNull(r) && paths[c].ValueStr(r) == dataPath {
				dead[poss[c].(*array.Int64).Value(r)] = true
			}
		}
	}
	return nil
}

// deletionVector adds to dead the positions the deletion vector d removes
// from dataPath, decoding its Puffin blob.
func deletionVector(d iceberg.DataFile, dataPath string, dead map[int64]bool) error {
	if ref := d.ReferencedDataFile(); ref == nil || *ref != dataPath {
		return fmt.Errorf("deletion vector in %s references %v, applied to %s", d.FilePath(), ref, dataPath)
	}
	off, size := d.ContentOffset(), d.ContentSizeInBytes()
	if off == nil || size == nil || *size < 12 {
		return fmt.Errorf("deletion vector in %s: offset %v size %v", d.FilePath(), off, size)
	}
	f, err := os.Open(localPath(d.FilePath()))
	if err != nil {
		return fmt.Errorf("deletion vector: %w", err)
	}
	defer f.Close()
	blob := make([]byte, *size)
	if _, err := f.ReadAt(blob, *off); err != nil {
		return fmt.Errorf("deletion vector in %s: %w", d.FilePath(), err)
	}
	n := binary.BigEndian.Uint32(blob)
	body := blob[4 : len(blob)-4]
	if int(n) != len(body) || !bytes.Equal(body[:4], []byte{0xD1, 0xD3, 0x39, 0x64}) {
		return fmt.Errorf("deletion vector in %s: bad length %d or magic %x", d.FilePath(), n, body[:4])
	}
	if crc := binary.BigEndian.Uint32(blob[len(blob)-4:]); crc != crc32.ChecksumIEEE(body) {
		return fmt.Errorf("deletion vector in %s: CRC", d.FilePath())
	}
	bm := body[4:]
	if len(bm) < 8 {
		return fmt.Errorf("deletion vector in %s: short bitmap", d.FilePath())
	}
	count := binary.LittleEndian.Uint64(bm)
	bm = bm[8:]
	for range count {
		if len(bm) < 4 {
			return fmt.Errorf("deletion vector in %s: short bitmap", d.FilePath())
		}
		key := uint64(binary.LittleEndian.Uint32(bm))
		bm = bm[4:]
		low := roaring.New()
		used, err := low.ReadFrom(bytes.NewReader(bm))
		if err != nil {
			return fmt.Errorf("deletion vector in %s: %w", d.FilePath(), err)
		}
		bm = bm[used:]
		it := low.Iterator()
		for it.HasNext() {
			dead[int64(key<<32|uint64(it.Next()))] = true
		}
	}
	if len(bm) != 0 {
		return fmt.Errorf("deletion vector in %s: %d trailing bytes", d.FilePath(), len(bm))
	}
	return nil
}

// fileRows reads snapshot snapID of tbl from its files (see above): the
// canonical rows, columns in the order of the snapshot's schema, sorted.
func fileRows(ctx context.Context, tbl *table.Table, snapID int64) ([]string, error) {
	snap := tbl.SnapshotByID(snapID)
	if snap == nil {
		return nil, fmt.Errorf("no snapshot %d", snapID)
	}
	sch := snapshotSchema(tbl, snap)
	tasks, err := scanfiles.Plan(ctx, tbl.Scan(table.WithSnapshotID(snapID)))
	if err != nil {
		return nil, fmt.Errorf("plan snapshot %d: %w", snapID, err)
	}
	var out []string
	for _, tk := range tasks {
		if len(tk.EqualityDeleteFiles) > 0 {
			return nil, fmt.Errorf("data file %s has equality deletes", tk.File.FilePath())
		}
		path := tk.File.FilePath()
		dead := map[int64]bool{}
		for _, d := range tk.DeleteFiles {
			if d.FileFormat() == iceberg.PuffinFile {
				err = deletionVector(d, path, dead)
			} else {
				err = positionDeletes(ctx, d.FilePath(), path, dead)
			}
			if err != nil {
				return nil, err
			}
		}
		for _, d := range tk.DeletionVectorFiles {
			if err := deletionVector(d, path, dead); err != nil {
				return nil, err
			}
		}
		rows, err := dataFileRows(ctx, path, sch, dead)
		if err != nil {
			return nil, err
		}
		if int64(len(rows)+len(dead)) != tk.File.Count() {
			return nil, fmt.Errorf("data file %s: %d live rows and %d deleted, manifest says %d", path, len(rows), len(dead), tk.File.Count())
		}
		out = append(out, rows...)
	}
	slices.Sort(out)
	return out, nil
}

// dataFileRows is the canonical rows of the data file at path, but those
// at the positions in dead, with the columns of sch.
func dataFileRows(ctx context.Context, path string, sch *iceberg.Schema, dead map[int64]bool) ([]string, error) {
	tb, err := readParquet(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("data file %s: %w", path, err)
	}
	defer tb.Release()
	byID := map[int]int{}
	for i, f := range tb.Schema().Fields() {
		byID[fieldID(f)] = i
	}
	fields := sch.Fields()
	cols := make([][]arrow.Array, len(fields))
	for i, f := range fields {
		if c, ok := byID[f.ID]; ok {
			cols[i] = tb.Column(c).Data().Chunks()
		}
	}
	var out []string
	row := make([]string, len(fields))
	var pos int64
	chunkLens := chunkLengths(tb)
	for c, n := range chunkLens {
		for r := 0; r < n; r, pos = r+1, pos+1 {
			if dead[pos] {
				continue
			}
			for i := range fields {
				row[i] = canonNull
				if cols[i] != nil {
					row[i] = canon(cols[i][c], r)
				}
			}
			out = append(out, strings.Join(row, "|"))
		}
	}
	return out, nil
}

// chunkLengths is the length of each chunk of tb's columns, which pqarrow
// chunks alike.
func chunkLengths(tb arrow.Table) []int {
	if tb.NumCols() == 0 {
		return nil
	}
	var out []int
	for _, ch := range tb.Column(0).Data().Chunks() {
		out = append(out, ch.Len())
	}
	return out
}

// scanRows is the canonical rows of snapshot snapID (0: the current one)
// of dataset id as the facade's Scan reads them, columns in the order of
// sch, sorted.
func scanRows(ctx context.Context, f *facade.Facade, id string, snapID int64, sch *iceberg.Schema) ([]string, error) {
	var out []string
	for rec, err := range f.Scan(ctx, id, facade.ScanOptions{SnapshotID: snapID}) {
		if err != nil {
			return nil, err
		}
		fields := sch.Fields()
		idx := make([]int, len(fields))
		for i, fl := range fields {
			ix := rec.Schema().FieldIndices(fl.Name)
			if len(ix) != 1 {
				return nil, fmt.Errorf("scan of %s lacks column %s", id, fl.Name)
			}
			idx[i] = ix[0]
		}
		row := make([]string, len(fields))
		for r := 0; r < int(rec.NumRows()); r++ {
			for i := range fields {
				row[i] = canon(rec.Column(idx[i]), r)
			}
			out = append(out, strings.Join(row, "|"))
		}
	}
	slices.Sort(out)
	return out, nil
}
