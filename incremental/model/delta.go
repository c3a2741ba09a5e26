package model

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/incremental/changelog"
)

// Facts are what a run knows about its output before it reads the source.
type Facts struct {
	// LastTxn is the ledger transaction of the output's last committed
	// write ("" when none).
	LastTxn string
	// SameSink: that write was on the sink this run writes to.
	SameSink bool
	// Scoped: this run's sink can replace the output rows of a set of
	// keys (else every run scores every row).
	Scoped bool
	// RowStore: the source is a row-store dataset, whose writes record
	// the images of the rows they insert and delete in the change log
	// once it is registered as a change source (changelog.Log.RegisterSource),
	// rather than a relation tracked by triggers.
	RowStore bool
	// Control is the quoted control-plane schema, where Changes reads
	// the open write intents of a row-store source (RowStore).
	Control string
}

// Delta is what a run reads of its source: every row, or (Incremental)
// only the rows whose key a change touched since the output's last run.
type Delta struct {
	Incremental bool
	// Reason says why the run scores every row ("" when incremental).
	Reason string
	// Keys is the number of source keys the changes touched (incremental).
	Keys int64
	// position is the run's read of the source (a changelog position).
	position changelog.Position
	// table holds the touched keys: k0..kn-1 typed as the key columns,
	// and "key", their KeyColumn text.
	table   string
	hasNull bool
	nkey    int
}

// Changes decides, in tx (REPEATABLE READ: its snapshot is the source's
// read), whether the run of s reads only the source rows changed since
// the output's last run: it does when that run stored its position (see
// Position) and was the output's last write, on this sink, and the
// source's change log window since then is known. For an incremental run
// it fills a temporary table of the touched keys.
func Changes(ctx context.Context, tx pgx.Tx, log *changelog.Log, s *Spec, src Source, f Facts) (*Delta, error) {
	positions, err := log.Positions(ctx, tx, s.Output)
	if err != nil {
		return nil, err
	}
	txn, since, _ := strings.Cut(positions[s.Source], " ")
	if f.LastTxn == "" || txn != f.LastTxn {
		since = ""
	}
	w, err := log.Window(ctx, tx, s.Source, changelog.Position(since))
	if err != nil {
		return nil, err
	}
	d := &Delta{position: w.Position}
	switch {
	case f.LastTxn == "":
		d.Reason = "first run"
	case !f.SameSink:
		d.Reason = "first run on this sink"
	case !f.Scoped:
		d.Reason = "the sink cannot replace the rows of a key set"
	case positions[s.Source] == "":
		d.Reason = "no earlier position"
	case txn != f.LastTxn:
		d.Reason = "the output was written by another run since its last model run"
	case !w.Known:
		d.Reason = w.Reason
	}
	if !w.Known && f.RowStore {
		// A writer of the source that opened its intent before the source
		// was registered may not record its changes: the run's position is
		// stored only when none of the source's intents is open (a later
		// run then scores every row again).
		var open bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+f.Control+`.pipeline_build_transactions WHERE dataset_id = $1 AND status = 'open')`,
			s.Source).Scan(&open); err != nil {
			return nil, fmt.Errorf("model %q: read the open writes of source %q: %w", s.Output, s.Source, err)
		}
		if open {
			d.position = ""
		}
	}
	if d.Reason != "" {
		return d, nil
	}
	exprs, types, err := keyColumns(s, src)
	if err != nil {
		return nil, err
	}
	d.Incremental, d.nkey, d.table = true, len(exprs), tempName("keys")
	sel := make([]string, len(s.Key))
	ks := make([]string, len(s.Key))
	for i, k := range s.Key {
		sel[i] = "(w.image ->> " + literal(k) + ")::" + types[i] + " AS k" + strconv.Itoa(i)
		ks[i] = "k" + strconv.Itoa(i)
	}
	keySQL, err := KeySQL(ks, types)
	if err != nil {
		return nil, err
	}
	var args []any
	create := "CREATE TEMP TABLE " + d.table + " ON COMMIT DROP AS SELECT *, " + keySQL + " AS key FROM (SELECT DISTINCT " + strings.Join(sel, ", ")
	if w.Images > 0 {
		create += " FROM (" + w.SQL + ") w WHERE w.op IN ('I', 'D'))"
		args = w.Args
	} else {
		create += " FROM (SELECT NULL::pg_catalog.jsonb AS image) w WHERE false)"
	}
	create += " k"
	if _, err := tx.Exec(ctx, create, args...); err != nil {
		return nil, fmt.Errorf("model %q: read the changed keys: %w", s.Output, err)
	}
	nulls := make([]string, len(ks))
	for i, k := range ks {
		nulls[i] = k + " IS NULL"
	}
	if err := tx.QueryRow(ctx, "SELECT count(*), coalesce(bool_or("+strings.Join(nulls, " OR ")+"), false) FROM "+d.table).Scan(&d.Keys, &d.hasNull); err != nil {
		return nil, fmt.Errorf("model %q: count the changed keys: %w", s.Output, err)
	}
	if _, err := tx.Exec(ctx, "ANALYZE "+d.table); err != nil {
		return nil, fmt.Errorf("model %q: %w", s.Output, err)
	}
	return d, nil
}

