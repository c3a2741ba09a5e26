package refresh

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/incremental/changelog"
	"github.com/lakewrite/lakewrite/sink"
)

// planSource is the refresh_positions entry holding the hash of an
// output's statement and declaration at its last run (not a dataset id:
// ids cannot hold a control character).
const planSource = "\x01plan"

// txnSource is the refresh_positions entry holding the ledger transaction
// id of the run that saved the positions: they hold for the output's next
// run only while that run is the output's last committed write.
const txnSource = "\x01txn"

// Source is what a run knows of one source before reading its changes.
type Source struct {
	ID       string
	Sink     sink.Sink // where it lives (sink.Relation for a relation)
	Relation string    // the relation of a registered relation
	Rows     int64     // recorded rows
	Cols     []Col     // the columns mapped to the key, typed; nil when unmapped
	// Snapshot is the snapshot of an Iceberg source the run reads (the
	// one its last committed write made; 0: none).
	Snapshot int64
}

// IcebergWindow is what a run reads of an Iceberg source that changed
// since its last run: the changes after snapshot From up to To.
type IcebergWindow struct{ From, To int64 }

// Run is a run of a declared output, in its transaction (REPEATABLE READ:
// the change log and the sources are read in one snapshot).
type Run struct {
	Log     *changelog.Log
	Output  string
	Dep     *incremental.Dependency
	Facts   incremental.RefreshFacts
	Report  incremental.RefreshReport
	Windows map[string]changelog.Window
	Cols    map[string][]Col // mapped sources' key columns
	Kinds   map[string]sink.Sink
	// Save are the positions to store with the run, by source id.
	Save    map[string]string
	plan    string
	HasNull bool
	// KeyTypes are the types of Table's columns, once Decide made it.
	KeyTypes []string
	// Iceberg are the windows of the Iceberg sources whose changes the
	// caller reads (SetIcebergChanges, IcebergUnknown) before Decide.
	Iceberg map[string]IcebergWindow
	iceKeys map[string]string
	facts   map[string]int
}

// Incremental reports whether the run recomputes only the affected keys.
func (r *Run) Incremental() bool {
	return r != nil && r.Report.Mode == incremental.RefreshIncremental
}

