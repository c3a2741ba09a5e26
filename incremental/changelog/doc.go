// Package changelog records what changed in a source — a plain Postgres
// table tracked by triggers, or a row-store dataset whose writers record
// their changes — and reads it back in windows between two snapshots, so
// that a run recomputes only what its sources' changes touch.
//
// # The log
//
// Migration 011 of package ledger creates its tables in the control-plane
// schema. change_log holds the change images:
//
//   - source: the source id;
//   - xid (xid8, default pg_current_xact_id()): the 64-bit id of the
//     transaction that wrote the image;
//   - op ("char"): 'I' a new image (a row inserted, or the new version of an
//     updated row), 'D' an old image (a row deleted, or the old version of
//     an updated row), 'F' everything may have changed (a TRUNCATE, a full
//     rewrite, a write too big to record row by row; image NULL);
//   - image (jsonb): an object keyed by column name. For a row-store
//     dataset, the row's dataset_rows.data exactly as stored; read a value
//     back as (image->>'col')::<declared type>.
//   - vals (text[]): the compact form the triggers of a tracked table write,
//     op 'n' (new images) or 'o' (old images) for up to 100,000 images an
//     entry: one row of the two-dimensional array per tracked column, that
//     column's values as text, image by image (triggers installed by
//     earlier versions wrote op 'i' and 'd' entries of up to 1,000 images,
//     one row per image; they are read alike). Window's SQL turns each
//     image into the jsonb image of the tracked columns, each as
//     to_jsonb(value), with op 'I' or 'D': readers never see vals.
//
// change_sources lists the sources that record (installed_xid: the
// transaction that installed the recording; trimmed_below: entries with a
// smaller xid may be gone) and refresh_positions what each output's last
// committed run read of each source (opaque text here; Trim reads the
// positions that are pg_snapshots, optionally prefixed "pg:").
//
// # Windows: never skip, never repeat
//
// A reader opens a REPEATABLE READ transaction and asks [Log.Window] for
// the changes of a source since the position its last run stored. The
// window is every entry whose transaction is visible in the reader's
// snapshot and not visible in since (pg_visible_in_snapshot); its Position
// is the reader's snapshot, which the run stores with [Log.SavePosition] in
// the transaction that commits it. The next window starts there.
//
// A pg_snapshot says exactly which transactions had committed when it was
// taken: those below its xmin, and those below its xmax that are not in its
// in-progress list. A transaction's entries become visible all at once, at
// its commit, and a snapshot taken later sees every transaction an earlier
// one saw. So each committed transaction falls in exactly one window: the
// first whose end snapshot sees it. A transaction in flight at a read is in
// that snapshot's in-progress list (or at or above its xmax): not in the
// window read then, not excluded by the next window's since, and so in the
// window after its commit — however long it stays open and whatever order
// transactions commit in. Filtering by a range of xids instead would skip
// it: xids are handed out in start order, not commit order. The xid range
// [xmin of since, xmax of the reader's snapshot) only bounds the index scan
// on (source, xid). An aborted transaction's entries are never visible.
// xid8 carries the epoch, so it does not wrap around. Reading the same
// window twice (a run retried after a failure) gives the same images.
// Read on the primary: a standby's snapshots are not comparable with it.
//
// A window is not Known, and the run reads the source whole, when: there is
// no earlier position; the source does not record; its recording was
// installed (or re-installed with other columns) after since; the log was
// trimmed past since; a tracked column was dropped, renamed, re-added or
// retyped, or the triggers were removed or disabled; or the window holds an
// 'F'. Window.Position is set in every case: after a full run the next
// window starts there.
//
// # Tracked tables
//
// [Log.Track] installs, in one transaction, a function in the control-plane
// schema and four triggers on the table: statement-level AFTER INSERT,
// UPDATE and DELETE triggers with transition tables that record one image
// per row (an UPDATE records the old image as 'D' and the new one as 'I',
// whatever columns it changed: the output may depend on the untracked
// ones), and an AFTER TRUNCATE trigger recording an 'F'. No wal_level
// change and no replication slot. Run by the table's owner, Track makes the
// triggers fire always (ENABLE ALWAYS TRIGGER), so writes made with
// session_replication_role = replica (a logical replication subscriber
// applying changes, a bulk load skipping foreign key checks) are recorded
// too; with only the TRIGGER privilege they keep the default, and such
// writes are not recorded. Writes made while the triggers were disabled
// (ALTER TABLE ... DISABLE TRIGGER) are not recorded either: a position
// holds the state of the triggers' catalog rows, and the window across a
// DISABLE and ENABLE is unknown. CREATE TRIGGER waits for the transactions
// writing the table and blocks new ones until Track commits, so every write
// made without the triggers is visible in any snapshot that sees the
// installation: that is why a position that does not see installed_xid is
// unknown, and one that does is exact.
//
// The trigger function reads the tracked columns by name, after checking
// (one catalog lookup per statement) that they are all still there: after
// an ALTER TABLE that dropped or renamed one it records an 'F' instead, so
// the user's statements never fail, and the window is unknown anyway (the
// tracked columns' attnum, name and type are compared at each Window);
// adding or altering other columns changes nothing. A rewrite of the table
// (ALTER TABLE ... TYPE with or without USING, VACUUM FULL, CLUSTER)
// changes its rows without firing a trigger: the position of a tracked
// table holds the table's file node (pg_relation_filenode), which a rewrite
// changes, and the window across a rewrite is unknown (ReasonRewritten;
// VACUUM FULL and CLUSTER then cost one full run). The function pins the
// settings that shape a value's text (DateStyle, IntervalStyle,
// extra_float_digits, bytea_output), so a reader in any session parses it
// back to the same value. Writes that fire no trigger are not recorded:
// session_replication_role = replica (logical replication's apply,
// pg_restore --disable-triggers) or triggers disabled for a while and
// enabled again; do not track a table written that way. A partitioned
// table's statement triggers do not fire for writes made directly to a
// partition, so Track refuses one.
//
// # Row-store datasets
//
// A writer of a row-store dataset records its changes itself, in the
// transaction of the write, with plain INSERTs into [Log.Table] (xid takes
// its default): op 'I' with the data of each row it inserts, 'D' with the
// data of each row it deletes or replaces, or one 'F' (image NULL) for a
// write it does not record row by row. [Log.RegisterSource] records the
// dataset as a source. From then on every write of the dataset must record:
// a write already running when the registration commits does not see the
// registration, so a writer that records only when it sees one can miss
// changes; record always, or serialize the decision with the registration.
//
// # Trimming
//
// [Log.Trim] deletes, per source, the entries below the smallest xmin of
// its consumers' stored positions (every transaction below a snapshot's
// xmin is visible in it, so no consumer needs them). It is bounded:
// entries older than TrimOptions.MaxAge or beyond MaxRows per source go
// even when a consumer still needs them. Before deleting, Trim raises the
// source's trimmed_below past them and records the snapshot it did that
// in, in its own committed statement, and deletes only entries visible in
// that snapshot; a consumer whose position does not see one of the
// entries that may be gone (below trimmed_below and visible in the trim's
// snapshot) reads the source whole once. The bound is raised for every
// deletion, so a consumer whose first position was taken before a trim and
// stored after it is caught too, and a position taken after the trim is
// never behind it, however old the cluster's oldest running transaction. A source without a consumer keeps what the bounds allow.
// Entries of sources no longer registered are deleted. Deletes run in
// batches of BatchSize rows, each its own statement; readers see the log
// through their snapshot, so Trim is safe alongside writers, readers and
// another Trim. TrimOptions.Sources trims only the named sources; a Trim
// with no age bound (MaxAge < 0) records no mark. A consumer's position
// may be stored after a word of its own and a space (a model stores its
// run's transaction id there): Trim reads the position after the last
// space.
//
// The writestrategy Dispatcher trims, after a run that read a source's
// log committed, what every consumer has read (no bound: nobody is put
// behind), at most once a minute per source; the bounds (an age, a row
// count, for a consumer that stopped running) are for a scheduled Trim.
//
// # Privileges
//
// Track and Untrack need the TRIGGER privilege on the table and, in the
// control-plane schema, CREATE and the right to write change_sources and
// change_log. The function is SECURITY DEFINER with a pinned search_path,
// owned by whoever ran Track: the table's writers need no right on the
// control-plane schema. Re-tracking and Untrack drop the function with
// CASCADE, which removes its triggers without owning the table. A reader
// needs SELECT on change_log and change_sources and to write
// refresh_positions; Trim to delete from change_log, update change_sources
// and write change_log_marks.
//
// # Overhead
//
// Per statement that writes a tracked table: one PL/pgSQL call (with its
// pinned settings), one catalog lookup and one INSERT ... SELECT over the
// transition tables, which counts the statement's rows in the pass that
// aggregates them (a statement of no row, or of more rows than an entry
// holds, runs a second one). Per row: the tracked values' text output,
// appended to one array per column. Per statement of up to 100,000 rows
// (an UPDATE: per old and per new images): one change_log tuple and one
// index entry (and their WAL), its array compressed out of line with lz4
// (pglz on a server built without lz4); a statement of more rows is cut
// into entries of 100,000, which costs numbering its rows. The jsonb
// images are built when a window is read, for the window's rows only.
// BenchmarkTrackingOverhead
// (and internal/trackoverhead for programs) measures tracked / untracked
// time of the same inserts and updates. On a 2-core machine: statements of
// 1,000 rows 1.2-1.5x; statements of one row each, sent on their own round
// trip and committed on their own, 1.69x for inserts (95 us untracked, 160
// us tracked per statement) and 2.23x for updates, where a row-level
// trigger that only inserts each row's values into the log costs 1.19x and
// 1.72x.
package changelog
