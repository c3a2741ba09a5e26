package writestrategy_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/incremental/changelog"
	"github.com/lakewrite/lakewrite/incremental/model"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// scoreSchema declares the test model's output columns.
var scoreSchema = arrow.NewSchema([]arrow.Field{
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "label", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// scorer is the test model over feedSQL's rows (id, v, n): a source row
// whose n%10 is 1 gets no output row, 0 gets two, any other one. calls
// counts the source rows passed to it.
type scorer struct {
	calls atomic.Int64
	// fail, when set, is called with each window's first id and may fail
	// or panic.
	fail func(firstID int64) error
}

func (s *scorer) fn(ctx context.Context, in arrow.RecordBatch) (arrow.RecordBatch, error) {
	s.calls.Add(in.NumRows())
	keys := in.Column(0).(*array.String)
	ids := in.Column(1).(*array.Int64)
	vs := in.Column(2).(*array.String)
	ns := in.Column(3).(*array.Int32)
	if s.fail != nil {
		if err := s.fail(ids.Value(0)); err != nil {
			return nil, err
		}
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, model.OutputSchema(scoreSchema))
	defer b.Release()
	for i := range int(in.NumRows()) {
		n := ns.Value(i)
		reps := 1
		switch n % 10 {
		case 0:
			reps = 2
		case 1:
			reps = 0
		}
		for r := range reps {
			b.Field(0).(*array.StringBuilder).Append(keys.Value(i))
			b.Field(1).(*array.Float64Builder).Append(float64(ids.Value(i)*int64(n)) / 7)
			b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("%s/%d", vs.Value(i), r))
		}
	}
	return b.NewRecordBatch(), ctx.Err()
}

// model is the test model of output out over source src.
func (s *scorer) model(out, src string) writestrategy.Model {
	return writestrategy.Model{Output: out, Source: src, Key: []string{"id"}, Columns: []string{"id", "v", "n"},
		Schema: scoreSchema, Func: s.fn, Window: 700, Concurrency: 3}
}

// wantScoreRows is the number of output rows of the test model over ids
// lo..hi (n = id % 97).
func wantScoreRows(lo, hi int64) int64 {
	var n int64
	for id := lo; id <= hi; id++ {
		switch id % 97 % 10 {
		case 0:
			n += 2
		case 1:
		default:
			n++
		}
	}
	return n
}

// A model's first run scores every source row, in windows, on either
// sink, and both sinks hold the same rows.
func TestModelFullRun(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	ensureOutputs(t, w.pool, "src", "scores_pg", "scores_ice")
	w.loadRows("src", facade.Replace, 1, 5000, 1)
	w.iceberg("scores_ice")
	var want facade.Checksum
	for _, out := range []string{"scores_pg", "scores_ice"} {
		s := &scorer{}
		res := w.mustWrite(s.model(out, "src"))
		require.Equal(t, int64(5000), s.calls.Load(), out)
		require.Equal(t, wantScoreRows(1, 5000), res[0].Rows, out)
		c := w.checksum(out)
		require.Equal(t, wantScoreRows(1, 5000), c.Rows)
		if want.Rows == 0 {
			want = c
		}
		require.Equal(t, want, c, "both sinks hold the same rows")
	}
	var keys int64
	require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT count(DISTINCT data->>'__source_row_key') FROM lakewrite.dataset_rows WHERE dataset_id = 'scores_pg'`).Scan(&keys))
	require.Equal(t, 5000-countN1(1, 5000), keys, "every source row with an output row has its key")
	// Verify re-scores the source: a deterministic model has parity.
	s := &scorer{}
	par, err := w.d.Verify(context.Background(), writestrategy.Request{Strategy: s.model("scores_ice", "src")})
	require.NoError(t, err)
	require.True(t, par[0].OK(), par[0].String())
}

// countN1 counts the ids lo..hi without output row (n%10 == 1).
func countN1(lo, hi int64) int64 {
	var n int64
	for id := lo; id <= hi; id++ {
		if id%97%10 == 1 {
			n++
		}
	}
	return n
}

// A model whose function fails, panics or runs past its deadline in a
// later window fails the write with an error naming the window and its
// keys; nothing is visible and the output keeps its earlier rows.
func TestModelFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	ensureOutputs(t, w.pool, "src", "m_pg", "m_ice")
	w.loadRows("src", facade.Replace, 1, 3000, 1)
	w.iceberg("m_ice")
	boom := errors.New("boom")
	for _, out := range []string{"m_pg", "m_ice"} {
		good := &scorer{}
		w.mustWrite(good.model(out, "src"))
		before := w.checksum(out)
		w.loadRows("src", facade.Replace, 1, 3000, 2)
		for name, f := range map[string]func(int64) error{
			"error": func(id int64) error {
				if id > 1400 {
					return boom
				}
				return nil
			},
			"panic": func(id int64) error {
				if id > 1400 {
					panic("model exploded")
				}
				return nil
			},
		} {
			s := &scorer{fail: f}
			_, err := w.write(s.model(out, "src"))
			var we *model.WindowError
			require.ErrorAs(t, err, &we, name)
			require.Equal(t, 2, we.Window, name) // windows of 700: ids 1401..2100
			require.Equal(t, "[1401]", we.First, name)
			require.Equal(t, "[2100]", we.Last, name)
			if name == "panic" {
				require.ErrorIs(t, err, model.ErrPanic)
			} else {
				require.ErrorIs(t, err, boom)
			}
			require.Equal(t, before, w.checksum(out), "%s on %s: nothing visible", name, out)
			require.Zero(t, w.openIntents(out))
		}
		late := writestrategy.Model{Output: out, Source: "src", Key: []string{"id"}, Columns: []string{"id"}, Schema: scoreSchema,
			Window: 1000, Deadline: 20 * time.Millisecond, Func: func(ctx context.Context, in arrow.RecordBatch) (arrow.RecordBatch, error) {
				<-ctx.Done()
				return nil, nil
			}}
		_, err := w.write(late)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, before, w.checksum(out))
	}
}

// modelSource creates table "items" (id, v, n) with ids 1..n, tracked in
// the change log and registered as dataset "items".
func modelSource(t *testing.T, w *world, n int) { modelTable(t, w, "items", n) }

// modelTable is modelSource for table and dataset name.
func modelTable(t *testing.T, w *world, name string, n int) {
	t.Helper()
	ctx := context.Background()
	w.exec(`CREATE TABLE ` + name + ` (id bigint PRIMARY KEY, v text NOT NULL, n integer)`)
	w.exec(`INSERT INTO `+name+` SELECT g, 'v' || g, (g % 97)::int FROM generate_series(1, $1::int) g`, n)
	_, err := writestrategy.RegisterRelation(ctx, w.pool, nil, name, name)
	require.NoError(t, err)
	require.NoError(t, changelog.New("").Track(ctx, w.pool, name, name, []string{"id", "v", "n"}))
}

// rowIDs maps each output row's key and label to its __row_id (Iceberg)
// or row_index (row store): its identity.
func (w *world) modelIdentity(out string, ice bool) map[string]int64 {
	w.t.Helper()
	got := map[string]int64{}
	if !ice {
		rows, err := w.pool.Query(context.Background(), `SELECT data->>'__source_row_key', data->>'label', row_index FROM lakewrite.dataset_rows WHERE dataset_id = $1`, out)
		require.NoError(w.t, err)
		for rows.Next() {
			var k, l string
			var id int64
			require.NoError(w.t, rows.Scan(&k, &l, &id))
			got[k+" "+l] = id
		}
		require.NoError(w.t, rows.Err())
		return got
	}
	for rec, err := range w.lake.Scan(context.Background(), out, facade.ScanOptions{}) {
		require.NoError(w.t, err)
		sc := rec.Schema()
		k := rec.Column(sc.FieldIndices(model.KeyColumn)[0]).(*array.String)
		l := rec.Column(sc.FieldIndices("label")[0]).(*array.String)
		id := rec.Column(sc.FieldIndices(facade.ColRowID)[0]).(*array.Int64)
		for i := range k.Len() {
			got[k.Value(i)+" "+l.Value(i)] = id.Value(i)
		}
		rec.Release()
	}
	return got
}

// A run after the first calls the function for exactly the source rows
// inserted, updated or deleted since the last run, on either sink (the
// Iceberg arm replaces the rows of the touched keys in one scoped
// replace); the output rows of the other source rows keep their identity
// (__row_index in the row store, __row_id on Iceberg), deleted source rows
// lose theirs, and the output equals a full re-score and the other sink's.
func TestModelIncremental(t *testing.T) {
	t.Parallel()
	const n = 20_000
	w := newWorld(t, nil)
	ensureOutputs(t, w.pool, "scored", "scored_ice")
	modelSource(t, w, n)
	w.iceberg("scored_ice")
	outs := []string{"scored", "scored_ice"}
	scorers := map[string]*scorer{}
	before := map[string]map[string]int64{}
	for _, out := range outs {
		s := &scorer{}
		scorers[out] = s
		w.mustWrite(s.model(out, "items"))
		require.Equal(t, int64(n), s.calls.Load(), "%s: the first run scores every row", out)
		before[out] = w.modelIdentity(out, out == "scored_ice")
	}

	// 1,000 changes: 600 updates, 300 deletes, 100 inserts.
	w.exec(`UPDATE items SET v = v || '!' WHERE id % 20 = 0 AND id <= 12000`)
	w.exec(`DELETE FROM items WHERE id > 19700`)
	w.exec(`INSERT INTO items SELECT g, 'new' || g, (g % 97)::int FROM generate_series(30001, 30100) g`)
	for _, out := range outs {
		s := scorers[out]
		s.calls.Store(0)
		w.mustWrite(s.model(out, "items"))
		require.Equal(t, int64(700), s.calls.Load(), "%s: updated and inserted rows only (deleted ones have nothing to score)", out)
		after := w.modelIdentity(out, out == "scored_ice")
		kept := 0
		for k, id := range before[out] {
			if now, ok := after[k]; ok {
				require.Equal(t, id, now, "%s: row %s keeps its identity", out, k)
				kept++
			}
		}
		require.Greater(t, kept, n/2)
		if out == "m_scored" {
			touched := func(id int64) bool { return id%8 == 0 && id <= 4000 || id%8 == 4 && id <= 800 || id > 4700 }
			var d, i int
			for k := range before[out] {
				var id int64
				_, _ = fmt.Sscanf(k, "[%d]", &id)
				if touched(id) {
					d++
				}
			}
			for k := range after {
				var id int64
				_, _ = fmt.Sscanf(k, "[%d]", &id)
				if touched(id) {
					i++
				}
			}
			var gotD, gotI int
			require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE op = 'D'), count(*) FILTER (WHERE op = 'I')
				FROM lakewrite.change_log WHERE source = 'm_scored'`).Scan(&gotD, &gotI))
			require.Equal(t, [2]int{d, i}, [2]int{gotD, gotI}, "the output rows of the touched keys, deleted and appended, are recorded")
		}
		for k := range after {
			var id int64
			_, err := fmt.Sscanf(k, "[%d]", &id)
			require.NoError(t, err)
			require.True(t, id <= 19700 || id > 30000, "%s: deleted source row %d lost its output rows", out, id)
		}

		// A run with no change scores nothing; the output equals a full
		// re-score (Verify).
		s.calls.Store(0)
		w.mustWrite(s.model(out, "items"))
		require.Zero(t, s.calls.Load(), out)
		par, err := w.d.Verify(context.Background(), writestrategy.Request{Strategy: (&scorer{}).model(out, "items")})
		require.NoError(t, err)
		require.True(t, par[0].OK(), par[0].String())
	}
	require.Equal(t, w.checksum("scored"), w.checksum("scored_ice"), "both sinks hold the same rows")
}

