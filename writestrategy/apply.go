package writestrategy

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/internal/refresh"

	"github.com/lakewrite/lakewrite/sink"
)

// WriteResult is what a write of one output did.
type WriteResult struct {
	DatasetID string
	Sink      sink.Sink        // sink.Postgres or sink.Iceberg
	Mode      facade.WriteMode // facade.Replace or facade.Append, as written
	// Rows written: for a replace the rows of the output, for an append the
	// rows appended. On the Iceberg path this is the commit result's count.
	Rows int64
	// Skipped source rows (append_new: key already present or repeated;
	// snapshot_replace: duplicate keys).
	Skipped int64
	// Preserved output rows that kept their identity (snapshot_replace:
	// key and content unchanged).
	Preserved int64
	// Rounded numeric values: rounded half-even to their column's scale
	// on the Iceberg path (see Preflight); 0 on the Postgres path.
	Rounded int64
	// Bytes of the data files the write added on the Iceberg path (delete
	// files and deletion vectors not counted); 0 on the Postgres path and
	// for a replayed result.
	Bytes int64
	// Merge says how a snapshot_replace merged into its Iceberg table
	// (facade.StageInfo.Merge); facade.MergeNone when the write was no
	// merge, and on the Postgres path.
	Merge facade.MergeMode
	// Set by the write dispatch.
	TxnID       string
	SnapshotID  int64     // 0 on the Postgres path
	CommittedAt time.Time // commit time: the snapshot's timestamp, or the database clock
	// Maintenance is the report of the table lifecycle run that followed
	// this Iceberg write, when one was due and ran (see Dispatcher.Maintain).
	Maintenance *facade.MaintenanceReport
	// FullRead says why a write in delta mode (Request.ReadMode
	// incremental.ReadDelta) read sources of Request.Delta whole instead
	// of only their window's rows: "<source id>: <reason>" for each such
	// source (the reason incremental.ChooseReadMode gives), by source id,
	// joined by "; ". The outputs of a split share it. "" when every
	// source with a window was read as a delta, for a write not in delta
	// mode, and for a result replayed for Request.IdempotencyKey (nothing
	// read). The Dispatcher also logs it (Info, "lakewrite delta request
	// read whole").
	FullRead string
	// Slices is the number of readers that wrote the output on the Iceberg
	// path (Request.Slices): 1 for one stream, 0 on the Postgres path and
	// for a replayed result. SliceNote says why a write asked to run in
	// slices ran as one stream ("" otherwise).
	Slices    int
	SliceNote string
	// Refresh says how a run of an output with a declared dependency
	// (Transform.Depends, Join.Depends), or of a Model, was computed:
	// incrementally, for Refresh.Keys key values (a Model's touched source
	// keys), or in full and why. Its Mode is "" for another output and
	// for a replayed result.
	Refresh incremental.RefreshReport

	// columns of the output, stamped as the dataset's declared schema.
	columns Schema
	// replayed: nothing was written; the result is that of an earlier
	// write (an idempotent append that had already landed, or a write with
	// the same Request.IdempotencyKey).
	replayed bool
}

// Replayed reports whether nothing was written: the result is that of an
// earlier write (a Request.IdempotencyKey already committed, or an append
// whose transaction had already landed).
func (r WriteResult) Replayed() bool { return r.replayed }

// describeTypes is the one way the library describes an output's
// statement: it returns the columns of a SELECT without running it (the
// statement prepared unnamed in tx, one round trip), each a name an output
// may have and none twice, with the columns' type oids and the pg_type
// rows of those types (and of the types they are built on), read in one
// more statement with the columns' type names; none is read when every
// column has a built-in type of the static table (builtinDescribe;
// visible: see builtinVisibleSQL).
func describeTypes(ctx context.Context, tx pgx.Tx, sql string, visible bool) (Schema, []uint32, map[uint32]*pgTypeRow, error) {
	sd, err := tx.Conn().PgConn().Prepare(ctx, "", sql, nil)
	if err != nil {
		return Schema{}, nil, nil, queryError("describe output", err)
	}
	oids := make([]uint32, len(sd.Fields))
	mods := make([]int32, len(sd.Fields))
	var s Schema
	for i, f := range sd.Fields {
		oids[i], mods[i] = f.DataTypeOID, f.TypeModifier
		if err := checkColumnName(f.Name); err != nil {
			return Schema{}, nil, nil, err
		}
		s.Columns = append(s.Columns, Column{Name: f.Name})
	}
	if len(oids) == 0 {
		return Schema{}, nil, nil, fmt.Errorf("%w: the output has no columns", ErrInvalid)
	}
	names, types, ok := builtinDescribe(oids, mods, visible)
	if !ok {
		rows, err := tx.Query(ctx, `WITH RECURSIVE c(o, m, n) AS (
	SELECT * FROM unnest($1::pg_catalog.oid[], $2::pg_catalog.int4[]) WITH ORDINALITY
), `+typeRowsCTE+" "+typeRowsSelect("format_type(o, m)"), oids, mods)
		if err != nil {
			return Schema{}, nil, nil, queryError("describe output", err)
		}
		if names, _, types, err = readTypes(rows, len(oids), "describe output"); err != nil {
			return Schema{}, nil, nil, err
		}
	}
	seen := map[string]string{}
	for i := range s.Columns {
		s.Columns[i].Type = names[i]
		n := s.Columns[i].Name
		if prev, dup := seen[columnKey(n)]; dup {
			return Schema{}, nil, nil, identifierError("output column", n, clashReason(prev, n))
		}
		seen[columnKey(n)] = n
	}
	return s, oids, types, nil
}

