package changelog_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/incremental/changelog"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/internal/trackoverhead"
)

func TestMain(m *testing.M) { pgtest.MainWithDatabase(m, "DATABASE_URL") }

// image is one change log entry as a test reads it.
type image struct {
	Op  string
	Row map[string]any
}

func (i image) String() string { b, _ := json.Marshal(i.Row); return i.Op + string(b) }

// read reads the window of source since in a REPEATABLE READ transaction,
// with its images (sorted by their text).
func read(t *testing.T, db changelog.DB, l *changelog.Log, source string, since changelog.Position) (changelog.Window, []string) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`)
	require.NoError(t, err)
	w, err := l.Window(ctx, tx, source, since)
	require.NoError(t, err)
	var got []string
	if w.Known {
		rows, err := tx.Query(ctx, w.SQL, w.Args...)
		require.NoError(t, err)
		for rows.Next() {
			var op string
			var row map[string]any
			require.NoError(t, rows.Scan(&op, &row))
			got = append(got, image{op, row}.String())
		}
		require.NoError(t, rows.Err())
		require.Len(t, got, int(w.Images), "Images counts the rows of SQL")
	}
	require.NoError(t, tx.Commit(ctx))
	slices.Sort(got)
	return w, got
}

func setup(t *testing.T) (*pgxpool.Pool, *changelog.Log) {
	t.Helper()
	pool := pgtest.Pool(t)
	_, err := pool.Exec(context.Background(), `CREATE SCHEMA app;
		CREATE TABLE app."Orders" (id int PRIMARY KEY, k text, v int)`)
	require.NoError(t, err)
	return pool, changelog.New("")
}

func exec(t *testing.T, db changelog.Querier, sql string, args ...any) {
	t.Helper()
	_, err := db.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

// A transaction in flight at a read is in the next window, exactly once;
// nothing is skipped or repeated across successive windows.
func TestWindowNeitherSkipsNorRepeats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, l := setup(t)
	require.NoError(t, l.Track(ctx, pool, "orders", `app."Orders"`, []string{"id", "k"}))

	w0, _ := read(t, pool, l, "orders", "")
	require.False(t, w0.Known)
	require.Equal(t, changelog.ReasonNoPosition, w0.Reason)

	exec(t, pool, `INSERT INTO app."Orders" VALUES (1, 'a', 10), (2, 'b', 20)`)
	inflight, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = inflight.Rollback(ctx) }()
	exec(t, inflight, `INSERT INTO app."Orders" VALUES (3, 'c', 30)`)

	w1, got := read(t, pool, l, "orders", w0.Position)
	require.True(t, w1.Known, w1.Reason)
	require.Equal(t, []string{`I{"id":1,"k":"a"}`, `I{"id":2,"k":"b"}`}, got)

	require.NoError(t, inflight.Commit(ctx))
	exec(t, pool, `INSERT INTO app."Orders" VALUES (4, 'd', 40)`)

	w2, got := read(t, pool, l, "orders", w1.Position)
	require.True(t, w2.Known, w2.Reason)
	require.Equal(t, []string{`I{"id":3,"k":"c"}`, `I{"id":4,"k":"d"}`}, got, "the in-flight insert appears once, in the window after its commit")

	w3, got := read(t, pool, l, "orders", w2.Position)
	require.True(t, w3.Known)
	require.Empty(t, got)
	require.Zero(t, w3.Images)

	// The same window read twice is the same (a retry of a failed run).
	_, again := read(t, pool, l, "orders", w1.Position)
	require.Equal(t, []string{`I{"id":3,"k":"c"}`, `I{"id":4,"k":"d"}`}, again)
	// "pg:" prefixed positions read the same.
	_, again = read(t, pool, l, "orders", "pg:"+w1.Position)
	require.Equal(t, []string{`I{"id":3,"k":"c"}`, `I{"id":4,"k":"d"}`}, again)
}

func TestUpdateAndDeleteImages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, l := setup(t)
	exec(t, pool, `INSERT INTO app."Orders" VALUES (1, 'a', 10), (2, 'b', 20), (3, NULL, 30)`)
	require.NoError(t, l.Track(ctx, pool, "orders", `app."Orders"`, []string{"k", "v"}))
	w0, _ := read(t, pool, l, "orders", "")

	exec(t, pool, `UPDATE app."Orders" SET k = 'z' WHERE id = 1`)
	exec(t, pool, `UPDATE app."Orders" SET v = 31 WHERE id = 3`)
	exec(t, pool, `DELETE FROM app."Orders" WHERE id = 2`)
	w1, got := read(t, pool, l, "orders", w0.Position)
	require.True(t, w1.Known, w1.Reason)
	require.Equal(t, []string{
		`D{"k":"a","v":10}`, `D{"k":"b","v":20}`, `D{"k":null,"v":30}`,
		`I{"k":"z","v":10}`, `I{"k":null,"v":31}`,
	}, got)

	// A statement that changes no row records nothing.
	exec(t, pool, `DELETE FROM app."Orders" WHERE id = 99`)
	w2, got := read(t, pool, l, "orders", w1.Position)
	require.True(t, w2.Known)
	require.Empty(t, got)
}

func TestTruncateMakesTheWindowUnknown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, l := setup(t)
	require.NoError(t, l.Track(ctx, pool, "orders", `app."Orders"`, []string{"id"}))
	w0, _ := read(t, pool, l, "orders", "")
	exec(t, pool, `INSERT INTO app."Orders" VALUES (1, 'a', 10)`)
	exec(t, pool, `TRUNCATE app."Orders"`)
	w1, _ := read(t, pool, l, "orders", w0.Position)
	require.False(t, w1.Known)
	require.Equal(t, changelog.ReasonFull, w1.Reason)
	require.NotEmpty(t, w1.Position)
	w2, _ := read(t, pool, l, "orders", w1.Position)
	require.True(t, w2.Known, "the window after it is known again")
}

// A rewrite of a tracked table changes its rows without firing a
// trigger (ALTER COLUMN ... TYPE ... USING, and VACUUM FULL or CLUSTER,
// which change nothing but cannot be told apart): the window across it is
// unknown. So is one from a position without the table's file node (one
// stored by an earlier version).
func TestRewriteMakesTheWindowUnknown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, l := setup(t)
	require.NoError(t, l.Track(ctx, pool, "orders", `app."Orders"`, []string{"id"}))
	exec(t, pool, `INSERT INTO app."Orders" VALUES (1, 'a', 10)`)
	w0, _ := read(t, pool, l, "orders", "")
	require.Contains(t, string(w0.Position), "@", "a tracked table's position holds its file node")
	for _, rewrite := range []string{
		`ALTER TABLE app."Orders" ALTER COLUMN v TYPE integer USING v * 2`,
		`VACUUM FULL app."Orders"`,
	} {
		exec(t, pool, rewrite)
		w1, _ := read(t, pool, l, "orders", w0.Position)
		require.False(t, w1.Known, rewrite)
		require.Equal(t, changelog.ReasonRewritten, w1.Reason, rewrite)
		w2, got := read(t, pool, l, "orders", w1.Position)
		require.True(t, w2.Known, "the window after it is known again: %s", w2.Reason)
		require.Empty(t, got)
		w0 = w2
	}
	// An earlier version's position: no file node.
	snap, _, _ := strings.Cut(string(w0.Position), "@")
	w, _ := read(t, pool, l, "orders", changelog.Position(snap))
	require.Equal(t, changelog.ReasonRewritten, w.Reason)
	// A statement that does not rewrite the table keeps the window known.
	exec(t, pool, `ALTER TABLE app."Orders" ADD COLUMN note text`)
	exec(t, pool, `VACUUM app."Orders"`)
	w, _ = read(t, pool, l, "orders", w0.Position)
	require.True(t, w.Known, w.Reason)
}

// A tracked table's window names the columns its images hold; a reader
// needing another finds it Missing. A row-store source's images hold
// every column.
func TestWindowColumns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, l := setup(t)
	require.NoError(t, l.Track(ctx, pool, "orders", `app."Orders"`, []string{"id", "k"}))
	w0, _ := read(t, pool, l, "orders", "")
	exec(t, pool, `INSERT INTO app."Orders" VALUES (1, 'a', 10)`)
	w, _ := read(t, pool, l, "orders", w0.Position)
	require.True(t, w.Known, w.Reason)
	require.Equal(t, []string{"id", "k"}, w.Columns)
	require.Empty(t, w.Missing([]string{"k", "id"}))
	require.Equal(t, []string{"v"}, w.Missing([]string{"id", "v"}))
	require.Empty(t, changelog.Window{}.Missing([]string{"anything"}), "a row-store window")
}

// Writes made while the tracking triggers were disabled are not recorded:
// the window across a DISABLE and ENABLE TRIGGER is unknown, the next one
// known again. Writes in replica mode (a logical replication subscriber, a
// bulk load skipping foreign key checks) are recorded: Track, run by the
// table's owner, makes the triggers fire always.
func TestDisabledTriggersMakeTheWindowUnknown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, l := setup(t)
	require.NoError(t, l.Track(ctx, pool, "orders", `app."Orders"`, []string{"id"}))
	w0, _ := read(t, pool, l, "orders", "")
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET session_replication_role = replica`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `INSERT INTO app."Orders" VALUES (3, 'c', 30)`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `RESET session_replication_role`)
	require.NoError(t, err)
	w1, got := read(t, pool, l, "orders", w0.Position)
	require.True(t, w1.Known, w1.Reason)
	require.Equal(t, []string{`I{"id":3}`}, got, "a write in replica mode is recorded")

	exec(t, pool, `ALTER TABLE app."Orders" DISABLE TRIGGER USER`)
	exec(t, pool, `INSERT INTO app."Orders" VALUES (1, 'a', 10)`)
	exec(t, pool, `ALTER TABLE app."Orders" ENABLE TRIGGER USER`)
	w2, _ := read(t, pool, l, "orders", w1.Position)
	require.False(t, w2.Known)
	require.Equal(t, changelog.ReasonAltered, w2.Reason)
	exec(t, pool, `INSERT INTO app."Orders" VALUES (2, 'b', 20)`)
	w3, got := read(t, pool, l, "orders", w2.Position)
	require.True(t, w3.Known, w3.Reason)
	require.Equal(t, []string{`I{"id":2}`}, got)
}

