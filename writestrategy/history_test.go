package writestrategy_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// The randomized history test: seeded sequences of what a pipeline meets
// over weeks, on a Dispatcher over the catalog of facade.NewPostgresCatalog
// and a local warehouse. Each step changes the source with awkward values
// (±0, NaN, ±Infinity, subnormal and extreme floats, extreme timestamps,
// unicode, empty and 'NULL' text, NULL keys of the append_new, arrays of
// these), in small changes (merge-on-read) and large ones (past the
// copy-on-write crossover, or emptying a partition); and, at random, flips
// the flippable outputs between Postgres and Iceberg, changes the source
// schema (adds a column, widens int to bigint and real to double,
// drops a column), evolves the partitioning of one
// table, upgrades a table from format v2 to v3, writes one table in a
// burst, and runs maintenance while readers read snapshots they loaded
// earlier. The lifecycle is tight
// (KeepLast 2, EveryCommits 2, compaction from 3 small files, a grace of a
// few seconds, an orphan pass on every run).
//
// After every step each output equals the Postgres computation of the
// same SQL (text forms, so -0 is not 0), passes Verify, and has the
// checksum of its twin on Postgres; each Iceberg table's current snapshot
// read from its files by this test's own reader (history_read_test.go)
// equals the facade's Scan of it; every snapshot a reader loaded less than
// the grace ago still reads as it did; no maintenance fails, and the
// snapshots kept stay bounded.
//
// Sized by flags: -history.runs seeds from -history.seed on, of
// -history.steps steps each (short by default; -history.runs 50
// -history.steps 30 for a long run). A failing seed is printed with the
// command that replays it.

var (
	historySeed  = flag.Uint64("history.seed", 1, "first seed of TestHistoryRandomized")
	historyRuns  = flag.Int("history.runs", 1, "seeds of TestHistoryRandomized, from history.seed on")
	historySteps = flag.Int("history.steps", 6, "steps per seed of TestHistoryRandomized")
	historyReal  = flag.Bool("history.widenreal", true, "let TestHistoryRandomized widen a real column to double precision (false: never)")
	historyGrace = flag.Duration("history.grace", 4*time.Second, "FileGrace of TestHistoryRandomized's lifecycle")
)

func TestHistoryRandomized(t *testing.T) {
	t.Parallel()
	for seed := *historySeed; seed < *historySeed+uint64(*historyRuns); seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("replay: go test -count=1 -run TestHistoryRandomized ./writestrategy/ -history.seed %d -history.runs 1 -history.steps %d -history.grace %v -history.widenreal=%v",
						seed, *historySteps, *historyGrace, *historyReal)
				}
			})
			runHistory(t, seed, *historySteps)
		})
	}
}

// hcol is a column of the source, of kind f8, f4, int, bigint, text, cat,
// tag, num, ts or arr (the kind picks its type and its awkward values).
type hcol struct{ name, kind string }

var hkindType = map[string]string{
	"f8": "double precision", "f4": "real", "int": "integer", "bigint": "bigint", "text": "text", "cat": "text", "tag": "text",
	"num": "numeric(12,2)", "ts": "timestamp with time zone", "arr": "double precision[]", "id": "bigint",
}

// hvalues are the awkward values of each kind, as text (nil: NULL).
var hvalues = map[string][]any{
	"f8":     {"0", "-0", "NaN", "Infinity", "-Infinity", "5e-324", "-5e-324", "1.7976931348623157e308", "0.1", "-2.5", nil},
	"f4":     {"0", "-0", "NaN", "Infinity", "-Infinity", "1.4e-45", "3.4028235e38", "0.1", nil},
	"int":    {"0", "-1", "2147483647", "-2147483648", "7", nil},
	"bigint": {"0", "-1", "2147483647", "-2147483648", "9223372036854775807", "-9223372036854775808", nil},
	"text":   {"", "ü", "日本語", "😀 emoji", "a", "tab\t\"q\" \\ ,{}", "NULL", "null", " ", nil},
	"cat":    {"a", "b", "ü", "", nil},
	"tag":    {"", "NULL", "ü", "😀", nil},
	"num":    {"0", "-0.01", "9999999999.99", "-9999999999.99", "1.50", nil},
	"ts": {"0001-01-01 00:00:00+00", "9999-12-31 23:59:59.999999+00", "1970-01-01 00:00:00+00",
		"1969-12-31 23:59:59.999999+00", "2000-02-29 12:00:00+05:30", "2026-03-29 01:30:00+00", nil},
	"arr": {"{}", "{-0,NaN,NULL}", "{Infinity,-Infinity,0}", "{5e-324,-0}", "{NULL}", nil},
}