// Position is what to store (changelog.Log.SavePosition under the output
// and the source) once the run, ledger transaction txnID, has committed;
// "" when the run must store nothing (a writer of a row-store source was
// in flight: its changes may be missing from the log).
func (d *Delta) Position(txnID string) string {
	if d.position == "" {
		return ""
	}
	return txnID + " " + string(d.position)
}

// KeysSQL selects the KeyColumn texts of the touched keys: the output
// rows an incremental run replaces.
func (d *Delta) KeysSQL() string { return "SELECT key FROM " + d.table }

// ScopeKeys reads, in tx, the KeyColumn texts of the touched keys as one
// Arrow batch of a single string column named KeyColumn: the key set of a
// replace limited to the output rows the run replaces (on Iceberg,
// facade.Scope{Columns: []string{KeyColumn}, Keys: ...}). The caller
// releases the batch.
func (d *Delta) ScopeKeys(ctx context.Context, tx pgx.Tx, mem memory.Allocator) (arrow.RecordBatch, error) {
	rows, err := tx.Query(ctx, d.KeysSQL())
	if err != nil {
		return nil, fmt.Errorf("model: read the touched keys: %w", err)
	}
	defer rows.Close()
	b := array.NewRecordBuilder(mem, arrow.NewSchema([]arrow.Field{{Name: KeyColumn, Type: arrow.BinaryTypes.String, Nullable: true}}, nil))
	defer b.Release()
	kb := b.Field(0).(*array.StringBuilder)
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("model: read the touched keys: %w", err)
		}
		kb.Append(k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("model: read the touched keys: %w", err)
	}
	return b.NewRecordBatch(), nil
}

// Cond is true for a source row (columns as "s") whose key a change
// touched, NULL equal to NULL; an index on the key serves it.
func (d *Delta) Cond(s *Spec) string {
	exprs := make([]string, len(s.Key))
	ks := make([]string, len(s.Key))
	eq := make([]string, len(s.Key))
	for i, k := range s.Key {
		exprs[i] = "s." + ident(k)
		ks[i] = "a.k" + strconv.Itoa(i)
		eq[i] = ks[i] + " IS NOT DISTINCT FROM " + exprs[i]
	}
	in := "(" + strings.Join(exprs, ", ") + ") IN (SELECT " + strings.Join(ks, ", ") + " FROM " + d.table + " a)"
	if !d.hasNull {
		return in
	}
	return "(" + in + " OR EXISTS (SELECT 1 FROM " + d.table + " a WHERE " + strings.Join(eq, " AND ") + "))"
}

// keyColumns returns the key columns (as "s") and their types.
func keyColumns(s *Spec, src Source) (exprs, types []string, err error) {
	for _, k := range s.Key {
		j := slices.IndexFunc(src.Columns, func(c Column) bool { return c.Name == k })
		if j < 0 {
			return nil, nil, fmt.Errorf("%w: model %q has key column %q, which source %q does not have", ErrInvalid, s.Output, k, s.Source)
		}
		exprs, types = append(exprs, "s."+ident(k)), append(types, src.Columns[j].Type)
	}
	return exprs, types, nil
}

func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