// envModelKill marks the child process of TestModelKilledMidRun.
const envModelKill = "LAKEWRITE_MODELKILL_OUTPUT"

// TestModelKillChild is the writer process of TestModelKilledMidRun: it
// writes the test model into the output named by envModelKill (over
// "items", as sink flags say) and, in its second window, prints
// crashMarker and blocks until it is killed. Run by the test runner it
// has nothing to do.
func TestModelKillChild(t *testing.T) {
	out := os.Getenv(envModelKill)
	if out == "" {
		return
	}
	w := newWorldOn(t, os.Getenv(envCrashURL), nil, nil, nil, nil)
	s := &scorer{}
	windows := 0
	s.fail = func(int64) error {
		if windows++; windows == 2 {
			fmt.Println(crashMarker)
			select {} // wait for SIGKILL in the middle of the run
		}
		return nil
	}
	m := s.model(out, "items")
	m.Concurrency, m.Window = 1, 100
	_, err := w.write(m)
	t.Fatalf("the model run returned instead of blocking: %v", err)
}

// A model writer SIGKILLed in the middle of its windows leaves the output
// as it was on either sink; the next run reconciles the dead intent and
// scores the rows changed since the last committed run.
func TestModelKilledMidRun(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	w := newWorldOn(t, url, nil, nil, nil, nil)
	ensureOutputs(t, w.pool, "mk_pg", "mk_ice")
	modelSource(t, w, 2000)
	w.iceberg("mk_ice")
	for _, out := range []string{"mk_pg", "mk_ice"} {
		s := &scorer{}
		w.mustWrite(s.model(out, "items"))
		before := w.checksum(out)
		w.exec(`UPDATE items SET v = v || '+' WHERE id <= 300`)
		killChild(t, url, "TestModelKillChild", envModelKill+"="+out)
		require.Equal(t, before, w.checksum(out), "%s: nothing visible", out)
		s.calls.Store(0)
		w.mustWrite(s.model(out, "items"))
		require.Equal(t, int64(300), s.calls.Load(), "%s: the changed rows only", out)
		require.Zero(t, w.openIntents(out))
		par, err := w.d.Verify(context.Background(), writestrategy.Request{Strategy: (&scorer{}).model(out, "items")})
		require.NoError(t, err)
		require.True(t, par[0].OK(), par[0].String())
	}
}

