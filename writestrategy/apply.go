package writestrategy

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
)

// WriteResult is what a write of one output did.
type WriteResult struct {
	DatasetID string
	Sink      string // StoragePostgres or StorageIceberg
	Mode      string // ledger.ModeReplace or ledger.ModeAppend, as written
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
	// Columns of the output, stamped as the dataset's declared schema.
	Columns Schema
	// Set by the write dispatch.
	TxnID       string
	SnapshotID  int64     // 0 on the Postgres path
	CommittedAt time.Time // commit time: the snapshot's timestamp, or the database clock
	// Replayed: nothing was written; the result is that of an earlier
	// write (an idempotent append that had already landed, or a write with
	// the same Request.IdempotencyKey).
	Replayed bool
	// Maintenance is the report of the table lifecycle run that followed
	// this Iceberg write, when one was due and ran (see Dispatcher.Maintain).
	Maintenance *facade.MaintenanceReport
}

// describe returns the columns of a SELECT without running it.
func describe(ctx context.Context, tx pgx.Tx, sql string) (Schema, error) {
	sd, err := tx.Conn().PgConn().Prepare(ctx, "", sql, nil)
	if err != nil {
		return Schema{}, queryError("describe output", err)
	}
	oids := make([]uint32, len(sd.Fields))
	mods := make([]int32, len(sd.Fields))
	var s Schema
	for i, f := range sd.Fields {
		oids[i], mods[i] = f.DataTypeOID, f.TypeModifier
		if err := checkColumnName(f.Name); err != nil {
			return Schema{}, err
		}
		s.Columns = append(s.Columns, Column{Name: f.Name})
	}
	if len(oids) == 0 {
		return Schema{}, fmt.Errorf("%w: the output has no columns", ErrInvalid)
	}
	rows, err := tx.Query(ctx, `SELECT format_type(o, m) FROM unnest($1::oid[], $2::int4[]) WITH ORDINALITY AS t(o, m, n) ORDER BY n`, oids, mods)
	if err != nil {
		return Schema{}, queryError("describe output", err)
	}
	types, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return Schema{}, queryError("describe output", err)
	}
	seen := map[string]bool{}
	for i := range s.Columns {
		s.Columns[i].Type = types[i]
		if seen[s.Columns[i].Name] {
			return Schema{}, &IdentifierError{What: "output column", Name: s.Columns[i].Name, Reason: "appears twice"}
		}
		seen[s.Columns[i].Name] = true
	}
	return s, nil
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

// Apply runs s on the Postgres path: it writes each output into the
// dataset_rows row store inside tx (the caller's transaction, which the
// caller commits) and returns one result per output. Nothing is written to
// the datasets table or the ledger; the write dispatch commits the ledger in
// the same transaction.
func Apply(ctx context.Context, tx pgx.Tx, env *Env, s WriteStrategy) ([]WriteResult, error) {
	if env == nil {
		env = &Env{}
	}
	ps, err := prepare(ctx, tx, env, s, StoragePostgres)
	if err != nil {
		return nil, err
	}
	ctl := env.ctlSchema()
	results := make([]WriteResult, len(ps))
	for i, p := range ps {
		cols, err := describe(ctx, tx, p.sql)
		if err != nil {
			return nil, err
		}
		srcRows, err := count(ctx, tx, p.countSQL, p.countArgs)
		if err != nil {
			return nil, err
		}
		results[i] = WriteResult{DatasetID: p.output, Sink: StoragePostgres, Mode: p.mode, Columns: cols}
		if p.preserveSQL != "" {
			if results[i].Preserved, err = count(ctx, tx, p.preserveSQL, p.preserveArgs); err != nil {
				return nil, err
			}
		}
		if s.Kind() == KindSplit {
			continue // written together below
		}
		txn := env.txnID(p.output)
		var n int64
		switch {
		case p.kind == KindSnapshotReplace && p.preserveSQL != "":
			n, err = applyPreserving(ctx, tx, ctl, p, env.TxnIDs[p.output])
		case p.mode == ledger.ModeAppend:
			n, err = insertRows(ctx, tx, ctl, []projection{p}, []any{txn}, true)
		default:
			if _, err = tx.Exec(ctx, `DELETE FROM `+ctl+`.dataset_rows WHERE dataset_id = $1`, p.output); err != nil {
				return nil, queryError("clear row store", err)
			}
			n, err = insertRows(ctx, tx, ctl, []projection{p}, []any{txn}, false)
		}
		if err != nil {
			return nil, err
		}
		results[i].Rows = n
		if p.countSQL != "" {
			results[i].Skipped = srcRows - n
		}
	}
	if s.Kind() == KindSplit {
		// Both outputs in one combined statement.
		for _, p := range ps {
			if _, err := tx.Exec(ctx, `DELETE FROM `+ctl+`.dataset_rows WHERE dataset_id = $1`, p.output); err != nil {
				return nil, queryError("clear row store", err)
			}
		}
		counts, err := insertSplit(ctx, tx, ctl, ps, []any{env.txnID(ps[0].output), env.txnID(ps[1].output)})
		if err != nil {
			return nil, err
		}
		results[0].Rows, results[1].Rows = counts[0], counts[1]
	}
	return results, nil
}