func count(ctx context.Context, tx pgx.Tx, sql string, args []any) (int64, error) {
	if sql == "" {
		return 0, nil
	}
	var n int64
	if err := tx.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		return 0, queryError("count", err)
	}
	return n, nil
}

// applyStrategy runs s on the Postgres path: it writes each output into the
// dataset_rows row store inside tx (the caller's transaction, which the
// caller commits) and returns one result per output. Nothing is written to
// the datasets table or the ledger; the write dispatch commits the ledger in
// the same transaction. An output column of a type the row store cannot
// hold is refused (ErrUnsupportedType) before anything is written.
func applyStrategy(ctx context.Context, tx pgx.Tx, env *Env, s WriteStrategy) ([]WriteResult, error) {
	if env == nil {
		env = &Env{}
	}
	ps, err := prepare(ctx, tx, env, s, sink.Postgres)
	if err != nil {
		return nil, err
	}
	return applyPlanned(ctx, tx, env, s, ps)
}

// applyPlanned is applyStrategy once s is planned (ps).
func applyPlanned(ctx context.Context, tx pgx.Tx, env *Env, s WriteStrategy, ps []projection) ([]WriteResult, error) {
	ctl := env.ctlSchema()
	results := make([]WriteResult, len(ps))
	encs := make([]*rowEncoding, len(ps))
	for i, p := range ps {
		cols, oids, types, err := describeTypes(ctx, tx, p.sql, p.builtinVisible)
		if err != nil {
			return nil, p.locate(err, p.sql)
		}
		if err := checkDependsOutput(p, cols); err != nil {
			return nil, err
		}
		if encs[i], err = encodingFor(cols, oids, types); err != nil {
			return nil, err
		}
		results[i] = WriteResult{DatasetID: p.output, Sink: sink.Postgres, Mode: p.mode, columns: cols, FullRead: env.fullRead()}
	}
	restore := noRestore
	if !env.floatsExact {
		var err error
		if restore, err = floatDigits(ctx, tx); err != nil {
			return nil, err
		}
	}
	for i, p := range ps {
		srcRows, err := count(ctx, tx, p.countSQL, p.countArgs)
		if err != nil {
			return nil, err
		}
		if s.Kind() == kindSplit {
			continue // written together below
		}
		txn := env.txnID(p.output)
		var n int64
		switch {
		case p.depends != nil && env.refresh != nil && env.refresh.Output == p.output:
			n, results[i].Preserved, err = applyRefresh(ctx, tx, env, p, results[i].columns, encs[i], txn)
			results[i].Refresh = env.refresh.Report
		case p.kind == KindSnapshotReplace && p.preserveSQL != "":
			n, results[i].Preserved, err = applyPreserving(ctx, tx, ctl, p, encs[i], txn)
		case p.scope != "":
			n, err = replaceScoped(ctx, tx, ctl, p, encs[i], txn)
		case p.mode == facade.Append:
			if err = widenFloats(ctx, tx, ctl, p, results[i].columns); err == nil {
				n, err = insertRows(ctx, tx, ctl, p, encs[i], txn, true)
			}
		default:
			n, err = replaceRows(ctx, tx, ctl, p, encs[i], txn)
		}
		if err != nil {
			return nil, err
		}
		results[i].Rows = n
		if p.countSQL != "" {
			results[i].Skipped = srcRows - n
		}
	}
	if s.Kind() == kindSplit {
		// Both outputs in one combined statement.
		for _, p := range ps {
			if _, err := tx.Exec(ctx, `WITH f AS (`+refresh.FullSQL(ctl, "$1::pg_catalog.text")+`) DELETE FROM `+ctl+`.dataset_rows WHERE dataset_id = $1`, p.output); err != nil {
				return nil, queryError("clear row store", err)
			}
		}
		counts, err := insertSplit(ctx, tx, ctl, ps, encs, []any{env.txnID(ps[0].output), env.txnID(ps[1].output)})
		if err != nil {
			return nil, err
		}
		results[0].Rows, results[1].Rows = counts[0], counts[1]
	}
	if err := restore(ctx); err != nil {
		return nil, err
	}
	return results, nil
}