// Trim with Sources trims those only; a Trim without an age bound records
// no mark (the marks would pile up with each such Trim).
func TestTrimSources(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, l := setup(t)
	exec(t, pool, `CREATE TABLE app.other (id int PRIMARY KEY)`)
	require.NoError(t, l.Track(ctx, pool, "orders", `app."Orders"`, []string{"id"}))
	require.NoError(t, l.Track(ctx, pool, "other", `app.other`, []string{"id"}))
	exec(t, pool, `INSERT INTO app."Orders" VALUES (1, 'a', 1)`)
	exec(t, pool, `INSERT INTO app.other VALUES (1)`)
	count := func(src string) (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.change_log WHERE source = $1`, src).Scan(&n))
		return n
	}
	var marks int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.change_log_marks`).Scan(&marks))
	require.Eventually(t, func() bool {
		// A position taken now (the cluster's oldest running transaction,
		// which parallel tests hold back, bounds what it has read).
		now, _ := read(t, pool, l, "orders", "")
		for _, src := range []string{"orders", "other"} {
			require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				return l.SavePosition(ctx, tx, "out", src, "pg:"+string(now.Position))
			}))
		}
		_, err := l.Trim(ctx, pool, changelog.TrimOptions{MaxAge: -1, Sources: []string{"orders"}})
		require.NoError(t, err)
		return count("orders") == 0
	}, time.Minute, 50*time.Millisecond)
	require.Equal(t, 1, count("other"), "a source not named is left as it is")
	var after int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.change_log_marks`).Scan(&after))
	require.Equal(t, marks, after, "no mark recorded")
}

func TestTrackingAfterThePositionIsUnknown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, l := setup(t)
	before, _ := read(t, pool, l, "orders", "")
	w, _ := read(t, pool, l, "orders", before.Position)
	require.Equal(t, changelog.ReasonNotTracked, w.Reason)

	require.NoError(t, l.Track(ctx, pool, "orders", `app."Orders"`, []string{"id"}))
	w, _ = read(t, pool, l, "orders", before.Position)
	require.False(t, w.Known)
	require.Equal(t, changelog.ReasonInstalled, w.Reason)

	after, _ := read(t, pool, l, "orders", "")
	// The same columns again: nothing changes.
	require.NoError(t, l.Track(ctx, pool, "orders", `app."Orders"`, []string{"id"}))
	w, _ = read(t, pool, l, "orders", after.Position)
	require.True(t, w.Known, w.Reason)

	// Other columns: a new installation, the position predates it.
	require.NoError(t, l.Track(ctx, pool, "orders", `app."Orders"`, []string{"id", "k"}))
	w, _ = read(t, pool, l, "orders", after.Position)
	require.Equal(t, changelog.ReasonInstalled, w.Reason)
	exec(t, pool, `INSERT INTO app."Orders" VALUES (1, 'a', 10)`)
	w2, got := read(t, pool, l, "orders", w.Position)
	require.True(t, w2.Known)
	require.Equal(t, []string{`I{"id":1,"k":"a"}`}, got, "one set of triggers records, with the new columns")

	require.NoError(t, l.Untrack(ctx, pool, "orders"))
	exec(t, pool, `INSERT INTO app."Orders" VALUES (2, 'b', 20)`)
	w3, _ := read(t, pool, l, "orders", w2.Position)
	require.Equal(t, changelog.ReasonNotTracked, w3.Reason)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.change_log`).Scan(&n))
	require.Zero(t, n, "untracked: no trigger records, the entries are gone")
	require.NoError(t, l.Untrack(ctx, pool, "orders"), "untracking twice is fine")
}