// killChild runs test of this binary as a child process with env, waits
// for it to print crashMarker and SIGKILLs it.
func killChild(t *testing.T, url, test string, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), envCrashURL+"="+url), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	reached := false
	var out []string
	for sc := bufio.NewScanner(stdout); sc.Scan(); {
		if sc.Text() == crashMarker {
			reached = true
			break
		}
		out = append(out, sc.Text())
	}
	_ = cmd.Process.Kill()
	err = cmd.Wait()
	require.True(t, reached, "the child ended early (%v)\nstdout:\n%s\nstderr:\n%s", err, strings.Join(out, "\n"), stderr.String())
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee))
	ws, ok := ee.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "child ended with %v", err)
}

var modelMemRows = flag.Int("model.memrows", 100_000, "TestModelMemoryFlat: the larger source's rows (the smaller has a tenth)")

// heapWatch records, at each model window, the live Go heap (after a
// collection) and the windows it saw.
type heapWatch struct {
	windows []writestrategy.ModelWindowEvent
	peak    uint64
}

func (h *heapWatch) PhaseStart(ctx context.Context, _ writestrategy.PhaseEvent) context.Context {
	return ctx
}
func (h *heapWatch) PhaseEnd(context.Context, writestrategy.PhaseEvent) {}
func (h *heapWatch) ModelWindow(_ context.Context, ev writestrategy.ModelWindowEvent) {
	h.windows = append(h.windows, ev)
	h.read()
}