// Partitionings of the partitioned output, evolved at random.
var hpartitions = []facade.Partitioning{
	{},
	{Fields: []facade.PartitionField{{Column: "cat"}}},
	{Fields: []facade.PartitionField{{Column: "id", Transform: "bucket[4]"}}},
	{Fields: []facade.PartitionField{{Column: "ts", Transform: "day"}}},
	{Fields: []facade.PartitionField{{Column: "cat"}, {Column: "id", Transform: "bucket[2]"}}},
	{Fields: []facade.PartitionField{{Column: "tag", Transform: "truncate[2]"}}},
}

// The outputs: sr (snapshot_replace) and an (append_new keyed by the
// nullable tag) flip between the sinks; srp (snapshot_replace) stays on
// Iceberg and has its partitioning evolved; pg_sr and pg_an are the same
// strategies kept on Postgres.
var (
	hflippable = []string{"sr", "an"}
	hreplaces  = []string{"sr", "srp", "pg_sr"}
)

type history struct {
	t    *testing.T
	ctx  context.Context
	rnd  *rand.Rand
	w    *world
	f    *facade.Facade
	life facade.Lifecycle
	cols []hcol
	next int64 // the next id to insert
	xcol int   // added columns so far

	mu       sync.Mutex
	part     int            // index in hpartitions of srp's partitioning
	versions map[string]int // format version of each Iceberg output

	onIceberg map[string]bool // where the flippable outputs live
	readers   []oldReader
	warnings  *warnLog
	stats     map[string]int
}

// oldReader is a reader that loaded a table's metadata at some time and
// reads one of its snapshots later.
type oldReader struct {
	id     string
	tbl    *table.Table
	snap   int64
	at     time.Time
	rows   []string
	loaded string // the step that loaded it
}

// warnLog keeps the Warn and Error records of the dispatcher's logger.
type warnLog struct {
	mu   sync.Mutex
	msgs []string
}

func (l *warnLog) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }
func (l *warnLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	l.msgs = append(l.msgs, b.String())
	l.mu.Unlock()
	return nil
}
func (l *warnLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *warnLog) WithGroup(string) slog.Handler      { return l }
func (l *warnLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.msgs
	l.msgs = nil
	return out
}

