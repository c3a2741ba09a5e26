package writestrategy_test

import (
	"context"
	"flag"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// deltaRuns sizes TestNativeDeltaReads.
var deltaRuns = flag.Int("delta.runs", 6, "delta runs of TestNativeDeltaReads")

// readRecorder is the Iceberg facade counting the rows each dataset was
// read with: whole (Scan) or as a window's appends (ScanAppended).
type readRecorder struct {
	*facade.Facade
	mu       sync.Mutex
	whole    map[string]int64
	appended map[string]int64
}

func (r *readRecorder) count(m map[string]int64, id string, rows iter.Seq2[arrow.RecordBatch, error]) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for rec, err := range rows {
			if rec != nil {
				r.mu.Lock()
				m[id] += rec.NumRows()
				r.mu.Unlock()
			}
			if !yield(rec, err) {
				return
			}
		}
	}
}

func (r *readRecorder) Scan(ctx context.Context, id string, opts facade.ScanOptions) iter.Seq2[arrow.RecordBatch, error] {
	return r.count(r.whole, id, r.Facade.Scan(ctx, id, opts))
}

func (r *readRecorder) ScanAppended(ctx context.Context, id string, txnIDs []string, opts facade.ScanOptions) (iter.Seq2[arrow.RecordBatch, error], bool, error) {
	rows, ok, err := r.Facade.ScanAppended(ctx, id, txnIDs, opts)
	if !ok || err != nil {
		return rows, ok, err
	}
	return r.count(r.appended, id, rows), true, nil
}

// take returns and resets the rows read of id: whole, appended.
func (r *readRecorder) take(id string) (whole, appended int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	whole, appended = r.whole[id], r.appended[id]
	delete(r.whole, id)
	delete(r.appended, id)
	return whole, appended
}

func newDeltaWorld(t *testing.T) (*world, *readRecorder) {
	t.Helper()
	ctx := context.Background()
	url := pgtest.URL(t)
	cat, err := facade.OpenSQLCatalog(ctx, facade.CatalogConfig{DatabaseURL: url, Warehouse: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cat.Close() })
	f, err := facade.New(cat, nil)
	require.NoError(t, err)
	rec := &readRecorder{Facade: f, whole: map[string]int64{}, appended: map[string]int64{}}
	w := newWorldOn(t, url, rec, nil, nil, nil)
	_, err = w.pool.Exec(ctx, `CREATE TABLE feed (id bigint, v text, n integer)`)
	require.NoError(t, err)
	return w, rec
}

// feedSQL selects the rows of ids lo..hi; a row's content depends on its
// id and the version v.
const feedSQL = `SELECT g::bigint AS id, 'v' || g || '.' || $3::int AS v, (g % 97)::int AS n FROM generate_series($1::bigint, $2::bigint) g`

// load appends (or replaces) rows lo..hi into dataset id.
func (w *world) loadRows(id string, mode facade.WriteMode, lo, hi int64, version int) writestrategy.WriteResult {
	w.t.Helper()
	res, err := w.d.Load(context.Background(), writestrategy.LoadRequest{WriterID: writer, DatasetID: id, Mode: mode,
		SQL: feedSQL, Args: []any{lo, hi, version}})
	require.NoError(w.t, err)
	return res
}

// window reads the next delta window of source after low with a reader of
// a small clock-skew allowance, until it holds the transaction want.
func (w *world) window(source string, low time.Time, want string) (incremental.Window, []string) {
	w.t.Helper()
	r, err := incremental.NewReader(w.ledger, time.Millisecond)
	require.NoError(w.t, err)
	for range 2000 {
		win, txns, err := r.Next(context.Background(), source, low)
		require.NoError(w.t, err)
		ids := make([]string, len(txns))
		for i, t := range txns {
			ids[i] = t.ID
		}
		if slices.Contains(ids, want) {
			return win, ids
		}
		time.Sleep(time.Millisecond)
	}
	w.t.Fatalf("transaction %s of %s never entered a window after %s", want, source, low)
	return incremental.Window{}, nil
}

func (w *world) deltaWrite(s writestrategy.WriteStrategy, source string, ids []string) writestrategy.WriteResult {
	w.t.Helper()
	res, err := w.d.Write(context.Background(), writestrategy.Request{WriterID: writer, Strategy: s,
		ReadMode: incremental.ReadDelta, Delta: map[string][]string{source: ids}})
	require.NoError(w.t, err)
	return res[0]
}