// An ALTER TABLE of the tracked table never makes the user's writes fail;
// the window after a tracked column changed is unknown.
func TestAlterTableKeepsWritesWorking(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, l := setup(t)
	require.NoError(t, l.Track(ctx, pool, "orders", `app."Orders"`, []string{"id", "k", "v"}))
	w0, _ := read(t, pool, l, "orders", "")
	exec(t, pool, `ALTER TABLE app."Orders" ADD COLUMN extra text`)
	exec(t, pool, `INSERT INTO app."Orders" VALUES (1, 'a', 10, 'x')`)
	w1, got := read(t, pool, l, "orders", w0.Position)
	require.True(t, w1.Known, "adding a column changes no tracked column")
	require.Equal(t, []string{`I{"id":1,"k":"a","v":10}`}, got)

	exec(t, pool, `ALTER TABLE app."Orders" DROP COLUMN v`)
	exec(t, pool, `INSERT INTO app."Orders" VALUES (2, 'b')`)
	exec(t, pool, `UPDATE app."Orders" SET k = 'bb' WHERE id = 2`)
	exec(t, pool, `ALTER TABLE app."Orders" RENAME COLUMN k TO kk`)
	exec(t, pool, `UPDATE app."Orders" SET kk = 'c' WHERE id = 2`)
	exec(t, pool, `ALTER TABLE app."Orders" ALTER COLUMN id TYPE bigint`)
	exec(t, pool, `DELETE FROM app."Orders"`)
	exec(t, pool, `INSERT INTO app."Orders" VALUES (3, 'c')`)
	w2, _ := read(t, pool, l, "orders", w1.Position)
	require.False(t, w2.Known)
	require.Equal(t, changelog.ReasonAltered, w2.Reason)

	// Tracking again with the columns the table has now is known after it.
	require.NoError(t, l.Track(ctx, pool, "orders", `app."Orders"`, []string{"id", "kk"}))
	w3, _ := read(t, pool, l, "orders", "")
	exec(t, pool, `UPDATE app."Orders" SET kk = 'd'`)
	_, got = read(t, pool, l, "orders", w3.Position)
	require.Equal(t, []string{`D{"id":3,"kk":"c"}`, `I{"id":3,"kk":"d"}`}, got)
}

func TestTrackBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, l := setup(t)
	exec(t, pool, `CREATE VIEW app.v AS SELECT * FROM app."Orders";
		CREATE TABLE app.p (id int) PARTITION BY RANGE (id)`)
	for _, c := range []struct {
		source, table string
		cols          []string
	}{
		{"", `app."Orders"`, []string{"id"}},
		{"s", `app."Orders"`, nil},
		{"s", `app."Orders"`, []string{"id", "id"}},
		{"s", `app."Orders"`, []string{"nope"}},
		{"s", `app.nope`, []string{"id"}},
		{"s", `app.v`, []string{"id"}},
		{"s", `app.p`, []string{"id"}},
	} {
		require.ErrorIs(t, l.Track(ctx, pool, c.source, c.table, c.cols), changelog.ErrInvalid, "%+v", c)
	}
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.change_sources`).Scan(&n))
	require.Zero(t, n)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = l.Window(ctx, tx, "s", "")
	require.ErrorIs(t, err, changelog.ErrNotRepeatableRead)
	require.NoError(t, tx.Rollback(ctx))

	tx, err = pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = l.Window(ctx, tx, "s", "12:10:")
	require.ErrorIs(t, err, changelog.ErrInvalid)
	require.ErrorIs(t, l.SavePosition(ctx, tx, "out", "s", ""), changelog.ErrInvalid)
}

// A source id that needs quoting everywhere, a table in a schema that
// does too, a column with a quote in its name.
func TestTrackQuotes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	exec(t, pool, `CREATE SCHEMA "My Schema"; CREATE TABLE "My Schema"."a""b" ("it's" int, "x\y" text)`)
	l := changelog.New("")
	src := `o'$lw$\src`
	require.NoError(t, l.Track(ctx, pool, src, `"My Schema"."a""b"`, []string{"it's", `x\y`}))
	w0, _ := read(t, pool, l, src, "")
	exec(t, pool, `INSERT INTO "My Schema"."a""b" VALUES (1, 'q''\')`)
	_, got := read(t, pool, l, src, w0.Position)
	require.Equal(t, []string{`I{"it's":1,"x\\y":"q'\\"}`}, got)
}

func TestRowStoreRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	l := changelog.New("")
	w0, _ := read(t, pool, l, "daily", "")
	require.NoError(t, l.RegisterSource(ctx, pool, "daily"))
	w1, _ := read(t, pool, l, "daily", w0.Position)
	require.Equal(t, changelog.ReasonInstalled, w1.Reason)
	require.NoError(t, l.RegisterSource(ctx, pool, "daily"), "registering again keeps the installation")
	w2, _ := read(t, pool, l, "daily", w1.Position)
	require.True(t, w2.Known, w2.Reason)

	exec(t, pool, `INSERT INTO `+l.Table()+` (source, op, image) VALUES ('daily', 'I', '{"day": "2026-01-02", "n": 3}'), ('daily', 'D', '{"day": "2026-01-01", "n": 2}')`)
	w3, got := read(t, pool, l, "daily", w2.Position)
	require.True(t, w3.Known)
	require.Equal(t, []string{`D{"day":"2026-01-01","n":2}`, `I{"day":"2026-01-02","n":3}`}, got)
	exec(t, pool, `INSERT INTO `+l.Table()+` (source, op) VALUES ('daily', 'F')`)
	w4, _ := read(t, pool, l, "daily", w3.Position)
	require.Equal(t, changelog.ReasonFull, w4.Reason)

	exec(t, pool, `CREATE TABLE t (id int)`)
	require.NoError(t, l.Track(ctx, pool, "rel", "t", []string{"id"}))
	require.ErrorIs(t, l.RegisterSource(ctx, pool, "rel"), changelog.ErrKind)
	require.ErrorIs(t, l.Track(ctx, pool, "daily", "t", []string{"id"}), changelog.ErrKind)
}

func TestPositions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	l := changelog.New("")
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := l.SavePosition(ctx, tx, "out", "a", "pg:1:1:"); err != nil {
			return err
		}
		return l.SavePosition(ctx, tx, "out", "b", "ice:42")
	}))
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return l.SavePosition(ctx, tx, "out", "a", "pg:5:5:")
	}))
	got, err := l.Positions(ctx, pool, "out")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a": "pg:5:5:", "b": "ice:42"}, got)
	got, err = l.Positions(ctx, pool, "other")
	require.NoError(t, err)
	require.Empty(t, got)

	// SavePositions: several in one statement, replacing what is stored.
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return l.SavePositions(ctx, tx, "out", map[string]string{"b": "ice:43", "c": "pg:7:7:", "\x01txn": "t1"})
	}))
	got, err = l.Positions(ctx, pool, "out")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a": "pg:5:5:", "b": "ice:43", "c": "pg:7:7:", "\x01txn": "t1"}, got)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return l.SavePositions(ctx, tx, "out", nil) }))
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return l.SavePositions(ctx, tx, "out", map[string]string{"a": "pg:9:9:", "d": ""})
	})
	require.ErrorIs(t, err, changelog.ErrInvalid)
	got, err = l.Positions(ctx, pool, "out")
	require.NoError(t, err)
	require.Equal(t, "pg:5:5:", got["a"], "a refused call stores nothing")
}

// Writers run while windows are read: every row is in exactly one window.
func TestConcurrentWritersDuringWindows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, l := setup(t)
	require.NoError(t, l.Track(ctx, pool, "orders", `app."Orders"`, []string{"id"}))
	w, _ := read(t, pool, l, "orders", "")
	const writers, per = 4, 50
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				id := g*per + i
				// Some transactions write several statements, some stay open a while.
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					if _, err := tx.Exec(ctx, `INSERT INTO app."Orders" VALUES ($1, 'x', 0)`, id); err != nil {
						return err
					}
					_, err := tx.Exec(ctx, `UPDATE app."Orders" SET v = v + 1 WHERE id = $1`, id)
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	seen := map[string]int{}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		next, got := read(t, pool, l, "orders", w.Position)
		require.True(t, next.Known, next.Reason)
		for _, g := range got {
			seen[g]++
		}
		w = next
	}
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	// Everything committed before the last read (after the writers ended).
	require.Len(t, seen, writers*per*2, "an I for the insert and a D for the update's old image (identical I images counted below)")
	for g, n := range seen {
		want := 1
		if g[0] == 'I' {
			want = 2 // the insert's image and the update's new image are equal
		}
		require.Equal(t, want, n, "image %s", g)
	}
}