func runHistory(t *testing.T, seed uint64, steps int) {
	ctx := context.Background()
	h := &history{t: t, ctx: ctx, rnd: rand.New(rand.NewPCG(seed, 0x4157)), warnings: &warnLog{}, stats: map[string]int{},
		versions: map[string]int{"sr": 2, "an": 2, "srp": 2}, onIceberg: map[string]bool{"sr": true, "an": true}}
	if h.rnd.IntN(2) == 0 {
		h.versions["srp"] = 3
	}
	h.part = h.rnd.IntN(len(hpartitions))
	h.life = facade.Lifecycle{KeepLast: 2, EveryCommits: 2, FileGrace: *historyGrace, OrphanAge: time.Millisecond, OrphanEvery: -1, CompactMinFiles: 3}
	fc := &facade.Config{
		Lifecycle: h.life,
		PartitionFor: func(id string) (facade.Partitioning, bool) {
			h.mu.Lock()
			defer h.mu.Unlock()
			return hpartitions[h.part], id == "srp"
		},
		FormatVersionFor: func(id string) (int, bool) {
			h.mu.Lock()
			defer h.mu.Unlock()
			v, ok := h.versions[id]
			return v, ok
		},
	}

	pool, err := pgxpool.New(ctx, pgtest.URL(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	cat, err := facade.NewPostgresCatalog(ctx, pool, facade.CatalogConfig{Warehouse: t.TempDir()})
	require.NoError(t, err)
	h.f, err = facade.New(cat, fc)
	require.NoError(t, err)
	l, err := ledger.New(pool, nil)
	require.NoError(t, err)
	flags, err := sink.NewFlags(pool, nil)
	require.NoError(t, err)
	require.NoError(t, flags.SetWriter(ctx, sink.WriterFlags{WriterID: writer, Default: sink.Postgres, Max: sink.Iceberg}))
	res, err := sink.NewResolver(flags, nil)
	require.NoError(t, err)
	d, err := writestrategy.NewDispatcher(pool, &writestrategy.DispatchConfig{Ledger: l, Resolver: res, Lakehouse: h.f, Workspace: "test",
		Logger: slog.New(h.warnings)})
	require.NoError(t, err)
	h.w = &world{t: t, pool: pool, ledger: l, flags: flags, resolver: res, lake: h.f, d: d}

	h.cols = []hcol{{"id", "id"}, {"tag", "tag"}, {"cat", "cat"}, {"f8", "f8"}, {"f4", "f4"}, {"n", "int"},
		{"amt", "num"}, {"ts", "ts"}, {"arr", "arr"}, {"note", "text"}}
	var defs []string
	for _, c := range h.cols {
		defs = append(defs, c.name+" "+hkindType[c.kind])
	}
	h.w.exec(`CREATE TABLE h_src (` + strings.Join(defs, ", ") + `, PRIMARY KEY (id), CONSTRAINT h_src_tag UNIQUE NULLS NOT DISTINCT (tag))`)
	for range 60 + h.rnd.IntN(60) {
		h.insert()
	}
	ensureOutputs(t, pool, "sr", "an", "srp", "pg_sr", "pg_an")
	h.w.iceberg("sr", "an", "srp")
	t.Logf("seed %d: srp v%d partitioned %v", seed, h.versions["srp"], hpartitions[h.part].Fields)

	h.writeAll("step 0")
	for step := 1; step <= steps; step++ {
		msg := fmt.Sprintf("step %d", step)
		var ops []string
		if h.rnd.IntN(5) == 0 {
			ops = append(ops, "flip")
			h.flip()
		}
		if h.rnd.IntN(4) == 0 {
			ops = append(ops, h.schemaChange())
		}
		if h.rnd.IntN(5) == 0 {
			ops = append(ops, h.evolvePartitioning())
		}
		if h.rnd.IntN(6) == 0 {
			ops = append(ops, h.upgrade())
		}
		ops = append(ops, h.mutate())
		if h.rnd.IntN(4) == 0 {
			ops = append(ops, "burst")
			h.burst(msg)
		}
		h.writeAll(msg + " " + strings.Join(ops, ", "))
		if h.rnd.IntN(3) == 0 {
			h.maintainWithReaders(msg)
		}
		h.readOld(msg)
	}
	keys := make([]string, 0, len(h.stats))
	for k := range h.stats {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, h.stats[k]))
	}
	t.Logf("seed %d, %d steps: %s", seed, steps, strings.Join(parts, " "))
}

// value is a random value of kind k, as text or nil.
func (h *history) value(k string) any {
	vs := hvalues[k]
	if k == "tag" && h.rnd.IntN(2) == 0 {
		return fmt.Sprintf("t%d·%d", h.next, h.rnd.IntN(1000)) // mostly unique; the awkward ones collide
	}
	return vs[h.rnd.IntN(len(vs))]
}

// set runs one statement on the source and reports whether it kept the
// tag unique (a unique violation is a no-op).
func (h *history) set(sql string, args ...any) bool {
	_, err := h.w.pool.Exec(h.ctx, sql, args...)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return false
	}
	require.NoError(h.t, err, sql)
	return true
}