func (h *heapWatch) read() {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	h.peak = max(h.peak, sample[0].Value.Uint64())
}

// A model's memory does not grow with its source: scoring ten times the
// rows into Iceberg holds no more live heap at any window than the smaller
// run plus a small constant (windows of 5,000 rows, two in flight). Each window is reported
// to the Observer, in order, with its rows.
func TestModelMemoryFlat(t *testing.T) {
	large := *modelMemRows
	w := newWorld(t, nil)
	ensureOutputs(t, w.pool, "mem_small", "mem_large")
	modelTable(t, w, "src_small", large/10)
	modelTable(t, w, "src_large", large)
	w.iceberg("mem_small", "mem_large")
	peak := func(out, src string, rows int) uint64 {
		h := &heapWatch{}
		s := &scorer{}
		m := s.model(out, src)
		m.Window, m.Concurrency = 5000, 2
		runtime.GC()
		h.read()
		_, err := w.observed(h).Write(context.Background(), writestrategy.Request{WriterID: writer, Strategy: m})
		require.NoError(t, err)
		require.Equal(t, int64(rows), s.calls.Load())
		require.Len(t, h.windows, (rows+4999)/5000)
		for i, ev := range h.windows {
			require.Equal(t, i, ev.Window)
			require.Equal(t, out, ev.DatasetID)
			require.Equal(t, int64(min(5000, rows-i*5000)), ev.Rows)
			require.Equal(t, int64(rows), ev.Total)
		}
		return h.peak
	}
	small := peak("mem_small", "src_small", large/10)
	big := peak("mem_large", "src_large", large)
	t.Logf("peak live heap: %d rows %.1f MiB, %d rows %.1f MiB", large/10, float64(small)/(1<<20), large, float64(big)/(1<<20))
	require.LessOrEqual(t, big, small+4<<20, "memory grows with the source")
}