// Trim keeps what a consumer needs; a bounded trim past a consumer makes
// its next window unknown.
func TestTrim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, l := setup(t)
	require.NoError(t, l.Track(ctx, pool, "orders", `app."Orders"`, []string{"id"}))
	save := func(output string, p changelog.Position) {
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return l.SavePosition(ctx, tx, output, "orders", "pg:"+string(p))
		}))
	}
	w0, _ := read(t, pool, l, "orders", "")
	save("slow", w0.Position)
	for i := range 3 {
		exec(t, pool, `INSERT INTO app."Orders" VALUES ($1, 'x', 0)`, i)
	}
	w1, _ := read(t, pool, l, "orders", w0.Position)
	save("fast", w1.Position)
	for i := 3; i < 6; i++ {
		exec(t, pool, `INSERT INTO app."Orders" VALUES ($1, 'x', 0)`, i)
	}
	_, slowWant := read(t, pool, l, "orders", w0.Position)
	_, fastWant := read(t, pool, l, "orders", w1.Position)
	require.Len(t, slowWant, 6)
	require.Len(t, fastWant, 3)

	// A consumer storing a word before its position (a model: its run's
	// transaction id) is a consumer too.
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return l.SavePosition(ctx, tx, "model", "orders", "txn-1 "+string(w0.Position))
	}))
	save("slow", w1.Position)
	rep, err := l.Trim(ctx, pool, changelog.TrimOptions{MaxAge: -1, BatchSize: 2})
	require.NoError(t, err)
	for _, s := range rep.Sources {
		require.Empty(t, s.Behind)
	}
	_, got := read(t, pool, l, "orders", w0.Position)
	require.Equal(t, slowWant, got, "what the model needs is kept")
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM lakewrite.refresh_positions WHERE dataset_id = 'model'`)
		return err
	}))
	save("slow", w0.Position)

	// Unbounded: nothing "slow" needs goes.
	rep, err = l.Trim(ctx, pool, changelog.TrimOptions{MaxAge: -1, BatchSize: 2})
	require.NoError(t, err)
	for _, s := range rep.Sources {
		require.Empty(t, s.Behind)
	}
	_, got = read(t, pool, l, "orders", w0.Position)
	require.Equal(t, slowWant, got)
	_, got = read(t, pool, l, "orders", w1.Position)
	require.Equal(t, fastWant, got)

	// "slow" catches up: the entries only it needed go.
	save("slow", w1.Position)
	// (How many depends on the cluster's oldest running transaction,
	// which the parallel tests hold back: at most the 3.)
	rep, err = l.Trim(ctx, pool, changelog.TrimOptions{MaxAge: -1, BatchSize: 2})
	require.NoError(t, err)
	require.LessOrEqual(t, rep.Deleted, int64(3))
	_, got = read(t, pool, l, "orders", w1.Position)
	require.Equal(t, fastWant, got)

	// Bounded to 2 rows: the consumers are behind, their windows unknown.
	rep, err = l.Trim(ctx, pool, changelog.TrimOptions{MaxAge: -1, MaxRows: 2, BatchSize: 2})
	require.NoError(t, err)
	require.Len(t, rep.Sources, 1)
	require.ElementsMatch(t, []string{"fast", "slow"}, rep.Sources[0].Behind)
	w, _ := read(t, pool, l, "orders", w1.Position)
	require.Equal(t, changelog.ReasonTrimmed, w.Reason)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.change_log`).Scan(&n))
	require.Equal(t, 2, n)

	// A position taken now is known after the trim.
	now, _ := read(t, pool, l, "orders", "")
	exec(t, pool, `DELETE FROM app."Orders" WHERE id = 5`)
	w, got = read(t, pool, l, "orders", now.Position)
	require.True(t, w.Known, w.Reason)
	require.Equal(t, []string{`D{"id":5}`}, got)

	// Entries of a source no longer registered go.
	exec(t, pool, `INSERT INTO lakewrite.change_log (source, op) VALUES ('gone', 'F')`)
	rep, err = l.Trim(ctx, pool, changelog.TrimOptions{MaxAge: -1})
	require.NoError(t, err)
	require.Contains(t, fmt.Sprint(rep.Sources), "gone")
}

// Tracking needs the TRIGGER privilege on the table; the table's writers
// need no right on the control-plane schema.
func TestTrackWithTriggerPrivilegeOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, l := setup(t)
	suffix := fmt.Sprint(pool.Config().ConnConfig.Database)
	tracker, writer := "tracker_"+suffix, "writer_"+suffix
	exec(t, pool, fmt.Sprintf(`CREATE ROLE %[1]s; CREATE ROLE %[2]s;
		GRANT USAGE, CREATE ON SCHEMA lakewrite TO %[1]s;
		GRANT SELECT, INSERT, UPDATE, DELETE ON lakewrite.change_sources, lakewrite.change_log TO %[1]s;
		GRANT USAGE ON SCHEMA app TO %[1]s, %[2]s;
		GRANT TRIGGER ON app."Orders" TO %[1]s;
		GRANT SELECT, INSERT, UPDATE, DELETE ON app."Orders" TO %[2]s`, tracker, writer))
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), fmt.Sprintf(`DROP OWNED BY %[1]s, %[2]s CASCADE; DROP ROLE %[1]s; DROP ROLE %[2]s`, tracker, writer))
	})
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	exec(t, conn, `SET ROLE `+tracker)
	require.NoError(t, l.Track(ctx, conn, "orders", `app."Orders"`, []string{"id"}))
	w0, _ := read(t, conn, l, "orders", "")
	exec(t, conn, `SET ROLE `+writer)
	exec(t, conn, `INSERT INTO app."Orders" VALUES (1, 'a', 1)`)
	exec(t, conn, `UPDATE app."Orders" SET v = 2`)
	exec(t, conn, `DELETE FROM app."Orders"`)
	exec(t, conn, `RESET ROLE`)
	_, got := read(t, conn, l, "orders", w0.Position)
	require.Equal(t, []string{`D{"id":1}`, `D{"id":1}`, `I{"id":1}`, `I{"id":1}`}, got)
	exec(t, conn, `SET ROLE `+tracker)
	require.NoError(t, l.Track(ctx, conn, "orders", `app."Orders"`, []string{"id", "k"}), "re-tracking too")
	require.NoError(t, l.Untrack(ctx, conn, "orders"))
	exec(t, conn, `RESET ROLE`)
}