// insertRows writes one projection's rows into the row store, numbered from
// 0 (replace) or after the current maximum (append).
func insertRows(ctx context.Context, tx pgx.Tx, ctl string, ps []projection, txns []any, appendRows bool) (int64, error) {
	p := ps[0]
	b := newBuilder(p.args)
	ds, txn := b.param(p.output), b.param(txns[0])
	base := "-1"
	if appendRows {
		base = "(SELECT coalesce(max(row_index), -1) FROM " + ctl + ".dataset_rows WHERE dataset_id = " + ds + ")"
	}
	b.w("INSERT INTO ", ctl, ".dataset_rows (dataset_id, row_index, data, txn_id) SELECT ", ds, ", ", base,
		" + row_number() OVER (), to_jsonb(o.*), ", txn, "::uuid FROM (", p.sql, "\n) o")
	tag, err := tx.Exec(ctx, b.String(), b.args...)
	if err != nil {
		return 0, queryError("write row store", err)
	}
	return tag.RowsAffected(), nil
}

// insertSplit writes both outputs of a split in one statement.
func insertSplit(ctx context.Context, tx pgx.Tx, ctl string, ps []projection, txns []any) ([2]int64, error) {
	// The two projections share their parameters (see Split.plan).
	b := newBuilder(ps[0].args)
	var ctes []string
	for i, p := range ps {
		sql := p.sql
		ds, txn := b.param(p.output), b.param(txns[i])
		ctes = append(ctes, fmt.Sprintf(`i%d AS (INSERT INTO %s.dataset_rows (dataset_id, row_index, data, txn_id) SELECT %s, row_number() OVER () - 1, to_jsonb(o.*), %s::uuid FROM (%s
) o RETURNING 1)`, i, ctl, ds, txn, sql))
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
func applyPreserving(ctx context.Context, tx pgx.Tx, ctl string, p projection, txn string) (int64, error) {
	b := newBuilder(p.args)
	var txnArg any
	if txn != "" {
		txnArg = txn
	}
	ds, t := b.param(p.output), b.param(txnArg)
	rows := ctl + ".dataset_rows"
	b.w("WITH o AS MATERIALIZED (SELECT to_jsonb(x.*) AS data, row_number() OVER () AS n FROM (", p.sql, "\n) x), ",
		"del AS (DELETE FROM ", rows, " d WHERE d.dataset_id = ", ds, " AND NOT EXISTS (SELECT 1 FROM o WHERE o.data = d.data) RETURNING 1), ",
		"ins AS (INSERT INTO ", rows, " (dataset_id, row_index, data, txn_id) SELECT ", ds,
		", (SELECT coalesce(max(row_index), -1) FROM ", rows, " WHERE dataset_id = ", ds, ") + row_number() OVER (ORDER BY o.n), o.data, ", t,
		"::uuid FROM o WHERE NOT EXISTS (SELECT 1 FROM ", rows, " d WHERE d.dataset_id = ", ds, " AND d.data = o.data) RETURNING 1) ",
		"SELECT (SELECT count(*) FROM o), (SELECT count(*) FROM ins), (SELECT count(*) FROM del)")
	var total, inserted, deleted int64
	if err := tx.QueryRow(ctx, b.String(), b.args...).Scan(&total, &inserted, &deleted); err != nil {
		return 0, queryError("write row store", err)
	}
	return total, nil
}
