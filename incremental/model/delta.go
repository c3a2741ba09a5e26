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
	// Iceberg: the source lives on Iceberg; Snapshot is the snapshot of
	// its last committed write (0: none), what the run reads of it.
	Iceberg  bool
	Snapshot int64
}

// Delta is what a run reads of its source: every row, or (Incremental)
// only the rows whose key a change touched since the output's last run.
type Delta struct {
	Incremental bool
	// Reason says why the run scores every row ("" when incremental).
	Reason string
	// Keys is the number of source keys the changes touched (incremental).
	Keys int64
	// Snapshots, when not nil, are the Iceberg snapshots whose changes
	// the caller reads before the run knows its touched keys (see
	// Changes); the run is not yet Incremental.
	Snapshots *Snapshots
	// position is the run's read of the source (a changelog position, or
	// PositionIceberg and a snapshot id); "" stores nothing.
	position changelog.Position
	// table holds the touched keys: k0..kn-1 typed as the key columns,
	// and "key", their KeyColumn text.
	table   string
	hasNull bool
	nkey    int
}

// PositionIceberg prefixes the position of an Iceberg source: the
// snapshot of its last committed write the run read.
const PositionIceberg = "ice:"

// Snapshots are the snapshots of an Iceberg source between which a run
// reads its changes (after From, up to To).
type Snapshots struct{ From, To int64 }