// BenchmarkTrackingOverhead reports what tracking costs writes: tracked /
// untracked time of the same inserts and updates (metrics insert_ratio and
// update_ratio), in statements of 1,000 rows and of 1 row (sent 1,000
// statements a round trip, and each on its own round trip and in its own
// transaction), and what the least a trigger can do costs them
// (floor_insert_ratio, floor_update_ratio: one log entry per row, nothing
// else). Run it with
//
//	go test -run '^$' -bench TrackingOverhead -benchtime 1x ./incremental/changelog/
//
// and -trackoverhead.rows to change the 100,000 rows.
func BenchmarkTrackingOverhead(b *testing.B) {
	for _, c := range []struct{ per, perRoundTrip int }{{1000, 1000}, {1, 1000}, {1, 1}} {
		b.Run(fmt.Sprintf("rows_per_statement=%d/statements_per_round_trip=%d", c.per, c.perRoundTrip), func(b *testing.B) {
			pool := pgtest.Pool(b)
			for b.Loop() {
				res, err := trackoverhead.Measure(context.Background(), pool, changelog.New(""),
					trackoverhead.Options{Rows: *overheadRows, RowsPerStatement: c.per, StatementsPerRoundTrip: c.perRoundTrip, Floor: true})
				require.NoError(b, err)
				b.ReportMetric(res.InsertRatio(), "insert_ratio")
				b.ReportMetric(res.UpdateRatio(), "update_ratio")
				b.ReportMetric(res.FloorInsertRatio(), "floor_insert_ratio")
				b.ReportMetric(res.FloorUpdateRatio(), "floor_update_ratio")
				b.Log(res, "insert", res.InsertUntracked, res.InsertTracked, res.InsertFloor, "update", res.UpdateUntracked, res.UpdateTracked, res.UpdateFloor)
			}
		})
	}
}

var overheadRows = flag.Int("trackoverhead.rows", 100_000, "rows inserted and updated by BenchmarkTrackingOverhead")

// Images read back equal to_jsonb of each value, whatever its type and the
// writer's session settings, across entries of many rows.
func TestImagesRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	exec(t, pool, `CREATE TYPE mood AS ENUM ('sad', 'ok');
		CREATE TABLE r (id int PRIMARY KEY, ts timestamptz, d date, n numeric(12,3), f float8, b bytea,
			s text, iv interval, j jsonb, a int[], m mood, bo boolean, u uuid)`)
	cols := []string{"id", "ts", "d", "n", "f", "b", "s", "iv", "j", "a", "m", "bo", "u"}
	l := changelog.New("")
	require.NoError(t, l.Track(ctx, pool, "r", "r", cols))
	w0, _ := read(t, pool, l, "r", "")
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	exec(t, conn, `SET DateStyle = 'SQL, DMY'; SET IntervalStyle = 'sql_standard'; SET extra_float_digits = -3;
		SET bytea_output = 'escape'; SET TimeZone = 'Asia/Kolkata'`)
	exec(t, conn, `INSERT INTO r SELECT g, '2026-03-04 05:06:07.123456+00'::timestamptz + g * interval '1 day',
			'2026-01-02'::date + g, g / 7.0, 0.1 * g + 1e-12, decode(md5(g::text), 'hex'), 'it''s "q" \ ' || g,
			make_interval(0, 1, 0, g, 2, 3, 4.5), jsonb_build_object('k', g, 'a', ARRAY[g]), ARRAY[g, NULL],
			CASE WHEN g % 2 = 0 THEN 'ok'::mood END, g % 3 = 0, md5(g::text)::uuid
		FROM generate_series(1, 2500) g`)
	exec(t, conn, `INSERT INTO r (id) VALUES (0)`)
	exec(t, conn, `RESET ALL`)
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	w, err := l.Window(ctx, tx, "r", w0.Position)
	require.NoError(t, err)
	require.True(t, w.Known)
	require.EqualValues(t, 2501, w.Images)
	var bad int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM (`+w.SQL+`) w FULL JOIN
		(SELECT jsonb_build_object('id', id, 'ts', ts, 'd', d, 'n', n, 'f', f, 'b', b, 's', s, 'iv', iv, 'j', j, 'a', a, 'm', m, 'bo', bo, 'u', u) AS image FROM r) r
		ON w.image = r.image WHERE w.image IS NULL OR r.image IS NULL OR w.op <> 'I'`, w.Args...).Scan(&bad))
	require.Zero(t, bad, "every image equals the row's to_jsonb values")

	// ValuesSQL: a few columns' values, read back as their types, equal
	// the rows'.
	vals := `SELECT (w.v1)::int, (w.v2)::timestamptz, (w.v3)::numeric(12,3), (w.v4)::float8, (w.v5)::uuid, (w.v6)::date, (w.v7)::mood, (w.v8)::bytea
		FROM (` + w.ValuesSQL([]string{"id", "ts", "n", "f", "u", "d", "m", "b"}) + `) w`
	rows := `SELECT id, ts, n, f, u, d, m, b FROM r`
	var missing, extra int
	require.NoError(t, tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM (`+rows+` EXCEPT ALL `+vals+`) a), (SELECT count(*) FROM (`+vals+` EXCEPT ALL `+rows+`) b)`,
		w.Args...).Scan(&missing, &extra))
	require.Zero(t, missing)
	require.Zero(t, extra)
}