// insert adds one row of random values.
func (h *history) insert() {
	h.next++
	names := []string{"id"}
	ph := []string{"$1::bigint"}
	args := []any{h.next}
	for _, c := range h.cols[1:] {
		names = append(names, c.name)
		args = append(args, h.value(c.kind))
		ph = append(ph, fmt.Sprintf("$%d::text::%s", len(args), hkindType[c.kind]))
	}
	sql := `INSERT INTO h_src (` + strings.Join(names, ", ") + `) VALUES (` + strings.Join(ph, ", ") + `)`
	if !h.set(sql, args...) {
		args[1] = fmt.Sprintf("u%d", h.next) // a tag no other row has
		require.True(h.t, h.set(sql, args...))
	}
}

// update gives row id random values in a few columns.
func (h *history) update(id int64) {
	var sets []string
	var args []any
	tagged := false
	for _, c := range h.cols[1:] {
		if h.rnd.IntN(3) != 0 {
			continue
		}
		args = append(args, h.value(c.kind))
		sets = append(sets, fmt.Sprintf("%s = $%d::text::%s", c.name, len(args), hkindType[c.kind]))
		tagged = tagged || c.kind == "tag"
	}
	if len(sets) == 0 || (len(sets) == 1 && tagged) {
		args = append(args, h.value("cat"))
		sets = append(sets, fmt.Sprintf("cat = $%d::text", len(args)))
	}
	args = append(args, id)
	sql := fmt.Sprintf(`UPDATE h_src SET %s WHERE id = $%d`, strings.Join(sets, ", "), len(args))
	if !h.set(sql, args...) {
		// The new tag is another row's: the row keeps its own.
		for i, set := range sets {
			if strings.HasPrefix(set, "tag = ") {
				sets[i] = fmt.Sprintf("tag = CASE WHEN $%d::text IS NULL THEN tag ELSE tag END", i+1)
			}
		}
		require.True(h.t, h.set(fmt.Sprintf(`UPDATE h_src SET %s WHERE id = $%d`, strings.Join(sets, ", "), len(args)), args...))
	}
}