// An append pipeline over an upstream that lakewrite appends to on
// Iceberg, in delta mode: each run reads only the rows the window's
// append snapshots added (on an Iceberg and on a Postgres output), the
// first write of each Iceberg output is a full rebuild, and after N runs
// every output holds the rows of a full rebuild from the same source.
func TestNativeDeltaReads(t *testing.T) {
	t.Parallel()
	w, rec := newDeltaWorld(t)
	ensureOutputs(t, w.pool, "up", "app_ice", "an_ice", "app_pg", "rebuild", "an_full")
	w.iceberg("up", "app_ice", "an_ice", "rebuild", "an_full")
	appendAlways := func(out string) writestrategy.Deploy {
		return writestrategy.Deploy{Mode: writestrategy.KindAppendAlways, Source: "up", Target: out}
	}
	appendNew := func(out string) writestrategy.Deploy {
		return writestrategy.Deploy{Mode: writestrategy.KindAppendNew, Source: "up", Target: out, Key: []string{"id"}}
	}

	first := w.loadRows("up", facade.Append, 1, 300, 0)
	_, ids := w.window("up", time.Time{}, first.TxnID)
	// The Iceberg outputs' first writes are full rebuilds; the Postgres
	// output's first write reads the window.
	got := w.deltaWrite(appendAlways("app_ice"), "up", ids)
	require.EqualValues(t, 300, got.Rows)
	require.Equal(t, "up: first write of the Iceberg table: a full rebuild", got.FullRead)
	require.EqualValues(t, 300, w.deltaWrite(appendNew("an_ice"), "up", ids).Rows)
	whole, appended := rec.take("up")
	require.EqualValues(t, 600, whole, "first Iceberg writes read the source whole")
	require.Zero(t, appended)
	got = w.deltaWrite(appendAlways("app_pg"), "up", ids)
	require.EqualValues(t, 300, got.Rows)
	require.Empty(t, got.FullRead, "a delta read")
	whole, appended = rec.take("up")
	require.Zero(t, whole)
	require.EqualValues(t, 300, appended)

	low := first.CommittedAt
	next := int64(301)
	for run := 1; run <= *deltaRuns; run++ {
		k := int64(20 + 7*run)
		up := w.loadRows("up", facade.Append, next, next+k-1, run)
		dups := int64(0)
		if run%2 == 0 { // also some rows whose key is already there
			dups = 3
			w.loadRows("up", facade.Append, 1, dups, run)
		}
		next += k
		win, ids := w.window("up", low, up.TxnID)
		require.Len(t, ids, map[bool]int{false: 1, true: 2}[dups > 0], "run %d", run)
		low = win.High

		got := w.deltaWrite(appendAlways("app_ice"), "up", ids)
		require.Equal(t, k+dups, got.Rows, "run %d: the window's rows appended", run)
		require.Empty(t, got.FullRead, "run %d", run)
		whole, appended := rec.take("up")
		require.Zero(t, whole, "run %d: the source is not read whole", run)
		require.Equal(t, k+dups, appended, "run %d: only the window's rows are read", run)

		got = w.deltaWrite(appendNew("an_ice"), "up", ids)
		require.Equal(t, k, got.Rows, "run %d", run)
		require.Equal(t, dups, got.Skipped, "run %d: only the window's rows were considered", run)
		whole, appended = rec.take("up")
		require.Zero(t, whole, "run %d", run)
		require.Equal(t, k+dups, appended, "run %d", run)

		got = w.deltaWrite(appendAlways("app_pg"), "up", ids)
		require.Equal(t, k+dups, got.Rows, "run %d", run)
		require.Equal(t, sink.Postgres, got.Sink)
		_, appended = rec.take("up")
		require.Equal(t, k+dups, appended, "run %d", run)
	}
	rebuild := w.mustWrite(writestrategy.Deploy{Mode: writestrategy.KindAppendAlways, Source: "up", Target: "rebuild"})[0]
	full := w.checksum("rebuild")
	require.Equal(t, rebuild.Rows, full.Rows)
	require.Equal(t, full, w.checksum("app_ice"), "delta runs hold a full rebuild's rows")
	require.Equal(t, full, w.checksum("app_pg"))
	w.mustWrite(appendNew("an_full"))
	require.Equal(t, w.checksum("an_full"), w.checksum("an_ice"))
	require.EqualValues(t, next-1, w.checksum("an_ice").Rows)
}