// MaxAge: entries older than a mark recorded at least MaxAge ago go; a
// consumer still needing them reads the source whole.
func TestTrimMaxAge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, l := setup(t)
	require.NoError(t, l.Track(ctx, pool, "orders", `app."Orders"`, []string{"id"}))
	w0, _ := read(t, pool, l, "orders", "")
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return l.SavePosition(ctx, tx, "out", "orders", string(w0.Position))
	}))
	exec(t, pool, `INSERT INTO app."Orders" VALUES (1, 'a', 1)`)
	rep, err := l.Trim(ctx, pool, changelog.TrimOptions{MaxAge: time.Hour})
	require.NoError(t, err)
	require.Zero(t, rep.Deleted, "no mark is an hour old yet")
	// Age the mark instead of waiting an hour. (Its xid, the xmin of the
	// trim's snapshot, may be held back by the parallel tests' transactions:
	// set it to one above entry 1's.)
	exec(t, pool, `UPDATE lakewrite.change_log_marks SET at = at - interval '2 hours', xid = pg_current_xact_id()`)
	exec(t, pool, `INSERT INTO app."Orders" VALUES (2, 'b', 2)`)
	rep, err = l.Trim(ctx, pool, changelog.TrimOptions{MaxAge: time.Hour})
	require.NoError(t, err)
	require.EqualValues(t, 1, rep.Deleted, "the entry written before the aged mark")
	require.Equal(t, []string{"out"}, rep.Sources[0].Behind)
	w, _ := read(t, pool, l, "orders", w0.Position)
	require.Equal(t, changelog.ReasonTrimmed, w.Reason)
}

