package writestrategy

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
)

// A replace of one output on the Postgres arm, on the session an intent
// holds, can send everything after the intent's opening in one round trip:
// the transaction's BEGIN and settings, a check of the output's
// description, the row store's delete and insert, the row count, the
// ledger commit and the COMMIT (ledger.CommitTxEndAfter).
//
// The insert is built from a description of the output read earlier on the
// same session, as a prepared statement of that session that selects no
// row of the output (the check): the server refuses to bind a prepared
// statement whose result columns changed since it was prepared ("cached
// plan must not change result type"), and a refused statement stops the
// rest of the round trip, COMMIT included. So the insert runs only with the
// description it was built from, and the description holds until the
// transaction ends (the locks the check took). A refused check is dropped
// and the write runs the other way (see Apply), describing the output anew.
//
// A session keeps the checks of its last maxChecks outputs (in its
// pgconn.PgConn.CustomData), each the first time at the cost of a round
// trip (its Parse and Describe).

// maxChecks bounds the check statements one session keeps.
const maxChecks = 32

// checksKey is the key of a session's checks in its CustomData.
const checksKey = "lakewrite.writestrategy.checks"

// checks are the check statements prepared on one session, most recently
// used last.
type checks struct {
	order list.List // of *check
	byKey map[string]*list.Element
}

type check struct {
	key  string // the statement's name
	desc *pgconn.StatementDescription
}

// checkStatement returns the description of sql (run with args) read by the
// check statement prepared for it on conn, preparing it first when conn
// has none; ok is false when conn cannot keep one.
func checkStatement(ctx context.Context, conn *pgx.Conn, sql string) (name string, sd *pgconn.StatementDescription, ok bool, err error) {
	data := conn.PgConn().CustomData()
	if data == nil {
		return "", nil, false, nil
	}
	cs, _ := data[checksKey].(*checks)
	if cs == nil {
		cs = &checks{byKey: map[string]*list.Element{}}
		data[checksKey] = cs
	}
	text := checkSQL(sql)
	sum := sha256.Sum256([]byte(text))
	name = "lakewrite_check_" + hex.EncodeToString(sum[:12])
	if el, ok := cs.byKey[name]; ok {
		cs.order.MoveToBack(el)
		return name, el.Value.(*check).desc, true, nil
	}
	for cs.order.Len() >= maxChecks {
		old := cs.order.Front().Value.(*check)
		if err := conn.Deallocate(ctx, old.key); err != nil {
			return "", nil, false, err
		}
		cs.order.Remove(cs.order.Front())
		delete(cs.byKey, old.key)
	}
	if sd, err = conn.Prepare(ctx, name, text); err != nil {
		return "", nil, false, err
	}
	cs.byKey[name] = cs.order.PushBack(&check{key: name, desc: sd})
	return name, sd, true, nil
}

// dropCheck deallocates the check statement name of conn (refused by the
// server: its description changed).
func dropCheck(ctx context.Context, conn *pgx.Conn, name string) error {
	if cs, _ := conn.PgConn().CustomData()[checksKey].(*checks); cs != nil {
		if el, ok := cs.byKey[name]; ok {
			cs.order.Remove(el)
			delete(cs.byKey, name)
		}
	}
	return conn.Deallocate(ctx, name)
}

// checkSQL is the check statement of an output query: its columns, no row.
func checkSQL(sql string) string { return "SELECT * FROM (" + sql + "\n) x LIMIT 0" }

// oneTrip writes the output of ps (planned in tx, the pipelined
// transaction of env, on in's held session) and commits in with it, in one
// round trip. It returns handled false, with tx as it was (not begun),
// when the write does not qualify or its check was refused; the write then
// runs the other way.
func (d *Dispatcher) oneTrip(ctx context.Context, tx pgx.Tx, env *Env, s WriteStrategy, ps []projection,
	in *ledger.Intent) (results []WriteResult, handled bool, err error) {
	pipe := env.pipe
	if pipe == nil || in == nil || !env.floatsExact || len(ps) != 1 || s.Kind() == KindSplit || !pipe.canSpeculate(tx) {
		return nil, false, nil
	}
	p := ps[0]
	if p.countSQL != "" || p.preserveSQL != "" || p.mode != facade.Replace || p.output != in.DatasetID {
		return nil, false, nil
	}
	name, sd, ok, err := checkStatement(ctx, pipe.conn, p.sql)
	if err != nil || !ok {
		if pipe.conn.IsClosed() {
			return nil, true, queryError("describe output", err)
		}
		return nil, false, nil // the other way tells what is wrong
	}
	// The check's description is used only when every column type is
	// built in (no catalog lookup); otherwise, or when the columns are not
	// ones an output may have, the write goes the other way.
	desc, err := fieldsDescription(sd, p.builtinVisible, nil)
	if err != nil {
		return nil, false, nil
	}
	enc, err := encodingFor(desc.cols, desc.oids, desc.types)
	if err != nil {
		return nil, true, err
	}
	ctl := env.ctlSchema()
	b := &pgx.Batch{}
	for _, q := range pipe.begin {
		b.Queue(q)
	}
	checkAt := b.Len()
	b.Queue(name, p.args...)
	b.Queue(`DELETE FROM `+ctl+`.dataset_rows WHERE dataset_id = $1`, p.output)
	insertAt := b.Len()
	sql, args := insertRowsSQL(ctl, p, enc, env.txnID(p.output), false)
	b.Queue(sql, args...)
	b.Queue(`SELECT pg_catalog.set_config($1, (SELECT coalesce(max(row_index), -1) + 1 FROM `+ctl+`.dataset_rows WHERE dataset_id = $2)::pg_catalog.text, true)`,
		ledger.RowCountSetting, p.output)

	tags, at, err := d.cfg.Ledger.CommitTxEndAfter(ctx, tx, in, ledger.Outcome{Schema: desc.cols.JSON()},
		ledger.Prior{Batch: b, RowCountSet: true})
	var pe *ledger.PriorError
	switch {
	case errors.As(err, &pe) && pe.Index <= checkAt && !pipe.conn.IsClosed():
		// The BEGIN, the settings or the check failed (a changed
		// description): nothing was written; start over the other way.
		if rerr := pipe.restart(ctx); rerr != nil {
			return nil, true, queryError("begin", rerr)
		}
		if pe.Index == checkAt {
			if derr := dropCheck(ctx, pipe.conn, name); derr != nil {
				return nil, true, queryError("describe output", derr)
			}
		}
		return nil, false, nil
	case errors.As(err, &pe):
		what := "write row store"
		if pe.Index < insertAt {
			what = "clear row store"
		}
		return nil, true, queryError(what, pe.Err)
	case err != nil:
		return nil, true, err
	}
	r := WriteResult{DatasetID: p.output, Sink: sink.Postgres, Mode: p.mode, Columns: desc.cols,
		Rows: tags[insertAt].RowsAffected(), TxnID: in.ID, CommittedAt: at}
	return []WriteResult{r}, true, nil
}