// A window holding a replace of the upstream, or followed by one, is read
// whole and the output stays correct; the next window of appends is a
// delta again. The first write after the output flips sink is a full
// rebuild.
func TestNativeDeltaFallbacks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, rec := newDeltaWorld(t)
	ensureOutputs(t, w.pool, "up", "an", "an_full")
	w.iceberg("up", "an", "an_full")
	// The fallbacks are logged through the dispatcher's logger.
	var logs syncBuffer
	disp, err := writestrategy.NewDispatcher(w.pool, &writestrategy.DispatchConfig{Ledger: w.ledger, Resolver: w.resolver,
		Lakehouse: w.lake, Workspace: "test", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	w.d = disp
	fellBack := func() []string {
		var out []string
		for l := range strings.Lines(logs.String()) {
			if strings.Contains(l, `msg="lakewrite delta request read whole"`) {
				out = append(out, l)
			}
		}
		return out
	}
	appendNew := func(out string) writestrategy.Deploy {
		return writestrategy.Deploy{Mode: writestrategy.KindAppendNew, Source: "up", Target: out, Key: []string{"id"}}
	}
	// an_full runs the same pipeline reading the source whole: the oracle.
	oracle := func() {
		t.Helper()
		w.mustWrite(appendNew("an_full"))
		rec.take("up")
		require.Equal(t, w.checksum("an_full"), w.checksum("an"))
	}
	a := w.loadRows("up", facade.Append, 1, 200, 0)
	w.mustWrite(appendNew("an"))
	oracle()
	b := w.loadRows("up", facade.Append, 201, 250, 0)

	// A later replace (not in the window) may have moved the window's rows:
	// the lakehouse refuses the append-only read.
	r := w.loadRows("up", facade.Replace, 1, 300, 1)
	_, ok, err := rec.Facade.ScanAppended(ctx, "up", []string{b.TxnID}, facade.ScanOptions{})
	require.NoError(t, err)
	require.False(t, ok, "a replace after the window")
	_, ok, err = rec.Facade.ScanAppended(ctx, "up", []string{ledger.NewID()}, facade.ScanOptions{})
	require.NoError(t, err)
	require.False(t, ok, "a transaction the table does not hold")

	// The window holds b and the replace: read whole, output correct.
	_, ids := w.window("up", a.CommittedAt, r.TxnID)
	require.Equal(t, []string{b.TxnID, r.TxnID}, ids)
	got := w.deltaWrite(appendNew("an"), "up", ids)
	require.EqualValues(t, 100, got.Rows, "the new keys 201..300")
	require.EqualValues(t, 200, got.Skipped, "the whole source was considered")
	why := fmt.Sprintf("up: transaction %s of %q is a %s on %s, not an append on Iceberg", r.TxnID, "up", facade.Replace, sink.Iceberg)
	require.Equal(t, why, got.FullRead)
	require.Len(t, fellBack(), 1)
	require.Contains(t, fellBack()[0], "dataset_id=an ")
	require.Contains(t, fellBack()[0], "txn_id="+got.TxnID)
	require.Contains(t, fellBack()[0], strconv.Quote(why))
	whole, appended := rec.take("up")
	require.EqualValues(t, 300, whole)
	require.Zero(t, appended)
	oracle()

	// Appends after the replace: a delta again.
	c := w.loadRows("up", facade.Append, 301, 340, 1)
	win, ids := w.window("up", r.CommittedAt, c.TxnID)
	got = w.deltaWrite(appendNew("an"), "up", ids)
	require.EqualValues(t, 40, got.Rows)
	require.Zero(t, got.Skipped)
	require.Empty(t, got.FullRead, "a delta read")
	require.Len(t, fellBack(), 1, "a delta read is not logged as a fallback")
	whole, appended = rec.take("up")
	require.Zero(t, whole)
	require.EqualValues(t, 40, appended)
	oracle()

	// The output flips to Postgres: its first write there is a full
	// rebuild (the source read whole), the next one a delta.
	require.NoError(t, w.flags.SetOverride(ctx, writer, sink.Postgres, "an"))
	w.resolver.Invalidate()
	d := w.loadRows("up", facade.Append, 341, 350, 1)
	win, ids = w.window("up", win.High, d.TxnID)
	got = w.deltaWrite(appendNew("an"), "up", ids)
	require.Equal(t, sink.Postgres, got.Sink)
	require.Equal(t, facade.Replace, got.Mode, "the flip rewrites the target")
	require.Equal(t, fmt.Sprintf("up: first write after a flip from %s to %s: a full rebuild", sink.Iceberg, sink.Postgres), got.FullRead)
	require.Len(t, fellBack(), 2)
	whole, appended = rec.take("up")
	require.EqualValues(t, 350, whole, "first write after the flip: the source read whole")
	require.Zero(t, appended)
	oracle()
	e := w.loadRows("up", facade.Append, 351, 355, 1)
	_, ids = w.window("up", win.High, e.TxnID)
	got = w.deltaWrite(appendNew("an"), "up", ids)
	require.EqualValues(t, 5, got.Rows)
	require.Empty(t, got.FullRead)
	whole, appended = rec.take("up")
	require.Zero(t, whole)
	require.EqualValues(t, 5, appended)
	oracle()
	require.EqualValues(t, 355, w.checksum("an").Rows)
}

// A source read from the row store is never read with a delta predicate
// over a window whose transactions were written to Iceberg (a row store
// drained or never written): it is read whole. A source that moved to
// Iceberg is read from its table, also for a window of row-store writes.
func TestDeltaDrainedRowStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, rec := newDeltaWorld(t)
	ensureOutputs(t, w.pool, "src", "out")
	appendNew := writestrategy.Deploy{Mode: writestrategy.KindAppendNew, Source: "src", Target: "out", Key: []string{"id"}}

	t1 := w.loadRows("src", facade.Append, 1, 100, 0) // row store
	require.Equal(t, sink.Postgres, t1.Sink)
	w.mustWrite(appendNew)
	w.iceberg("src")
	t2 := w.loadRows("src", facade.Append, 101, 150, 0) // moves to Iceberg: the table written whole
	require.Equal(t, sink.Iceberg, t2.Sink)
	// A window of the row-store write, read after the move: from the table,
	// whole (the table holds it as a replace).
	got := w.deltaWrite(appendNew, "src", []string{t1.TxnID})
	require.EqualValues(t, 50, got.Rows)
	require.EqualValues(t, 100, got.Skipped)
	whole, _ := rec.take("src")
	require.EqualValues(t, 150, whole)

	// Drain the row store and move the source back: the first write on
	// Postgres rebuilds the row store in full.
	_, err := w.pool.Exec(ctx, `DELETE FROM lakewrite.dataset_rows WHERE dataset_id = 'src'`)
	require.NoError(t, err)
	require.NoError(t, w.flags.SetOverride(ctx, writer, sink.Postgres, "src"))
	w.resolver.Invalidate()
	t3 := w.loadRows("src", facade.Append, 151, 160, 0)
	require.Equal(t, sink.Postgres, t3.Sink)
	// A window holding only the Iceberg write: its rows are not in the row
	// store under its id, so the source is read whole, not as nothing.
	got = w.deltaWrite(appendNew, "src", []string{t2.TxnID})
	require.EqualValues(t, 10, got.Rows, "the keys 151..160, which a delta predicate over t2 would have missed")
	require.EqualValues(t, 150, got.Skipped, "read whole")
	require.Equal(t, fmt.Sprintf("src: transaction %s of %q was written to %s, not to the row store the source is read from", t2.TxnID, "src", sink.Iceberg), got.FullRead)
	// A window of the row-store writes only is a delta.
	t4 := w.loadRows("src", facade.Append, 161, 165, 0)
	rec.take("src")
	got = w.deltaWrite(appendNew, "src", []string{t4.TxnID})
	require.EqualValues(t, 5, got.Rows)
	require.Zero(t, got.Skipped, "only the window's rows")
	whole, appended := rec.take("src")
	require.Zero(t, whole+appended, "the row store, not the table")

	// An id the ledger does not know is refused.
	_, err = w.d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: appendNew,
		ReadMode: incremental.ReadDelta, Delta: map[string][]string{"src": {ledger.NewID()}}})
	require.ErrorIs(t, err, writestrategy.ErrInvalid)
}