// insertRows writes one projection's rows into the row store, numbered from
// 0 (replace) or after the current maximum (append).
func insertRows(ctx context.Context, tx pgx.Tx, ctl string, p projection, enc *rowEncoding, txn any, appendRows bool) (int64, error) {
	sql, args := insertRowsSQL(ctl, p, enc, txn, appendRows)
	// The rows appended are recorded as change images (refresh.ImagesCTE).
	b := newBuilder(args)
	ds := b.param(p.output)
	b.w("WITH ins AS (", sql, " RETURNING row_index, data), rec AS (", refresh.ImagesCTE(ctl, ds+"::pg_catalog.text",
		`SELECT 'I'::"char" AS op, data FROM ins`, "(SELECT count(*) FROM ins)", "(SELECT coalesce(max(row_index) + 1, 0) FROM ins)"),
		") SELECT count(*) FROM ins")
	var n int64
	if err := tx.QueryRow(ctx, b.String(), b.args...).Scan(&n); err != nil {
		return 0, queryError("write row store", err)
	}
	return n, nil
}

// replaceRows replaces the output's rows in the row store by one
// projection's: the delete of the old rows and the insert of the new ones
// are sent together (one round trip) and run in that order.
func replaceRows(ctx context.Context, tx pgx.Tx, ctl string, p projection, enc *rowEncoding, txn any) (int64, error) {
	sql, args := insertRowsSQL(ctl, p, enc, txn, false)
	b := &pgx.Batch{}
	b.Queue(`WITH f AS (`+refresh.FullSQL(ctl, "$1::pg_catalog.text")+`) DELETE FROM `+ctl+`.dataset_rows WHERE dataset_id = $1`, p.output)
	b.Queue(sql, args...)
	br := tx.SendBatch(ctx, b)
	var n int64
	_, err := br.Exec()
	if err != nil {
		err = queryError("clear row store", err)
	} else {
		var tag pgconn.CommandTag
		if tag, err = br.Exec(); err != nil {
			err = queryError("write row store", err)
		}
		n = tag.RowsAffected()
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = queryError("write row store", cerr)
	}
	return n, err
}

// insertRowsSQL is the statement of insertRows and its arguments.
func insertRowsSQL(ctl string, p projection, enc *rowEncoding, txn any, appendRows bool) (string, []any) {
	b := newBuilder(p.args)
	ds, t := b.param(p.output), b.param(txn)
	base := "-1"
	if appendRows {
		base = "(SELECT coalesce(max(row_index), -1) FROM " + ctl + ".dataset_rows WHERE dataset_id = " + ds + ")"
	}
	b.w("INSERT INTO ", ctl, ".dataset_rows (dataset_id, row_index, data, txn_id) SELECT ", ds, ", ", base,
		" + row_number() OVER (), ", enc.data(), ", ", t, "::pg_catalog.uuid FROM ", enc.from(p.sql))
	return b.String(), b.args
}

// insertSplit writes both outputs of a split in one statement.
func insertSplit(ctx context.Context, tx pgx.Tx, ctl string, ps []projection, encs []*rowEncoding, txns []any) ([2]int64, error) {
	// The two projections share their parameters (see Split.plan).
	b := newBuilder(ps[0].args)
	var ctes []string
	for i, p := range ps {
		ds, txn := b.param(p.output), b.param(txns[i])
		ctes = append(ctes, fmt.Sprintf(`i%d AS (INSERT INTO %s.dataset_rows (dataset_id, row_index, data, txn_id) SELECT %s, row_number() OVER () - 1, %s, %s::pg_catalog.uuid FROM %s RETURNING 1)`,
			i, ctl, ds, encs[i].data(), txn, encs[i].from(p.sql)))
	}
	b.w("WITH ", strings.Join(ctes, ", "), " SELECT (SELECT count(*) FROM i0), (SELECT count(*) FROM i1)")
	var out [2]int64
	if err := tx.QueryRow(ctx, b.String(), b.args...).Scan(&out[0], &out[1]); err != nil {
		return out, queryError("write split outputs", err)
	}
	return out, nil
}

