package writestrategy_test

import (
	"context"
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// scanRecorder is a Lakehouse that records the options of every Scan.
type scanRecorder struct {
	facade.Lakehouse
	mu   sync.Mutex
	opts map[string][]facade.ScanOptions
}

func (s *scanRecorder) Scan(ctx context.Context, id string, opts facade.ScanOptions) iter.Seq2[arrow.RecordBatch, error] {
	s.mu.Lock()
	s.opts[id] = append(s.opts[id], opts)
	s.mu.Unlock()
	return s.Lakehouse.Scan(ctx, id, opts)
}

// TestSourceFilter: a day-partitioned native source read with a range on
// its partition column is scanned with that range as the filter and
// hydrated with only the matching rows; outputs on both sinks hold exactly
// the rows of the range, as does the same range over the row-store copy of
// the source. A badly typed range is refused before anything is written.
func TestSourceFilter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	cat, err := facade.OpenSQLCatalog(ctx, facade.CatalogConfig{DatabaseURL: url, Warehouse: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cat.Close() })
	f, err := facade.New(cat, &facade.Config{PartitionFor: func(id string) (facade.Partitioning, bool) {
		return facade.Partitioning{Fields: []facade.PartitionField{{Column: "ts", Transform: "day"}}}, id == "orders_days"
	}})
	require.NoError(t, err)
	rec := &scanRecorder{Lakehouse: f, opts: map[string][]facade.ScanOptions{}}
	w := newWorldOn(t, url, rec, nil, nil, nil)
	seedWorld(t, w, 6000) // ts: 2026-01-01 + g minutes, g in 1..6000: five days
	ensureOutputs(t, w.pool, "orders_days", "win_pg", "win_ice", "win_rs")
	w.iceberg("orders_days", "win_ice")
	w.mustWrite(writestrategy.Transform{Output: "orders_days", Source: "orders"})

	day2 := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	win := []facade.Range{{Column: "ts", Min: day2, Max: day2.Add(24 * time.Hour), MaxExclusive: true}}
	write := func(out, src string, filter []facade.Range) ([]writestrategy.WriteResult, error) {
		return w.d.Write(ctx, writestrategy.Request{WriterID: writer,
			Strategy:     writestrategy.Transform{Output: out, Source: src},
			SourceFilter: map[string][]facade.Range{src: filter}})
	}
	for _, out := range []string{"win_pg", "win_ice"} {
		res, err := write(out, "orders_days", win)
		require.NoError(t, err)
		require.EqualValues(t, 1440, res[0].Rows, out) // g in 1440..2879
	}
	res, err := write("win_rs", "orders", win)
	require.NoError(t, err)
	require.EqualValues(t, 1440, res[0].Rows)
	require.Equal(t, w.checksum("win_rs"), w.checksum("win_pg"))
	require.Equal(t, w.checksum("win_rs"), w.checksum("win_ice"))

	rec.mu.Lock()
	scans := rec.opts["orders_days"]
	rec.mu.Unlock()
	require.Len(t, scans, 2)
	for _, o := range scans {
		require.Equal(t, win, o.Filter)
	}

	// Verify recomputes through the same filter
	ps, err := w.d.Verify(ctx, writestrategy.Request{Strategy: writestrategy.Transform{Output: "win_ice", Source: "orders_days"},
		SourceFilter: map[string][]facade.Range{"orders_days": win}})
	require.NoError(t, err)
	require.True(t, ps[0].OK(), "%+v", ps[0])
	require.EqualValues(t, 1440, ps[0].Computed.Rows)

	// the unfiltered read is the whole source
	res, err = write("win_pg", "orders_days", nil)
	require.NoError(t, err)
	require.EqualValues(t, 6000, res[0].Rows)

	for _, bad := range [][]facade.Range{
		{{Column: "nope", Min: 1}},
		{{Column: "ts"}},
		{{Column: "ts", Min: []byte("x")}},
		{{Column: "ts", Min: "2026-01-02"}},
		{{Column: "id", Min: 1.5}},
	} {
		_, err := write("win_pg", "orders_days", bad)
		require.ErrorIs(t, err, writestrategy.ErrInvalid)
	}
	require.EqualValues(t, 6000, w.checksum("win_pg").Rows)
}