// twin changes row id in one column to the value the last one is easiest
// to confuse with: 0 and -0 (also in arrays), NULL and 'NULL'.
func (h *history) twin(id int64) {
	var cands []hcol
	for _, c := range h.cols {
		switch c.kind {
		case "f8", "f4", "arr", "text", "cat":
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		h.update(id)
		return
	}
	c := cands[h.rnd.IntN(len(cands))]
	typ := hkindType[c.kind]
	var expr string
	switch c.kind {
	case "f8", "f4":
		expr = fmt.Sprintf(`CASE WHEN %[1]s::text = '0' THEN '-0'::%[2]s ELSE '0'::%[2]s END`, c.name, typ)
	case "arr":
		expr = fmt.Sprintf(`CASE WHEN %[1]s::text = '{0}' THEN '{-0}'::%[2]s ELSE '{0}'::%[2]s END`, c.name, typ)
	default:
		expr = fmt.Sprintf(`CASE WHEN %[1]s IS NULL THEN 'NULL' END`, c.name)
	}
	h.set(fmt.Sprintf(`UPDATE h_src SET %s = %s WHERE id = $1`, c.name, expr), id)
	h.stats["twin changes"]++
}

func (h *history) ids() []int64 {
	rows, err := h.w.pool.Query(h.ctx, `SELECT id FROM h_src ORDER BY id`)
	require.NoError(h.t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(h.t, err)
	return ids
}

// mutate changes the source: a few rows, a large share of them (past the
// copy-on-write crossover of v2), or every row of one category (emptying
// its files, the crossover of v3).
func (h *history) mutate() string {
	ids := h.ids()
	h.rnd.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	var what string
	switch r := h.rnd.IntN(10); {
	case r < 5:
		u, n, d := 1+h.rnd.IntN(3), h.rnd.IntN(3), h.rnd.IntN(2)
		for _, id := range ids[:min(u, len(ids))] {
			if h.rnd.IntN(2) == 0 {
				h.twin(id)
			} else {
				h.update(id)
			}
		}
		for _, id := range ids[min(u, len(ids)):min(u+d, len(ids))] {
			h.set(`DELETE FROM h_src WHERE id = $1`, id)
		}
		for range n {
			h.insert()
		}
		what = fmt.Sprintf("small change %d/%d/%d", u, n, d)
	case r < 8:
		u := len(ids) * (30 + h.rnd.IntN(40)) / 100
		d := len(ids) / 10
		for _, id := range ids[:u] {
			h.update(id)
		}
		for _, id := range ids[u : u+d] {
			h.set(`DELETE FROM h_src WHERE id = $1`, id)
		}
		what = fmt.Sprintf("large change %d/0/%d", u, d)
	default:
		c := h.value("cat")
		tag, err := h.w.pool.Exec(h.ctx, `DELETE FROM h_src WHERE cat IS NOT DISTINCT FROM $1::text`, c)
		require.NoError(h.t, err)
		what = fmt.Sprintf("category %v deleted (%d rows)", c, tag.RowsAffected())
	}
	for len(h.ids()) < 40 {
		h.insert()
	}
	return what
}

// flip moves the flippable outputs to the other sink.
func (h *history) flip() {
	h.stats["flips"]++
	for _, id := range hflippable {
		if h.onIceberg[id] {
			_, err := h.w.flags.ClearOverride(h.ctx, writer, id)
			require.NoError(h.t, err)
		} else {
			require.NoError(h.t, h.w.flags.SetOverride(h.ctx, writer, sink.Iceberg, id))
		}
		h.onIceberg[id] = !h.onIceberg[id]
	}
	h.w.resolver.Invalidate()
}

// schemaChange adds a column, widens one, or drops one.
func (h *history) schemaChange() string {
	switch h.rnd.IntN(3) {
	case 0:
		h.xcol++
		kinds := []string{"f8", "text", "num", "ts", "arr"}
		c := hcol{fmt.Sprintf("x%d", h.xcol), kinds[h.rnd.IntN(len(kinds))]}
		h.w.exec(fmt.Sprintf(`ALTER TABLE h_src ADD COLUMN %s %s`, c.name, hkindType[c.kind]))
		h.cols = append(h.cols, c)
		for _, id := range h.ids() {
			if h.rnd.IntN(2) == 0 {
				h.set(fmt.Sprintf(`UPDATE h_src SET %s = $1::text::%s WHERE id = $2`, c.name, hkindType[c.kind]), h.value(c.kind), id)
			}
		}
		h.stats["columns added"]++
		return "add column " + c.name + " " + hkindType[c.kind]
	case 1:
		for i, c := range h.cols {
			to := map[string]string{"int": "bigint", "f4": "f8"}[c.kind]
			if to == "f8" && !*historyReal {
				continue
			}
			if to != "" {
				h.w.exec(fmt.Sprintf(`ALTER TABLE h_src ALTER %s TYPE %s`, c.name, hkindType[to]))
				h.cols[i].kind = to
				h.stats["columns widened"]++
				return "widen " + c.name + " to " + hkindType[to]
			}
		}
	}
	// Drop a column no key, partitioning or the append_new reads.
	var droppable []int
	for i, c := range h.cols {
		if !slices.Contains([]string{"id", "tag", "cat", "ts"}, c.name) {
			droppable = append(droppable, i)
		}
	}
	if len(droppable) <= 2 {
		return "no schema change"
	}
	i := droppable[h.rnd.IntN(len(droppable))]
	name := h.cols[i].name
	h.w.exec(`ALTER TABLE h_src DROP COLUMN ` + name)
	h.cols = slices.Delete(h.cols, i, i+1)
	h.stats["columns dropped"]++
	return "drop column " + name
}

func (h *history) evolvePartitioning() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.part = (h.part + 1 + h.rnd.IntN(len(hpartitions)-1)) % len(hpartitions)
	h.stats["partition evolutions"]++
	return fmt.Sprintf("srp partitioned %v", hpartitions[h.part].Fields)
}

func (h *history) upgrade() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range []string{"srp", "sr", "an"} {
		if h.versions[id] == 2 {
			h.versions[id] = 3
			h.stats["v3 upgrades"]++
			return id + " to v3"
		}
	}
	return "no upgrade"
}

