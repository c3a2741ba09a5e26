package writestrategy

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/sink"
)

// A write of the Postgres arm whose output query was described before (by
// an earlier write of the same query, on any session) sends its row-store
// statements without waiting for the output's description: they go in the
// round trip of the transaction's BEGIN, with a check of the description
// they were built from. The check is a statement of the session's
// statement cache that selects no row of the output: the server refuses to
// bind a prepared statement whose result columns changed since it was
// prepared ("cached plan must not change result type"), so the columns it
// reports are the output's columns now, with the locks that keep them so
// until the transaction ends. When they are not those the statements were
// built from, or the check fails, the transaction is rolled back and the
// write runs as it would have without the earlier description: nothing of
// the first attempt remains.

// maxDescriptions bounds the descriptions a Dispatcher remembers.
const maxDescriptions = 256

// descriptions remembers the row-store encoding of output queries whose
// columns all have built-in types, by query text.
type descriptions struct {
	mu sync.Mutex
	m  map[descriptionKey]*described
}

type descriptionKey struct {
	sql     string
	visible bool // see projection.builtinVisible
}

// described is a remembered description and the encoding made from it.
type described struct {
	names []string
	oids  []uint32
	mods  []int32
	cols  Schema
	enc   *rowEncoding
}

func (d *descriptions) get(sql string, visible bool) *described {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.m[descriptionKey{sql, visible}]
}

// put remembers desc (with its encoding) when its types are built in.
func (d *descriptions) put(sql string, visible bool, desc description, enc *rowEncoding) {
	if d == nil || !desc.builtin {
		return
	}
	e := &described{oids: desc.oids, mods: desc.mods, cols: desc.cols, enc: enc}
	for _, c := range desc.cols.Columns {
		e.names = append(e.names, c.Name)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[descriptionKey]*described{}
	}
	if len(d.m) >= maxDescriptions {
		for k := range d.m { // forget one
			delete(d.m, k)
			break
		}
	}
	d.m[descriptionKey{sql, visible}] = e
}

func (d *descriptions) forget(sql string, visible bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.m, descriptionKey{sql, visible})
}

// matches reports whether fields are the columns e was made from: the
// same names, type oids and modifiers, in the same order.
func (e *described) matches(fields []pgconn.FieldDescription) bool {
	if len(fields) != len(e.oids) {
		return false
	}
	for i, f := range fields {
		if f.Name != e.names[i] || f.DataTypeOID != e.oids[i] || f.TypeModifier != e.mods[i] {
			return false
		}
	}
	return true
}

