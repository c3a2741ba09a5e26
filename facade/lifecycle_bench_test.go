package facade_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/internal/contract"
	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// BenchmarkLongHistory writes one dataset 300 times by replace then 300
// times by append, 1,000 rows each, with and without the default lifecycle
// (Maintain run whenever a commit says it is due), and reports the median
// write latency of writes 1-50 and 251-300 of each phase, the size of the
// last metadata.json, and the files and bytes in the table location:
//
//	go test -run '^$' -bench LongHistory -benchtime=1x ./facade/
//
// With the default minute of FileGrace, everything expired during the last
// minute (here: most of the run) is still on storage; the no-grace variant
// shows what remains once the grace has passed.
func BenchmarkLongHistory(b *testing.B) {
	for _, v := range []struct {
		name string
		pol  facade.Lifecycle
	}{
		{"maintenance=off", facade.Lifecycle{Disabled: true}},
		{"maintenance=on", facade.Lifecycle{}},
		{"maintenance=on,no-grace", facade.Lifecycle{FileGrace: -1}},
	} {
		b.Run(v.name, func(b *testing.B) {
			for range b.N {
				longHistory(b, v.pol)
			}
		})
	}
}

func longHistory(b *testing.B, pol facade.Lifecycle) {
	maintain := !pol.Disabled
	ctx := context.Background()
	mem := memory.NewGoAllocator()
	wh := b.TempDir()
	cat, err := facade.OpenSQLCatalog(ctx, facade.CatalogConfig{DatabaseURL: pgtest.URL(b), Warehouse: wh})
	require.NoError(b, err)
	defer cat.Close()
	f, err := facade.New(cat, &facade.Config{Allocator: mem, Lifecycle: pol})
	require.NoError(b, err)
	const writes, rows = 300, 1000
	sc := contract.Schema()
	runs := 0
	var maintTime time.Duration
	for _, mode := range []facade.WriteMode{facade.Replace, facade.Append} {
		lat := make([]time.Duration, writes)
		for i := range writes {
			bs := contract.Batches(mem, sc, i*rows, rows, rows, 1<<30)
			start := time.Now()
			res, err := f.Write(ctx, facade.Target{DatasetID: "hist"}, facade.WriteRequest{Mode: mode, Schema: sc, Rows: contract.Seq(bs)})
			lat[i] = time.Since(start)
			require.NoError(b, err)
			bs[0].Release()
			if res.MaintenanceDue && maintain {
				start := time.Now()
				_, err := f.Maintain(ctx, "hist")
				require.NoError(b, err)
				maintTime += time.Since(start)
				runs++
			}
		}
		p50 := func(d []time.Duration) time.Duration {
			d = slices.Clone(d)
			slices.Sort(d)
			return d[len(d)/2]
		}
		early, late := p50(lat[:50]), p50(lat[250:])
		b.ReportMetric(float64(early.Microseconds())/1000, string(mode)+"-p50-1-50-ms")
		b.ReportMetric(float64(late.Microseconds())/1000, string(mode)+"-p50-251-300-ms")
		b.Logf("%s: p50 writes 1-50 %v, 251-300 %v", mode, early, late)
	}
	tbl, err := f.LoadTable(ctx, "hist")
	require.NoError(b, err)
	meta, err := os.Stat(strings.TrimPrefix(tbl.MetadataLocation(), "file://"))
	require.NoError(b, err)
	var files, metaFiles int
	var bytes int64
	require.NoError(b, filepath.WalkDir(wh, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files++
		bytes += info.Size()
		if strings.HasSuffix(p, ".metadata.json") {
			metaFiles++
		}
		return nil
	}))
	b.ReportMetric(float64(meta.Size())/1024, "metadata-KB")
	b.ReportMetric(float64(files), "files")
	b.ReportMetric(float64(bytes)/(1<<20), "warehouse-MB")
	b.Logf("metadata.json %d B (%d files), %d files, %.1f MB in the warehouse, %d snapshots, live %s B; maintenance: %d runs, %v",
		meta.Size(), metaFiles, files, float64(bytes)/(1<<20), len(tbl.Metadata().Snapshots()),
		tbl.CurrentSnapshot().Summary.Properties["total-files-size"], runs, maintTime)
}
