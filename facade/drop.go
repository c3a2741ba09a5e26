package facade

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
)

// DropReport is what DropTable removed.
type DropReport struct {
	// Dropped is true when the catalog still had the table.
	Dropped bool
	// Files and Bytes count the files deleted under the table location.
	Files int
	Bytes int64
}

// DropTable removes the Iceberg table of a dataset with its files (a
// purge): every file under the table location (data files, manifests,
// manifest lists, metadata), the current metadata file last, then the
// catalog entry. It is idempotent and safe to run again after a crash at
// any point: a table that is absent is not an error, files already gone
// are skipped, and a table whose metadata is gone already (a purge
// interrupted after its last file) is removed from the catalog. The
// table's IO must list files (iceberg-go's local, in-memory and blob IOs
// do).
//
// A dataset's table is dropped as part of decommissioning the dataset
// (writestrategy's Dispatcher.Drop), which also removes its ledger rows.
func (f *Facade) DropTable(ctx context.Context, datasetID string) (DropReport, error) {
	var rep DropReport
	ident, err := f.s.Naming(datasetID)
	if err != nil {
		return rep, err
	}
	tbl, err := f.load(ctx, datasetID, ident)
	switch {
	case errors.Is(err, ErrTableNotFound):
		return rep, nil
	case err == nil:
		fsys, err := tbl.FS(ctx)
		if err != nil {
			return rep, fmt.Errorf("facade: drop %q: table IO: %w", datasetID, err)
		}
		list, ok := fsys.(iceio.ListableIO)
		if !ok {
			return rep, fmt.Errorf("facade: drop %q: %w: the table's IO %T cannot list files to purge", datasetID, ErrInvalidRequest, fsys)
		}
		meta := tbl.MetadataLocation()
		type file struct {
			path string
			size int64
		}
		var files []file
		werr := list.WalkDir(strings.TrimSuffix(tbl.Location(), "/"), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if isNotExist(err) {
					return nil
				}
				return err
			}
			if d.IsDir() {
				return nil
			}
			var size int64
			if info, err := d.Info(); err == nil {
				size = info.Size()
			}
			files = append(files, file{path, size})
			return nil
		})
		if werr != nil {
			return rep, fmt.Errorf("facade: drop %q: list files: %w", datasetID, werr)
		}
		var metaFile *file
		for i := range files {
			if pathKey(files[i].path) == pathKey(meta) {
				metaFile = &files[i]
				continue
			}
			if err := removeFile(fsys, files[i].path, &rep, files[i].size); err != nil {
				return rep, fmt.Errorf("facade: drop %q: %w", datasetID, err)
			}
		}
		// The metadata last: until it goes, a retry can load the table and
		// find every file still to delete.
		size := int64(0)
		if metaFile != nil {
			size = metaFile.size
		}
		if err := removeFile(fsys, meta, &rep, size); err != nil {
			return rep, fmt.Errorf("facade: drop %q: %w", datasetID, err)
		}
	case !isNotExist(err):
		return rep, fmt.Errorf("facade: drop %q: %w", datasetID, err)
	default:
		// A table whose metadata file is gone: an interrupted purge (or a
		// broken table); its catalog entry still goes.
		f.s.Logger.Warn("facade: dropping a table whose metadata cannot be read", "dataset_id", datasetID, "error", err.Error())
	}
	err = f.cat.DropTable(ctx, ident)
	switch {
	case err == nil:
		rep.Dropped = true
	case errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace):
	default:
		return rep, fmt.Errorf("facade: drop %q: catalog: %w", datasetID, err)
	}
	return rep, nil
}

func removeFile(fsys iceio.IO, path string, rep *DropReport, size int64) error {
	if err := fsys.Remove(path); err != nil {
		if isNotExist(err) {
			return nil
		}
		return fmt.Errorf("delete %s: %w", path, err)
	}
	rep.Files++
	rep.Bytes += size
	return nil
}