// applySpeculative is Apply for one output replaced or appended as a whole
// (no counts of skipped or preserved rows), on a pipelined transaction not
// begun yet, when the output's query was described before: it returns
// ok false when it does not apply, or when the description changed (the
// transaction then is as it was: not begun).
func applySpeculative(ctx context.Context, tx pgx.Tx, env *Env, s WriteStrategy, ps []projection) ([]WriteResult, bool, error) {
	pipe := env.pipe
	if pipe == nil || env.described == nil || !env.floatsExact || len(ps) != 1 || s.Kind() == KindSplit || !pipe.canSpeculate(tx) {
		return nil, false, nil
	}
	p := ps[0]
	if p.countSQL != "" || p.preserveSQL != "" {
		return nil, false, nil
	}
	e := env.described.get(p.sql, p.builtinVisible)
	if e == nil {
		return nil, false, nil
	}
	ctl := env.ctlSchema()
	appendRows := p.mode == facade.Append
	var stmts []queuedStmt
	if !appendRows {
		stmts = append(stmts, queuedStmt{sql: `DELETE FROM ` + ctl + `.dataset_rows WHERE dataset_id = $1`, args: []any{p.output}, what: "clear row store"})
	}
	sql, args := insertRowsSQL(ctl, p, e.enc, env.txnID(p.output), appendRows)
	stmts = append(stmts, queuedStmt{sql: sql, args: args, what: "write row store"})
	fields, tags, err := pipe.speculate(ctx, p.sql, p.args, stmts)
	if err != nil && pipe.conn.IsClosed() {
		return nil, false, err
	}
	if errors.Is(err, errSpeculation) || !e.matches(fields) {
		// The description changed (or could not be checked): start over,
		// the statements' effects (if any ran) rolled back.
		env.described.forget(p.sql, p.builtinVisible)
		if rerr := pipe.restart(ctx); rerr != nil {
			return nil, false, queryError("begin", rerr)
		}
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	r := WriteResult{DatasetID: p.output, Sink: sink.Postgres, Mode: p.mode, Columns: Schema{Columns: slices.Clone(e.cols.Columns)},
		Rows: tags[len(tags)-1].RowsAffected()}
	return []WriteResult{r}, true, nil
}

// queuedStmt is a statement of a speculation, and what it does (for its
// error).
type queuedStmt struct {
	sql  string
	args []any
	what string
}

// errSpeculation marks a speculation that failed before its statements
// ran (its BEGIN, settings or check): the transaction is to be restarted.
var errSpeculation = errors.New("speculation failed")

// canSpeculate reports whether speculate can run on tx: tx is t, not begun
// yet, and t's session checks cached descriptions (pgx's statement cache).
func (t *pipelinedTx) canSpeculate(tx pgx.Tx) bool {
	if t.begun || t.closed || tx.Conn() != t.conn {
		return false
	}
	return cachesStatements(t.conn)
}

// cachesStatementsKey is the key, in a session's CustomData, of what
// cachesStatements found for its pgx.Conn.
const cachesStatementsKey = "lakewrite.writestrategy.cachesStatements"

// connCaching is whether conn caches statements.
type connCaching struct {
	conn *pgx.Conn
	ok   bool
}

// cachesStatements reports whether conn runs its queries through pgx's
// statement cache: its default exec mode caches statements, in a cache
// of some capacity. A Conn's config does not change once it is connected,
// and Conn.Config copies all of it, so the answer is read once per Conn and
// kept in its session's CustomData.
func cachesStatements(conn *pgx.Conn) bool {
	data := conn.PgConn().CustomData()
	if c, _ := data[cachesStatementsKey].(*connCaching); c != nil && c.conn == conn {
		return c.ok
	}
	cfg := conn.Config()
	ok := cfg.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement && cfg.StatementCacheCapacity > 0
	if data != nil {
		data[cachesStatementsKey] = &connCaching{conn: conn, ok: ok}
	}
	return ok
}

// speculate begins the transaction and, in the same round trip, checks the
// description of sql (run with args) and runs stmts. It returns sql's
// columns and the command tags of stmts. An error wrapping errSpeculation
// means that the BEGIN, the settings or the check failed (nothing of stmts
// ran; see restart); any other error is that of the statement of stmts
// that failed (the transaction is then aborted), or of the session.
func (t *pipelinedTx) speculate(ctx context.Context, sql string, args []any, stmts []queuedStmt) ([]pgconn.FieldDescription, []pgconn.CommandTag, error) {
	b := &pgx.Batch{}
	for _, q := range t.begin {
		b.Queue(q)
	}
	b.Queue(`SELECT * FROM (`+sql+"\n) x LIMIT 0", args...)
	for _, q := range stmts {
		b.Queue(q.sql, q.args...)
	}
	br := t.conn.SendBatch(ctx, b)
	var err error
	for range t.begin {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	var fields []pgconn.FieldDescription
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			fields = slices.Clone(rows.FieldDescriptions())
			rows.Close()
			err = rows.Err()
		}
	}
	if err != nil {
		cerr := br.Close()
		t.afterBegin(errors.Join(err, cerr))
		if t.conn.IsClosed() {
			return nil, nil, queryError("begin", errors.Join(err, cerr))
		}
		return nil, nil, errors.Join(errSpeculation, err)
	}
	tags := make([]pgconn.CommandTag, 0, len(stmts))
	for _, q := range stmts {
		tag, serr := br.Exec()
		if serr != nil {
			err = queryError(q.what, serr)
			break
		}
		tags = append(tags, tag)
	}
	cerr := br.Close()
	if err == nil && cerr != nil {
		err = queryError(stmts[len(stmts)-1].what, cerr)
	}
	t.afterBegin(err)
	return fields, tags, err
}

// restart rolls back a transaction begun by a failed speculation, leaving
// t as if nothing had been sent: its next statement begins it again.
func (t *pipelinedTx) restart(ctx context.Context) error {
	if !t.begun {
		return nil
	}
	if _, err := t.conn.Exec(ctx, "rollback"); err != nil {
		t.kill()
		t.closed = true
		return err
	}
	t.begun = false
	return nil
}