// Gather reads, in tx, the stored positions of output and the change-log
// window of each source read from Postgres. ctl is the quoted
// control-plane schema; sinkTo the sink written, previous that of the last
// committed run.
func Gather(ctx context.Context, tx pgx.Tx, log *changelog.Log, ctl, output string, dep *incremental.Dependency, sinkTo, previous sink.Sink, srcs []Source) (*Run, error) {
	r := &Run{Log: log, Output: output, Dep: dep, Windows: map[string]changelog.Window{}, Cols: map[string][]Col{},
		Kinds: map[string]sink.Sink{}, Save: map[string]string{}, Iceberg: map[string]IcebergWindow{}, iceKeys: map[string]string{},
		facts: map[string]int{}}
	r.Facts = incremental.RefreshFacts{Declared: true, Sink: sinkTo, Previous: previous, MaxShare: dep.MaxShare}
	positions, err := log.Positions(ctx, tx, output)
	if err != nil {
		return nil, err
	}
	r.plan = positions[planSource]
	if previous != "" {
		var last string
		if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT id::text FROM `+ctl+`.pipeline_build_transactions
			WHERE dataset_id = $1 AND status = 'committed' AND write_mode <> 'maintenance'
			ORDER BY committed_at DESC, ended_at DESC NULLS LAST LIMIT 1), '')`, output).Scan(&last); err != nil {
			return nil, fmt.Errorf("refresh: read the output's last write: %w", err)
		}
		if last != positions[txnSource] {
			r.Facts.Altered = "the output's last committed write is not a run of its declaration that saved its positions (another write of it since)"
		}
	}
	for _, s := range srcs {
		if s.Cols != nil {
			r.Cols[s.ID] = s.Cols
		}
		r.Kinds[s.ID] = s.Sink
		f := incremental.RefreshSource{ID: s.ID, Mapped: s.Cols != nil, Rows: s.Rows}
		if s.Sink == sink.Iceberg {
			r.Save[s.ID] = PositionIceberg + strconv.FormatInt(s.Snapshot, 10)
			from, err := strconv.ParseInt(strings.TrimPrefix(positions[s.ID], PositionIceberg), 10, 64)
			switch {
			case s.Snapshot == 0:
				f.Reason = "the source's last committed write is not an Iceberg snapshot"
			case !strings.HasPrefix(positions[s.ID], PositionIceberg) || err != nil:
				f.Reason = "no earlier position"
			case from == s.Snapshot:
				f.Known = true
			default:
				f.Known = true
				r.Iceberg[s.ID] = IcebergWindow{From: from, To: s.Snapshot}
			}
			r.facts[s.ID] = len(r.Facts.Sources)
			r.Facts.Sources = append(r.Facts.Sources, f)
			continue
		}
		since := positions[s.ID]
		if !strings.HasPrefix(since, PositionPG) {
			since = ""
		}
		w, err := log.Window(ctx, tx, s.ID, changelog.Position(since))
		if err != nil {
			return nil, err
		}
		if w.Known {
			names := make([]string, len(s.Cols))
			for i, c := range s.Cols {
				names[i] = c.Name
			}
			if missing := w.Missing(names); len(missing) > 0 {
				w.Known, w.Images, w.Reason = false, 0, fmt.Sprintf("the change tracking of %q does not record %s, which the declaration maps to the key: track it (Dispatcher.Track)",
					s.ID, strings.Join(missing, ", "))
			}
		}
		f.Known, f.Reason, f.Changes = w.Known, w.Reason, w.Images
		r.Windows[s.ID] = w
		store := true
		switch {
		case s.Sink == sink.Relation:
			if f.Rows, err = relationRows(ctx, tx, s.Relation, w.Images, dep.Share()); err != nil {
				return nil, err
			}
		case !w.Known:
			// A writer that opened its intent before the source was
			// registered may not record its changes: a position is stored
			// only when none of the source's intents is open.
			if err := tx.QueryRow(ctx, `SELECT NOT EXISTS (SELECT 1 FROM `+ctl+`.pipeline_build_transactions WHERE dataset_id = $1 AND status = 'open')`,
				s.ID).Scan(&store); err != nil {
				return nil, fmt.Errorf("refresh: read open intents: %w", err)
			}
		}
		if store {
			r.Save[s.ID] = PositionPG + string(w.Position)
		}
		r.Facts.Sources = append(r.Facts.Sources, f)
	}
	return r, nil
}

// SetIcebergChanges records the changes read of Iceberg source id: rows
// images, whose key values keysSQL selects (in the key's order).
func (r *Run) SetIcebergChanges(id string, rows int64, keysSQL string) {
	r.Facts.Sources[r.facts[id]].Changes = rows
	if rows > 0 {
		r.iceKeys[id] = keysSQL
	}
}

// KeysOnlyFrom reports whether every affected key of the run comes from
// the changes of source id: no other source changed.
func (r *Run) KeysOnlyFrom(id string) bool {
	for sid, w := range r.Windows {
		if sid != id && w.Images > 0 {
			return false
		}
	}
	for sid := range r.iceKeys {
		if sid != id {
			return false
		}
	}
	return true
}

// IcebergUnknown records that the changes of Iceberg source id cannot be
// read (why): the run is full.
func (r *Run) IcebergUnknown(id, why string) {
	f := &r.Facts.Sources[r.facts[id]]
	f.Known, f.Reason = false, why
}

// SnapshotsSQL reads, for the datasets $1 (ids), the snapshot of each
// one's last committed write on Iceberg ($2: the Iceberg sink's name): the
// snapshot a refresh reads of an Iceberg source, as of the run's
// transaction. A maintenance run (compaction, expiry) records no snapshot:
// the write before it is the position, and the next window reads the
// compaction's rewrite as a change of no row.
func SnapshotsSQL(ctl string) string {
	return `SELECT DISTINCT ON (dataset_id) dataset_id, CASE WHEN sink = $2 THEN coalesce(snapshot_id, 0) ELSE 0 END
		FROM ` + ctl + `.pipeline_build_transactions WHERE dataset_id = ANY($1) AND status = 'committed'
		AND (snapshot_id IS NOT NULL OR write_mode <> 'maintenance')
		ORDER BY dataset_id, committed_at DESC, ended_at DESC NULLS LAST`
}

// relationRows estimates a table's rows for the change share of images
// changes (limit: the declaration's share), as the planner does: the
// rows per page of its last VACUUM or ANALYZE times the pages it has now,
// so that an estimate made when the table was smaller follows its
// growth. When that says the share is exceeded, or there is no estimate
// (never analyzed, or analyzed when empty and filled since), it counts
// the rows up to the number the share needs, images/limit: the estimate
// of a stale statistic never makes a run full, and the count reads a few
// thousand rows for a thousand changes, never more than a full run reads.
func relationRows(ctx context.Context, tx pgx.Tx, rel string, images int64, limit float64) (int64, error) {
	var n int64
	if err := tx.QueryRow(ctx, `SELECT CASE WHEN c.reltuples < 0 THEN -1
			WHEN c.relpages = 0 THEN CASE WHEN pg_catalog.pg_relation_size(c.oid) = 0 THEN 0 ELSE -1 END
			ELSE round(c.reltuples / c.relpages * (pg_catalog.pg_relation_size(c.oid) / pg_catalog.current_setting('block_size')::pg_catalog.int8))
			END::pg_catalog.int8
		FROM pg_catalog.pg_class c WHERE c.oid = pg_catalog.to_regclass($1)`, rel).Scan(&n); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return -1, nil
		}
		return 0, fmt.Errorf("refresh: read relation size: %w", err)
	}
	if images <= 0 || limit <= 0 {
		return n, nil
	}
	need := int64(math.Ceil(float64(images) / limit))
	if n >= need {
		return n, nil
	}
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT FROM `+rel+` LIMIT $1) s`, need).Scan(&n); err != nil {
		return 0, fmt.Errorf("refresh: count relation: %w", err)
	}
	return n, nil
}