// modelDataset creates table feed_t (id, v, n) with ids 1..n, registered
// as a relation, and returns the deploy that copies it (snapshot_replace
// by id) into dataset id, in the row store or on Iceberg (ice): a source
// written by the dispatcher, whose deploys after the first change only
// the rows that changed.
func modelDataset(t *testing.T, w *world, id string, n int, ice bool) writestrategy.Deploy {
	t.Helper()
	w.exec(`CREATE TABLE feed_t (id bigint PRIMARY KEY, v text NOT NULL, n integer)`)
	w.exec(`INSERT INTO feed_t SELECT g, 'v' || g, (g % 97)::int FROM generate_series(1, $1::int) g`, n)
	_, err := writestrategy.RegisterRelation(context.Background(), w.pool, nil, "feed_t", "feed_t")
	require.NoError(t, err)
	ensureOutputs(t, w.pool, id)
	if ice {
		w.iceberg(id)
	}
	deploy := writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "feed_t", Target: id, Key: []string{"id"}}
	w.mustWrite(deploy)
	return deploy
}

// A model over a row-store dataset written by the dispatcher is
// incremental too: its first run registers the source as a change source
// and scores every row; after 1,000 changes of the source (updates of
// non-key values, deletes, inserts) the function sees exactly the changed
// rows that still exist, on either sink, the other output rows keep their
// identity, deleted rows' outputs are gone, the output equals a full
// re-score and the other sink's. A full replace of the source makes the
// next run score every row, and says why.
func TestModelIncrementalRowStore(t *testing.T) {
	t.Parallel()
	testModelOverDataset(t, false)
}

// A model over an Iceberg dataset is incremental the same way: the touched
// keys come from the source's changes between the snapshot the last run
// read and its last committed one (facade.ChangeReader), and only the
// source rows of those keys are read, by a key-set scan (ScanOptions.In).
// A full replace touches every key: the run is full.
func TestModelIncrementalIceberg(t *testing.T) {
	t.Parallel()
	testModelOverDataset(t, true)
}