// applyPreserving writes a snapshot_replace over an existing row-store
// target: unchanged rows stay as they are (their row_index and txn_id: their
// identity), vanished or changed rows are deleted, new rows are appended.
// A row is unchanged when its encoding is identical (the jsonb texts are
// equal: numbers compare by their text, so 1.50 is not 1.5). It returns
// the output's rows and the unchanged ones.
func applyPreserving(ctx context.Context, tx pgx.Tx, ctl string, p projection, enc *rowEncoding, txn any) (int64, int64, error) {
	if err := upgradeRows(ctx, tx, ctl, p.output, p.target); err != nil {
		return 0, 0, err
	}
	b := newBuilder(p.args)
	ds, t := b.param(p.output), b.param(txn)
	rows := ctl + ".dataset_rows"
	b.w("WITH o AS MATERIALIZED (SELECT ", enc.data(), " AS data, row_number() OVER () AS n FROM ", enc.from(p.sql), "), ",
		"del AS (DELETE FROM ", rows, " d WHERE d.dataset_id = ", ds, " AND NOT EXISTS (SELECT 1 FROM o WHERE o.data::pg_catalog.text = d.data::pg_catalog.text) RETURNING d.data), ",
		"ins AS (INSERT INTO ", rows, " (dataset_id, row_index, data, txn_id) SELECT ", ds,
		", (SELECT coalesce(max(row_index), -1) FROM ", rows, " WHERE dataset_id = ", ds, ") + row_number() OVER (ORDER BY o.n), o.data, ", t,
		"::pg_catalog.uuid FROM o WHERE NOT EXISTS (SELECT 1 FROM ", rows, " d WHERE d.dataset_id = ", ds, " AND d.data::pg_catalog.text = o.data::pg_catalog.text) RETURNING data), ",
		"rec AS (", refresh.ImagesCTE(ctl, ds+"::pg_catalog.text", `SELECT 'D'::"char" AS op, data FROM del UNION ALL SELECT 'I'::"char", data FROM ins`,
			"(SELECT count(*) FROM del) + (SELECT count(*) FROM ins)", "(SELECT count(*) FROM o)"), ") ",
		"SELECT (SELECT count(*) FROM o), (SELECT count(*) FROM ins), (SELECT count(*) FROM del)")
	var total, inserted, deleted int64
	if err := tx.QueryRow(ctx, b.String(), b.args...).Scan(&total, &inserted, &deleted); err != nil {
		return 0, 0, queryError("write row store", err)
	}
	return total, total - inserted, nil
}

// upgradeRows rewrites the target's rows written by earlier versions (no
// marker) in the current encoding, keeping their row_index and txn_id: the
// values read are the same, so a snapshot_replace then keeps the identity
// of every row it leaves unchanged.
func upgradeRows(ctx context.Context, tx pgx.Tx, ctl, datasetID string, target *relation) error {
	if target == nil {
		return nil
	}
	rows := ctl + ".dataset_rows"
	var old bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+rows+` WHERE dataset_id = $1 AND NOT data ? '')`, datasetID).Scan(&old); err != nil {
		return queryError("read row store", err)
	}
	if !old {
		return nil
	}
	_, oids, types, err := declaredTypes(ctx, tx, target.schema)
	if err != nil {
		return err
	}
	enc, err := encodingFor(target.schema, oids, types)
	if err != nil {
		return err
	}
	b := newBuilder(nil)
	src := "SELECT " + target.cols("t") + `, t."__ord" FROM ` + target.render(b) + " t"
	sel := append(append([]string(nil), enc.sel...), `x."__ord"`)
	ds := b.param(datasetID)
	b.w("UPDATE ", rows, ` d SET data = u.data FROM (SELECT e."__ord", `, rowMarker, ` || (to_jsonb(e.*) - '__ord') AS data FROM (SELECT `,
		strings.Join(sel, ", "), " FROM (", src, ") x) e) u WHERE d.dataset_id = ", ds, ` AND d.row_index = u."__ord" AND NOT d.data ? ''`)
	if _, err := tx.Exec(ctx, b.String(), b.args...); err != nil {
		return queryError("upgrade row store", err)
	}
	return nil
}