// schema is the source's columns as writestrategy declares them.
func (h *history) schema() writestrategy.Schema {
	var s writestrategy.Schema
	for _, c := range h.cols {
		s.Columns = append(s.Columns, writestrategy.Column{Name: c.name, Type: hkindType[c.kind]})
	}
	return s
}

// publish writes the source's current rows to the row-store dataset src.
func (h *history) publish() {
	s := h.schema()
	seedRowStore(h.t, h.w.pool, "src", s, typedSelect(s, "h_src"))
}

func hdeploy(out string) writestrategy.Deploy {
	switch out {
	case "an", "pg_an":
		return writestrategy.Deploy{Mode: writestrategy.KindAppendNew, Source: "src", Target: out, Key: []string{"tag"}}
	}
	return writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "src", Target: out, Key: []string{"id"}}
}

// write writes one output and checks what it can of the write itself.
func (h *history) write(out, msg string) writestrategy.WriteResult {
	res, err := h.w.d.Write(h.ctx, writestrategy.Request{WriterID: writer, Strategy: hdeploy(out)})
	require.NoError(h.t, err, "%s: write %s", msg, out)
	require.Len(h.t, res, 1)
	r := res[0]
	if warns := h.warnings.take(); len(warns) > 0 {
		h.t.Fatalf("%s: write %s logged %q", msg, out, warns)
	}
	if r.Sink == sink.Iceberg {
		h.stats["iceberg writes"]++
		if m := r.Maintenance; m != nil {
			h.stats["maintenance runs"]++
			h.stats["snapshots expired"] += m.SnapshotsExpired
			h.stats["files compacted"] += m.CompactedFiles
			h.stats["files deleted"] += m.FilesDeleted
		}
		if r.Preserved > 0 {
			sum := writeSummary(h.t, h.w, r)
			if summaryInt(h.t, sum, "deleted-data-files") > 0 {
				h.stats["copy-on-write merges"]++
			} else {
				h.stats["merge-on-read merges"]++
			}
		}
	}
	return r
}

// writeAll publishes the source and writes every output, then checks each.
func (h *history) writeAll(msg string) {
	h.publish()
	results := map[string]writestrategy.WriteResult{}
	for _, out := range []string{"sr", "srp", "an", "pg_sr", "pg_an"} {
		results[out] = h.write(out, msg)
	}
	src := h.schema()
	want := sortedText(h.w.sourceText(src, `SELECT * FROM h_src`))
	for _, out := range hreplaces {
		require.Equal(h.t, want, sortedText(h.w.datasetText(src, out)), "%s: %s holds the source's rows", msg, out)
	}
	anCols := writestrategy.ResultColumns(results["pg_an"])
	require.Equal(h.t, sortedText(h.w.datasetText(anCols, "pg_an")), sortedText(h.w.datasetText(anCols, "an")), "%s: an holds the rows of pg_an", msg)
	// Verify compares a replace with a fresh compute (an append output
	// accumulates its writes, so it is compared with pg_an instead).
	for _, out := range hreplaces {
		ps, err := h.w.d.Verify(h.ctx, writestrategy.Request{WriterID: writer, Strategy: hdeploy(out)})
		require.NoError(h.t, err, "%s: verify %s", msg, out)
		require.True(h.t, ps[0].OK(), "%s: verify %s: %s", msg, out, ps[0])
	}
	pgSum := h.w.checksum("pg_sr")
	require.Equal(h.t, pgSum, h.w.checksum("sr"), "%s: checksum of sr", msg)
	require.Equal(h.t, pgSum, h.w.checksum("srp"), "%s: checksum of srp", msg)
	require.Equal(h.t, h.w.checksum("pg_an"), h.w.checksum("an"), "%s: checksum of an", msg)
	for _, out := range []string{"sr", "srp", "an"} {
		if results[out].Sink == sink.Iceberg {
			h.checkFiles(out, msg)
		}
	}
}