func testModelOverDataset(t *testing.T, ice bool) {
	const n = 5000
	w, reads := newDeltaWorld(t)
	deploy := modelDataset(t, w, "m_src", n, ice)
	ensureOutputs(t, w.pool, "m_scored", "m_scored_ice")
	w.iceberg("m_scored_ice")
	outs := []string{"m_scored", "m_scored_ice"}
	scorers := map[string]*scorer{}
	before := map[string]map[string]int64{}
	for _, out := range outs {
		s := &scorer{}
		scorers[out] = s
		res := w.mustWrite(s.model(out, "m_src"))
		require.Equal(t, int64(n), s.calls.Load(), "%s: the first run scores every row", out)
		require.Equal(t, incremental.RefreshFull, res[0].Refresh.Mode, out)
		before[out] = w.modelIdentity(out, out == "m_scored_ice")
	}
	if !ice {
		var registered bool
		require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM lakewrite.change_sources WHERE source = 'm_src')`).Scan(&registered))
		require.True(t, registered, "the model's row-store source records its changes")
	}

	// The row-store output is itself a change source (a declared output
	// or another model reads it): its incremental run records the images
	// of the rows it deletes and appends.
	require.NoError(t, changelog.New("").RegisterSource(context.Background(), w.pool, "m_scored"))

	// 1,000 changes: 500 updates of v, 100 of n (which changes the
	// number of output rows), 300 deletes, 100 inserts, deployed into the
	// source.
	w.exec(`UPDATE feed_t SET v = v || '!' WHERE id % 8 = 0 AND id <= 4000`)
	w.exec(`UPDATE feed_t SET n = n + 1 WHERE id % 8 = 4 AND id <= 800`)
	w.exec(`DELETE FROM feed_t WHERE id > 4700`)
	w.exec(`INSERT INTO feed_t SELECT g, 'new' || g, (g % 97)::int FROM generate_series(10001, 10100) g`)
	w.mustWrite(deploy)
	for _, out := range outs {
		s := scorers[out]
		s.calls.Store(0)
		reads.take("m_src")
		res := w.mustWrite(s.model(out, "m_src"))
		require.Equal(t, int64(700), s.calls.Load(), "%s: updated and inserted rows only", out)
		if whole, _ := reads.take("m_src"); ice {
			require.Equal(t, int64(700), whole, "%s: the key-set scan reads the touched keys' rows only", out)
		}
		require.Equal(t, incremental.RefreshReport{Mode: incremental.RefreshIncremental, Keys: 1000}, res[0].Refresh, out)
		after := w.modelIdentity(out, out == "m_scored_ice")
		kept := 0
		for k, id := range before[out] {
			var src int64
			_, err := fmt.Sscanf(k, "[%d]", &src)
			require.NoError(t, err)
			if src%8 == 4 && src <= 800 { // n changed: the same key and label, another row
				continue
			}
			if now, ok := after[k]; ok {
				require.Equal(t, id, now, "%s: row %s keeps its identity", out, k)
				kept++
			}
		}
		require.Greater(t, kept, n/2)
		if out == "m_scored" {
			touched := func(id int64) bool { return id%8 == 0 && id <= 4000 || id%8 == 4 && id <= 800 || id > 4700 }
			var d, i int
			for k := range before[out] {
				var id int64
				_, _ = fmt.Sscanf(k, "[%d]", &id)
				if touched(id) {
					d++
				}
			}
			for k := range after {
				var id int64
				_, _ = fmt.Sscanf(k, "[%d]", &id)
				if touched(id) {
					i++
				}
			}
			var gotD, gotI int
			require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE op = 'D'), count(*) FILTER (WHERE op = 'I')
				FROM lakewrite.change_log WHERE source = 'm_scored'`).Scan(&gotD, &gotI))
			require.Equal(t, [2]int{d, i}, [2]int{gotD, gotI}, "the output rows of the touched keys, deleted and appended, are recorded")
		}
		for k := range after {
			var id int64
			_, err := fmt.Sscanf(k, "[%d]", &id)
			require.NoError(t, err)
			require.True(t, id <= 4700 || id > 10000, "%s: deleted source row %d lost its output rows", out, id)
		}
		par, err := w.d.Verify(context.Background(), writestrategy.Request{Strategy: (&scorer{}).model(out, "m_src")})
		require.NoError(t, err)
		require.True(t, par[0].OK(), par[0].String())
	}
	require.Equal(t, w.checksum("m_scored"), w.checksum("m_scored_ice"), "both sinks hold the same rows")

	// A full replace of the source: the next run scores every row.
	w.loadRows("m_src", facade.Replace, 1, 3000, 7)
	reason := changelog.ReasonFull
	if ice {
		reason = "the changes touch every row of the source"
	}
	for _, out := range outs {
		s := scorers[out]
		s.calls.Store(0)
		res := w.mustWrite(s.model(out, "m_src"))
		require.Equal(t, int64(3000), s.calls.Load(), out)
		require.Equal(t, incremental.RefreshReport{Mode: incremental.RefreshFull, Reason: reason}, res[0].Refresh, out)
		require.Equal(t, wantScoreRows(1, 3000), w.checksum(out).Rows, out)
	}
	require.Equal(t, w.checksum("m_scored"), w.checksum("m_scored_ice"), "both sinks hold the same rows")
	if !ice {
		return
	}

	// The source's maintenance expires the snapshots the last runs read and
	// the one after them (it keeps its newest only): the next run cannot
	// read its window and runs full, saying why (not an error: every later
	// run would fail); the run after it is incremental again.
	w.loadRows("m_src", facade.Append, 3001, 3010, 7)
	w.loadRows("m_src", facade.Append, 3011, 3020, 7)
	_, err := reads.Facade.MaintainWith(context.Background(), "m_src",
		facade.Lifecycle{KeepLast: 1, EveryCommits: 1, FileGrace: -1, OrphanEvery: -1, CompactMinFiles: 1000})
	require.NoError(t, err)
	for _, out := range outs {
		s := scorers[out]
		s.calls.Store(0)
		res := w.mustWrite(s.model(out, "m_src"))
		require.Equal(t, incremental.RefreshFull, res[0].Refresh.Mode, out)
		require.Contains(t, res[0].Refresh.Reason, "changes between the snapshots unknown", out)
		require.Equal(t, int64(3020), s.calls.Load(), out)
	}
	w.loadRows("m_src", facade.Append, 3021, 3025, 7)
	for _, out := range outs {
		s := scorers[out]
		s.calls.Store(0)
		res := w.mustWrite(s.model(out, "m_src"))
		require.Equal(t, incremental.RefreshReport{Mode: incremental.RefreshIncremental, Keys: 5}, res[0].Refresh, out)
		require.Equal(t, int64(5), s.calls.Load(), out)
		require.Equal(t, wantScoreRows(1, 3025), w.checksum(out).Rows, out)
	}
	require.Equal(t, w.checksum("m_scored"), w.checksum("m_scored_ice"), "both sinks hold the same rows")

	// The Iceberg output's table dropped outside the Dispatcher: the next
	// run, which would patch an empty table, scores every row.
	_, err = reads.Facade.DropTable(context.Background(), "m_scored_ice")
	require.NoError(t, err)
	s := scorers["m_scored_ice"]
	s.calls.Store(0)
	res := w.mustWrite(s.model("m_scored_ice", "m_src"))
	require.Equal(t, incremental.RefreshFull, res[0].Refresh.Mode)
	require.Contains(t, res[0].Refresh.Reason, "its table does not exist")
	require.Equal(t, int64(3025), s.calls.Load())
	require.Equal(t, w.checksum("m_scored"), w.checksum("m_scored_ice"), "both sinks hold the same rows")
}