// Statements above the trigger's images-per-entry bound (shrunk here to
// 1,000) are recorded in several entries; inserts, updates and deletes read
// back as the rows' new and old images, exactly once each, and entries in
// the row-per-image form of triggers installed by earlier versions (op 'i'
// and 'd') are read alike.
func TestImagesAcrossEntriesAndForms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	exec(t, pool, `CREATE TABLE q (id int PRIMARY KEY, k text, other int)`)
	l := changelog.New("")
	changelog.SetCaptureChunk(l, 1000)
	require.NoError(t, l.Track(ctx, pool, "q", "q", []string{"id", "k"}))
	w0, _ := read(t, pool, l, "q", "")
	exec(t, pool, `INSERT INTO q SELECT g, 'k' || g, g FROM generate_series(1, 2500) g`)
	exec(t, pool, `UPDATE q SET k = k || 'x' WHERE id <= 1500`)
	exec(t, pool, `DELETE FROM q WHERE id > 2000`)
	exec(t, pool, `INSERT INTO q VALUES (3000, NULL, 1)`)
	exec(t, pool, `INSERT INTO lakewrite.change_log (source, op, vals) VALUES
		('q', 'i', ARRAY[ARRAY['9001', 'z'], ARRAY['9002', NULL]]), ('q', 'd', ARRAY[ARRAY['9003', 'y']])`)
	var entries []string
	rows, err := pool.Query(ctx, `SELECT op::text || array_length(vals, 2) FROM lakewrite.change_log WHERE source = 'q' AND op IN ('n', 'o') ORDER BY xid, op DESC, array_length(vals, 2) DESC`)
	require.NoError(t, err)
	entries, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"n1000", "n1000", "n500", "o1000", "o500", "n1000", "n500", "o500", "n1"}, entries)

	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	w, err := l.Window(ctx, tx, "q", w0.Position)
	require.NoError(t, err)
	require.True(t, w.Known)
	require.EqualValues(t, 2500+1500*2+500+1+3, w.Images)
	const want = `SELECT 'I'::"char" AS op, jsonb_build_object('id', g, 'k', 'k' || g) AS image FROM generate_series(1, 2500) g
		UNION ALL SELECT 'I', jsonb_build_object('id', g, 'k', 'k' || g || 'x') FROM generate_series(1, 1500) g
		UNION ALL SELECT 'D', jsonb_build_object('id', g, 'k', 'k' || g) FROM generate_series(1, 1500) g
		UNION ALL SELECT 'D', jsonb_build_object('id', g, 'k', 'k' || g) FROM generate_series(2001, 2500) g
		UNION ALL SELECT 'I', '{"id": 3000, "k": null}' UNION ALL SELECT 'I', '{"id": 9001, "k": "z"}'
		UNION ALL SELECT 'I', '{"id": 9002, "k": null}' UNION ALL SELECT 'D', '{"id": 9003, "k": "y"}'`
	var missing, extra int
	require.NoError(t, tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM (`+want+` EXCEPT ALL SELECT op, image FROM (`+w.SQL+`) w) a),
		(SELECT count(*) FROM (SELECT op, image FROM (`+w.SQL+`) w EXCEPT ALL SELECT op, image FROM (`+want+`) x) b)`, w.Args...).Scan(&missing, &extra))
	require.Zero(t, missing, "images not read")
	require.Zero(t, extra, "images read that were not written")

	var compression string
	require.NoError(t, pool.QueryRow(ctx, `SELECT attcompression::text FROM pg_catalog.pg_attribute
		WHERE attrelid = 'lakewrite.change_log'::regclass AND attname = 'vals'`).Scan(&compression))
	if _, err := pool.Exec(ctx, `SET LOCAL default_toast_compression = lz4`); err == nil {
		require.Equal(t, "l", compression, "a server with lz4 compresses the entries with it")
	}
}

// A statement of exactly the images-per-entry bound is one entry, one
// more row makes two, and a statement of no row records nothing; every
// image reads back once.
func TestCaptureChunkBoundaries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	exec(t, pool, `CREATE TABLE cb (id int PRIMARY KEY, k int)`)
	l := changelog.New("")
	changelog.SetCaptureChunk(l, 10)
	require.NoError(t, l.Track(ctx, pool, "cb", "cb", []string{"id", "k"}))
	w0, _ := read(t, pool, l, "cb", "")
	for _, q := range []string{
		`INSERT INTO cb SELECT g, g FROM generate_series(1, 10) g`,
		`INSERT INTO cb SELECT g, g FROM generate_series(11, 21) g`,
		`INSERT INTO cb SELECT g, g FROM generate_series(1, 0) g`,
		`UPDATE cb SET k = k + 1 WHERE id < 0`,
		`UPDATE cb SET k = k + 1 WHERE id <= 10`,
		`UPDATE cb SET k = k + 1 WHERE id > 10`,
		`DELETE FROM cb WHERE id < 0`,
		`DELETE FROM cb WHERE id = 1`,
	} {
		exec(t, pool, q)
	}
	rows, err := pool.Query(ctx, `SELECT op::text || array_length(vals, 2) FROM lakewrite.change_log WHERE source = 'cb' AND op IN ('n', 'o') ORDER BY xid, op DESC, array_length(vals, 2) DESC`)
	require.NoError(t, err)
	entries, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"n10", "n10", "n1", "o10", "n10", "o10", "o1", "n10", "n1", "o1"}, entries)
	_, got := read(t, pool, l, "cb", w0.Position)
	require.Len(t, got, 21+10*2+11*2+1)
}

// Tracking a table again with the same columns replaces triggers of an
// earlier version (here a function of the row-per-image form) with the
// current ones and keeps readers' stored positions (SavePosition): the
// window across the upgrade is known and holds the entries of both forms;
// tracking once more changes nothing.
func TestTrackUpgradesEarlierTriggers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, l := setup(t)
	require.NoError(t, l.Track(ctx, pool, "orders", `app."Orders"`, []string{"id", "k"}))
	w0, _ := read(t, pool, l, "orders", "")
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return l.SavePosition(ctx, tx, "out", "orders", "pg:"+string(w0.Position))
	}))
	var fn, installed string
	state := func() (string, string) {
		var src string
		require.NoError(t, pool.QueryRow(ctx, `SELECT s.function, s.installed_xid::text, p.prosrc FROM lakewrite.change_sources s
			JOIN pg_catalog.pg_proc p ON p.oid = pg_catalog.to_regprocedure(s.function || '()') WHERE s.source = 'orders'`).Scan(&fn, &installed, &src))
		return installed, src
	}
	xid0, current := state()
	exec(t, pool, `CREATE OR REPLACE FUNCTION `+fn+`() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
		SET search_path = pg_catalog, pg_temp AS $$
		BEGIN
			IF TG_OP = 'INSERT' THEN
				INSERT INTO lakewrite.change_log (source, op, vals)
				SELECT 'orders', 'i', array_agg(ARRAY[t.id::text, t.k::text]) FROM lw_new t;
			END IF;
			RETURN NULL;
		END $$`)
	exec(t, pool, `INSERT INTO app."Orders" VALUES (1, 'a', 1), (2, NULL, 2)`)
	require.NoError(t, l.Track(ctx, pool, "orders", `app."Orders"`, []string{"id", "k"}))
	xid1, src := state()
	require.Equal(t, current, src, "the current triggers again")
	require.Equal(t, xid0, xid1, "positions stay valid")
	exec(t, pool, `INSERT INTO app."Orders" VALUES (3, 'c', 3)`)
	exec(t, pool, `UPDATE app."Orders" SET k = 'b' WHERE id = 2`)
	ps, err := l.Positions(ctx, pool, "out")
	require.NoError(t, err)
	require.NotEqual(t, "pg:"+string(w0.Position), ps["orders"], "the stored position takes the new triggers' state")
	w, got := read(t, pool, l, "orders", changelog.Position(ps["orders"]))
	require.True(t, w.Known, w.Reason)
	require.Equal(t, []string{`D{"id":2,"k":null}`, `I{"id":1,"k":"a"}`, `I{"id":2,"k":"b"}`, `I{"id":2,"k":null}`, `I{"id":3,"k":"c"}`}, got)
	// ValuesSQL reads both forms of entries too.
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	wv, err := l.Window(ctx, tx, "orders", changelog.Position(ps["orders"]))
	require.NoError(t, err)
	rows, err := tx.Query(ctx, `SELECT coalesce(v2, 'NULL') || '/' || v1 FROM (`+wv.ValuesSQL([]string{"id", "k"})+`) w ORDER BY 1`, wv.Args...)
	require.NoError(t, err)
	ks, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"NULL/2", "NULL/2", "a/1", "b/2", "c/3"}, ks)
	require.NoError(t, l.Track(ctx, pool, "orders", `app."Orders"`, []string{"id", "k"}))
	xid2, _ := state()
	require.Equal(t, xid0, xid2)
}

// BenchmarkWindowOneEntry reads a window of one log entry (one INSERT
// statement of n rows, so one entry of n images) and reports the read's
// cost per image, which stays flat as n grows: an entry's column arrays
// are each decompressed once, not once per image.
//
//	go test -run '^$' -bench WindowOneEntry ./incremental/changelog/
func BenchmarkWindowOneEntry(b *testing.B) {
	for _, n := range []int{1000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("images=%d", n), func(b *testing.B) {
			ctx := context.Background()
			pool := pgtest.Pool(b)
			l := changelog.New("")
			_, err := pool.Exec(ctx, `CREATE TABLE t (id bigint PRIMARY KEY, g bigint, name text)`)
			require.NoError(b, err)
			require.NoError(b, l.Track(ctx, pool, "t", "t", []string{"id", "g", "name"}))
			tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
			require.NoError(b, err)
			w0, err := l.Window(ctx, tx, "t", "")
			require.NoError(b, err)
			require.NoError(b, tx.Commit(ctx))
			since := w0.Position
			_, err = pool.Exec(ctx, `INSERT INTO t SELECT s, s % 97, 'name ' || s FROM generate_series(1, $1::bigint) s`, n)
			require.NoError(b, err)
			for b.Loop() {
				tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
				require.NoError(b, err)
				w, err := l.Window(ctx, tx, "t", since)
				require.NoError(b, err)
				require.True(b, w.Known)
				rows, err := tx.Query(ctx, w.SQL, w.Args...)
				require.NoError(b, err)
				got := 0
				for rows.Next() {
					got++
				}
				require.NoError(b, rows.Err())
				require.NoError(b, tx.Rollback(ctx))
				require.Equal(b, n, got)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/image")
		})
	}
}