// hydrated matches the name of a temporary table a run reads an Iceberg
// dataset into.
var hydrated = regexp.MustCompile(`lw_native_[0-9]+_[0-9a-f]+`)

// PlanHash identifies an output's statement and declaration.
func PlanHash(sql string, args []any, dep *incremental.Dependency) string {
	h := sha256.New()
	// The temporary tables an Iceberg source is read into are named anew
	// by each run: their names are not the statement.
	sql = hydrated.ReplaceAllString(sql, "lw_native")
	fmt.Fprintf(h, "%s\x00%v\x00%q\x00", sql, args, dep.Key)
	for _, id := range slices.Sorted(maps.Keys(dep.Sources)) {
		fmt.Fprintf(h, "%q=%q\x00", id, dep.Sources[id])
	}
	return "plan:" + hex.EncodeToString(h.Sum(nil)[:16])
}

// Decide applies incremental.ChooseRefresh once the output's full plan
// (hash: PlanHash) is known, and for an incremental run fills the table of
// affected keys (Table) from the windows' images.
func (r *Run) Decide(ctx context.Context, tx pgx.Tx, hash string) error {
	mode, why := incremental.ChooseRefresh(r.Facts)
	switch {
	case mode == incremental.RefreshIncremental && r.plan != hash:
		mode, why = incremental.RefreshFull, "the output's statement or declaration changed since its last run"
	}
	r.Save[planSource] = hash
	r.Report = incremental.RefreshReport{Mode: mode, Reason: why}
	if mode != incremental.RefreshIncremental {
		return nil
	}
	ids := slices.Sorted(maps.Keys(r.Cols))
	var types []string
	for _, c := range r.Cols[ids[0]] {
		types = append(types, c.Type)
	}
	r.KeyTypes = types
	if _, err := tx.Exec(ctx, CreateSQL(types)); err != nil {
		return fmt.Errorf("refresh: create affected keys: %w", err)
	}
	// The keys' inserts, their count and the table's statistics in one
	// round trip.
	b := &pgx.Batch{}
	what := []string{}
	for _, id := range ids {
		if w := r.Windows[id]; w.Images > 0 {
			names := make([]string, len(r.Cols[id]))
			for i, c := range r.Cols[id] {
				names[i] = c.Name
			}
			b.Queue(InsertSQL(r.Cols[id], w.ValuesSQL(names)), w.Args...)
			what = append(what, fmt.Sprintf("read affected keys of %q", id))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(r.iceKeys)) {
		b.Queue("INSERT INTO " + Table + " " + r.iceKeys[id])
		what = append(what, fmt.Sprintf("read affected keys of %q", id))
	}
	b.Queue(CountSQL(len(types)))
	b.Queue("ANALYZE " + Table)
	// The keyed reads fetch a few rows through an index, but the planner
	// cannot know how many keys the affected-key table holds: on a large
	// source it plans a parallel scan and JIT-compiles it, which costs
	// 130-180 ms on a 3-5M-row row store for no key at all (0.3 ms
	// without); the run's remaining statements are keyed too.
	b.Queue(`SELECT pg_catalog.set_config('max_parallel_workers_per_gather', '0', true), pg_catalog.set_config('jit', 'off', true)`)
	br := tx.SendBatch(ctx, b)
	fail := func(what string, err error) error {
		_ = br.Close()
		return fmt.Errorf("refresh: %s: %w", what, err)
	}
	for _, w := range what {
		if _, err := br.Exec(); err != nil {
			return fail(w, err)
		}
	}
	if err := br.QueryRow().Scan(&r.Report.Keys, &r.HasNull); err != nil {
		return fail("count affected keys", err)
	}
	if _, err := br.Exec(); err != nil {
		return fail("analyze affected keys", err)
	}
	if _, err := br.Exec(); err != nil {
		return fail("plan the keyed reads", err)
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("refresh: affected keys: %w", err)
	}
	return nil
}

// SetTxn records txn, the ledger transaction id of the run's write of
// the output, among the positions SavePositions stores.
func (r *Run) SetTxn(txn string) {
	if r != nil {
		r.Save[txnSource] = txn
	}
}

// SavePositions stores, in tx (the transaction that commits the run), what
// the run read of each source, its plan hash and its transaction id
// (SetTxn).
func (r *Run) SavePositions(ctx context.Context, tx pgx.Tx) error {
	if r == nil {
		return nil
	}
	return r.Log.SavePositions(ctx, tx, r.Output, r.Save)
}

// RegisterSQL registers the row-store datasets among $1 (ids) as change
// sources ($2: the row store's sink name) that are not yet.
func RegisterSQL(ctl string) string {
	return `INSERT INTO ` + ctl + `.change_sources (source, installed_xid)
		SELECT id, pg_current_xact_id() FROM ` + ctl + `.datasets d WHERE id = ANY($1) AND coalesce(sink, $2) = $2
		AND NOT EXISTS (SELECT 1 FROM ` + ctl + `.change_sources c WHERE c.source = d.id)
		ON CONFLICT (source) DO NOTHING`
}

// BuildIndexes builds, concurrently, the row store's key indexes of
// datasets (by id) in schema, replacing an invalid one; it returns the
// first error after trying every one.
func BuildIndexes(ctx context.Context, exec func(context.Context, string) error, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, schema string, datasets map[string][]Col) error {
	ctl := pgx.Identifier{schema}.Sanitize()
	var first error
	for _, id := range slices.Sorted(maps.Keys(datasets)) {
		cols := datasets[id]
		name := IndexName(id, cols)
		exists, valid, err := IndexState(ctx, q, schema, name)
		if err == nil && exists && !valid {
			err = exec(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+ctl+"."+pgx.Identifier{name}.Sanitize())
		}
		if err == nil {
			err = exec(ctx, IndexSQL(ctl+".dataset_rows", id, cols))
		}
		if err != nil && first == nil {
			first = fmt.Errorf("refresh: index %s of %q: %w", name, id, err)
		}
	}
	return first
}

// KeyedSQL is the statement of a keyed write of an output into the row
// store (rows, schema-qualified): o holds the recomputed rows (data: their
// encoding, from: the recompute), cond restricts the output's rows (alias
// d) to the affected keys; ds, txn and prev are the parameters of the
// output's id, its transaction id and its recorded rows. Rows exactly
// equal to a recomputed one (counted with their repeats) stay in place;
// the others of the affected keys are deleted, the new ones appended, and
// the images recorded (ImagesCTE). It returns the rows inserted and
// deleted. The rows to delete are found by their primary key from an
// array: the planner cannot tell how few rows cond selects, and joined
// it planned a hash join over a scan of the output's every row.
func KeyedSQL(ctl, rows, ds, txn, prev, data, from, cond string) string {
	return "WITH o AS MATERIALIZED (SELECT x.data, x.n, row_number() OVER (PARTITION BY x.data::pg_catalog.text ORDER BY x.n) AS occ FROM (SELECT " +
		data + " AS data, row_number() OVER () AS n FROM " + from + ") x), " +
		"cur AS MATERIALIZED (SELECT d.row_index, d.data, row_number() OVER (PARTITION BY d.data::pg_catalog.text ORDER BY d.row_index) AS occ FROM " +
		rows + " d WHERE d.dataset_id = " + ds + " AND " + cond + "), " +
		"gone AS (SELECT c.row_index FROM cur c WHERE NOT EXISTS (SELECT 1 FROM o WHERE o.data::pg_catalog.text = c.data::pg_catalog.text AND o.occ = c.occ)), " +
		"del AS (DELETE FROM " + rows + " d WHERE d.dataset_id = " + ds + " AND d.row_index = ANY (ARRAY(SELECT g.row_index FROM gone g)) RETURNING d.data), " +
		"ins AS (INSERT INTO " + rows + " (dataset_id, row_index, data, txn_id) SELECT " + ds +
		", (SELECT coalesce(max(row_index), -1) FROM " + rows + " WHERE dataset_id = " + ds + ") + row_number() OVER (ORDER BY o.n), o.data, " + txn +
		"::pg_catalog.uuid FROM o WHERE NOT EXISTS (SELECT 1 FROM cur c WHERE c.data::pg_catalog.text = o.data::pg_catalog.text AND c.occ = o.occ) RETURNING data), " +
		"rec AS (" + ImagesCTE(ctl, ds+"::pg_catalog.text", `SELECT 'D'::"char" AS op, data FROM del UNION ALL SELECT 'I'::"char", data FROM ins`,
		"(SELECT count(*) FROM del) + (SELECT count(*) FROM ins)", prev+"::pg_catalog.int8 - (SELECT count(*) FROM del) + (SELECT count(*) FROM ins)") + ") " +
		"SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM del)"
}