// A model output in shadow mode: each run (the first in full, the next
// incremental) is written to the row store and mirrored to Iceberg, and
// the shadow's parity holds. The shadow compares the write of record with
// its mirror, so it holds for a function whose answers drift too; Verify
// re-scores the source, so for such a function it reports a mismatch of
// the same rows (the keys agree, the values do not).
func TestModelShadowAndVerify(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	ensureOutputs(t, w.pool, "sh_det", "sh_drift")
	modelSource(t, w, 1000)
	w.shadow("sh_det", "sh_drift")
	var drift atomic.Int64
	drifting := writestrategy.Model{Output: "sh_drift", Source: "items", Key: []string{"id"}, Columns: []string{"id"}, Schema: scoreSchema,
		Func: func(_ context.Context, in arrow.RecordBatch) (arrow.RecordBatch, error) {
			b := array.NewRecordBuilder(memory.DefaultAllocator, model.OutputSchema(scoreSchema))
			defer b.Release()
			keys := in.Column(0).(*array.String)
			for i := range keys.Len() {
				b.Field(0).(*array.StringBuilder).Append(keys.Value(i))
				b.Field(1).(*array.Float64Builder).Append(float64(drift.Add(1)))
				b.Field(2).(*array.StringBuilder).Append("x")
			}
			return b.NewRecordBatch(), nil
		}}
	det := &scorer{}
	for run := 1; run <= 2; run++ {
		for _, m := range []writestrategy.Model{det.model("sh_det", "items"), drifting} {
			res := w.mustWrite(m)
			want := incremental.RefreshReport{Mode: incremental.RefreshFull, Reason: "first run"}
			if run == 2 {
				want = incremental.RefreshReport{Mode: incremental.RefreshIncremental, Keys: 50}
			}
			require.Equal(t, want, res[0].Refresh, "%s run %d", m.Output, run)
			st := w.shadowStatus(m.Output)
			require.Equal(t, "matched", st.Last.Status, "%s run %d: %+v", m.Output, run, st.Last)
			require.Equal(t, res[0].TxnID, st.Last.TxnID)
			require.Equal(t, w.checksum(m.Output), st.Last.Iceberg, "%s run %d: the mirror holds the rows of record", m.Output, run)
		}
		if run == 1 {
			w.exec(`UPDATE items SET v = v || '*' WHERE id <= 50`)
		}
	}
	par, err := w.d.Verify(ctx, writestrategy.Request{Strategy: (&scorer{}).model("sh_det", "items")})
	require.NoError(t, err)
	require.True(t, par[0].OK(), par[0].String())
	par, err = w.d.Verify(ctx, writestrategy.Request{Strategy: drifting})
	require.NoError(t, err)
	require.False(t, par[0].OK(), "a drifting function's answers changed: %s", par[0])
	require.Equal(t, par[0].Stored.Rows, par[0].Computed.Rows, "the same rows")
}