// checkFiles reads the current snapshot of out's table from its files,
// compares it with the facade's Scan, bounds the snapshots kept, and
// keeps the loaded table as a reader of that snapshot.
func (h *history) checkFiles(out, msg string) {
	tbl, err := h.f.LoadTable(h.ctx, out)
	require.NoError(h.t, err)
	snap := tbl.CurrentSnapshot()
	require.NotNil(h.t, snap)
	sch := snapshotSchema(tbl, snap)
	files, err := fileRows(h.ctx, tbl, snap.SnapshotID)
	require.NoError(h.t, err, "%s: %s read from its files", msg, out)
	scan, err := scanRows(h.ctx, h.f, out, snap.SnapshotID, sch)
	require.NoError(h.t, err, "%s: scan %s", msg, out)
	require.Equal(h.t, scan, files, "%s: %s read from its data and delete files equals its Scan", msg, out)
	n := len(tbl.Metadata().Snapshots())
	require.LessOrEqual(h.t, n, h.life.KeepLast+h.life.EveryCommits+2, "%s: %s keeps %d snapshots", msg, out, n)
	h.readers = append(h.readers, oldReader{id: out, tbl: tbl, snap: snap.SnapshotID, at: time.Now(), rows: files, loaded: msg})
	if len(h.readers) > 12 {
		h.readers = h.readers[len(h.readers)-12:]
	}
}

// burst writes srp several times in a row, one small change each, so
// expiries come faster than the grace, each write's snapshot loaded by a
// reader.
func (h *history) burst(msg string) {
	for i := range 3 + h.rnd.IntN(3) {
		ids := h.ids()
		h.update(ids[h.rnd.IntN(len(ids))])
		h.publish()
		m := fmt.Sprintf("%s burst write %d", msg, i)
		h.write("srp", m)
		h.checkFiles("srp", m)
		h.readOld(m)
	}
}

// readOld reads, from their files, the snapshots readers loaded less than
// the grace ago (less a margin for the read itself): each must read as it
// did, expired or not.
func (h *history) readOld(msg string) {
	margin := time.Second
	kept := h.readers[:0]
	for _, r := range h.readers {
		if time.Since(r.at) >= h.life.FileGrace-margin {
			continue
		}
		rows, err := fileRows(h.ctx, r.tbl, r.snap)
		require.NoError(h.t, err, "%s: reader of %s snapshot %d loaded at %s (%v ago, grace %v)", msg, r.id, r.snap, r.loaded, time.Since(r.at), h.life.FileGrace)
		require.Equal(h.t, r.rows, rows, "%s: reader of %s snapshot %d loaded at %s", msg, r.id, r.snap, r.loaded)
		h.stats["old snapshot reads"]++
		kept = append(kept, r)
	}
	h.readers = kept
}

// maintainWithReaders runs Dispatcher.Maintain on every Iceberg output
// while the readers read their snapshots.
func (h *history) maintainWithReaders(msg string) {
	var ids []string
	for _, id := range []string{"sr", "srp", "an"} {
		if id == "srp" || h.onIceberg[id] {
			ids = append(ids, id)
		}
	}
	errs := make([]error, len(ids))
	reps := make([]facade.MaintenanceReport, len(ids))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i, id := range ids {
			reps[i], errs[i] = h.w.d.Maintain(h.ctx, writer, id)
		}
	}()
	h.readOld(msg + " during maintenance")
	wg.Wait()
	for i, id := range ids {
		require.NoError(h.t, errs[i], "%s: maintain %s", msg, id)
		h.stats["explicit maintenance runs"]++
		h.stats["snapshots expired"] += reps[i].SnapshotsExpired
		h.stats["files compacted"] += reps[i].CompactedFiles
		h.stats["files deleted"] += reps[i].FilesDeleted
	}
	for _, id := range ids {
		h.checkFiles(id, msg+" after maintenance")
	}
}