// Changes decides, in tx (REPEATABLE READ: its snapshot is the source's
// read), whether the run of s reads only the source rows changed since
// the output's last run: it does when that run stored its position (see
// Position) and was the output's last write, on this sink, and the
// source's changes since then are known. For a relation or a row-store
// dataset (the change log's window) it then fills a temporary table of
// the touched keys. For an Iceberg source (Facts.Iceberg) whose snapshot
// moved it sets Delta.Snapshots instead: the caller reads the changes
// between them and calls Delta.Touched with their key values, or
// Delta.Full when it cannot read them.
func Changes(ctx context.Context, tx pgx.Tx, log *changelog.Log, s *Spec, src Source, f Facts) (*Delta, error) {
	positions, err := log.Positions(ctx, tx, s.Output)
	if err != nil {
		return nil, err
	}
	txn, since, _ := strings.Cut(positions[s.Source], " ")
	if f.LastTxn == "" || txn != f.LastTxn {
		since = ""
	}
	d := &Delta{}
	var w changelog.Window
	var from int64
	var fromKnown bool
	if f.Iceberg {
		if f.Snapshot != 0 {
			d.position = changelog.Position(PositionIceberg + strconv.FormatInt(f.Snapshot, 10))
		}
		var perr error
		from, perr = strconv.ParseInt(strings.TrimPrefix(since, PositionIceberg), 10, 64)
		fromKnown = perr == nil && strings.HasPrefix(since, PositionIceberg)
	} else {
		if strings.HasPrefix(since, PositionIceberg) { // the source was on Iceberg then
			since = ""
		}
		if w, err = log.Window(ctx, tx, s.Source, changelog.Position(since)); err != nil {
			return nil, err
		}
		if missing := w.Missing(s.Key); w.Known && len(missing) > 0 {
			w.Known, w.Images, w.Reason = false, 0, fmt.Sprintf("the change tracking of %q does not record the key's %s: track it", s.Source, strings.Join(missing, ", "))
		}
		d.position = w.Position
	}
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
	case f.Iceberg && f.Snapshot == 0:
		d.Reason = "the source's last committed write is not an Iceberg snapshot"
	case f.Iceberg && !fromKnown:
		d.Reason = "no earlier position on Iceberg"
	case !f.Iceberg && !w.Known:
		d.Reason = w.Reason
	}
	if !f.Iceberg && !w.Known && f.RowStore {
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
	if f.Iceberg && from != f.Snapshot {
		d.Snapshots = &Snapshots{From: from, To: f.Snapshot}
		return d, nil
	}
	_, types, err := keyColumns(s, src)
	if err != nil {
		return nil, err
	}
	sel := make([]string, len(s.Key))
	for i, k := range s.Key {
		sel[i] = "(w.image ->> " + literal(k) + ")::" + types[i]
	}
	switch {
	case f.Iceberg || w.Images == 0: // nothing changed
		err = d.fill(ctx, tx, s, types, sel, "(SELECT NULL::pg_catalog.jsonb AS image) w WHERE false", nil)
	default:
		err = d.fill(ctx, tx, s, types, sel, "("+w.SQL+") w WHERE w.op IN ('I', 'D')", w.Args)
	}
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Touched fills the touched keys of a run whose Iceberg source's changes
// (Delta.Snapshots) the caller read: rows is a parenthesized subquery of
// the change images (old and new), holding the key columns by name,
// typed as the source's. Changes that touch at least sourceRows keys (the
// source's recorded rows, when known) make the run score every row:
// a full replace of the source.
func (d *Delta) Touched(ctx context.Context, tx pgx.Tx, s *Spec, src Source, rows string, sourceRows int64) error {
	_, types, err := keyColumns(s, src)
	if err != nil {
		return err
	}
	sel := make([]string, len(s.Key))
	for i, k := range s.Key {
		sel[i] = "w." + ident(k) + "::" + types[i]
	}
	d.Snapshots = nil
	if err := d.fill(ctx, tx, s, types, sel, rows+" w", nil); err != nil {
		return err
	}
	if sourceRows > 0 && d.Keys >= sourceRows {
		d.Full("the changes touch every row of the source")
	}
	return nil
}

// Full makes d a run that scores every row, for reason (changes the
// caller could not read).
func (d *Delta) Full(reason string) {
	d.Incremental, d.Reason, d.Keys, d.Snapshots = false, reason, 0, nil
}

// KeyValues returns the distinct values of a one-column key among the
// touched keys, as pgx reads them; ok is false for a key of several
// columns.
func (d *Delta) KeyValues(ctx context.Context, tx pgx.Tx) (vals []any, ok bool, err error) {
	if !d.Incremental || d.nkey != 1 {
		return nil, false, nil
	}
	rows, err := tx.Query(ctx, "SELECT DISTINCT k0 FROM "+d.table)
	if err != nil {
		return nil, false, fmt.Errorf("model: read the touched keys: %w", err)
	}
	vals, err = pgx.CollectRows(rows, pgx.RowTo[any])
	if err != nil {
		return nil, false, fmt.Errorf("model: read the touched keys: %w", err)
	}
	return vals, true, nil
}

// fill creates the temporary table of the touched keys: the distinct
// values of sel (one expression per key column, typed as types) over
// from (a FROM clause body, parameters args), and makes d incremental.
func (d *Delta) fill(ctx context.Context, tx pgx.Tx, s *Spec, types, sel []string, from string, args []any) error {
	d.Incremental, d.nkey, d.table = true, len(s.Key), tempName("keys")
	ks := make([]string, len(s.Key))
	for i := range s.Key {
		ks[i] = "k" + strconv.Itoa(i)
		sel[i] += " AS " + ks[i]
	}
	keySQL, err := KeySQL(ks, types)
	if err != nil {
		return err
	}
	create := "CREATE TEMP TABLE " + d.table + " ON COMMIT DROP AS SELECT *, " + keySQL + " AS key FROM (SELECT DISTINCT " + strings.Join(sel, ", ") +
		" FROM " + from + ") k"
	if _, err := tx.Exec(ctx, create, args...); err != nil {
		return fmt.Errorf("model %q: read the changed keys: %w", s.Output, err)
	}
	nulls := make([]string, len(ks))
	for i, k := range ks {
		nulls[i] = k + " IS NULL"
	}
	if err := tx.QueryRow(ctx, "SELECT count(*), coalesce(bool_or("+strings.Join(nulls, " OR ")+"), false) FROM "+d.table).Scan(&d.Keys, &d.hasNull); err != nil {
		return fmt.Errorf("model %q: count the changed keys: %w", s.Output, err)
	}
	if _, err := tx.Exec(ctx, "ANALYZE "+d.table); err != nil {
		return fmt.Errorf("model %q: %w", s.Output, err)
	}
	return nil
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