// A model over an Iceberg source keyed by two columns reads the source
// whole on an incremental run (a key-set scan prunes on one column) and
// still scores only the touched keys' rows: an update of a key column is
// the old key deleted and the new one inserted.
func TestModelIncrementalIcebergCompositeKey(t *testing.T) {
	t.Parallel()
	w, reads := newDeltaWorld(t)
	deploy := modelDataset(t, w, "mc_src", 1000, true)
	ensureOutputs(t, w.pool, "mc_scored")
	s := &scorer{}
	m := s.model("mc_scored", "mc_src")
	m.Key = []string{"id", "v"}
	w.mustWrite(m)
	require.Equal(t, int64(1000), s.calls.Load())
	w.exec(`UPDATE feed_t SET v = v || '!' WHERE id <= 40`)
	w.exec(`DELETE FROM feed_t WHERE id > 990`)
	w.mustWrite(deploy)
	s.calls.Store(0)
	reads.take("mc_src")
	res := w.mustWrite(m)
	require.Equal(t, int64(40), s.calls.Load(), "the updated rows, under their new keys")
	require.Equal(t, incremental.RefreshReport{Mode: incremental.RefreshIncremental, Keys: 90}, res[0].Refresh)
	whole, _ := reads.take("mc_src")
	require.Equal(t, int64(990), whole, "read whole: the key has two columns")
	par, err := w.d.Verify(context.Background(), writestrategy.Request{Strategy: m})
	require.NoError(t, err)
	require.True(t, par[0].OK(), par[0].String())
}

// A model run whose row-store source's window is unknown while a writer
// of the source is in flight (its intent opened before the registration
// may not record its changes) stores no position: the next run scores
// every row again, and the runs after it are incremental.
func TestModelRowStoreWriterInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	deploy := modelDataset(t, w, "wf_src", 200, false)
	ensureOutputs(t, w.pool, "wf_out")
	in, err := w.ledger.Open(ctx, ledger.OpenParams{DatasetID: "wf_src", WriterID: writer, Sink: sink.Postgres, WriteMode: facade.Replace})
	require.NoError(t, err)
	s := &scorer{}
	res := w.mustWrite(s.model("wf_out", "wf_src"))
	require.Equal(t, incremental.RefreshReport{Mode: incremental.RefreshFull, Reason: "first run"}, res[0].Refresh)
	positions, err := changelog.New("").Positions(ctx, w.pool, "wf_out")
	require.NoError(t, err)
	require.Empty(t, positions, "a writer of the source was in flight: no position")
	require.NoError(t, w.ledger.Abort(ctx, in, errors.New("test writer gone")))

	s.calls.Store(0)
	res = w.mustWrite(s.model("wf_out", "wf_src"))
	require.Equal(t, int64(200), s.calls.Load())
	require.Equal(t, incremental.RefreshReport{Mode: incremental.RefreshFull, Reason: "no earlier position"}, res[0].Refresh)
	w.exec(`UPDATE feed_t SET v = v || '!' WHERE id <= 10`)
	w.mustWrite(deploy)
	s.calls.Store(0)
	res = w.mustWrite(s.model("wf_out", "wf_src"))
	require.Equal(t, int64(10), s.calls.Load())
	require.Equal(t, incremental.RefreshReport{Mode: incremental.RefreshIncremental, Keys: 10}, res[0].Refresh)
}
