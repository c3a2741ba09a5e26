package facade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/lakewrite/lakewrite/facade/internal/identity"
)

// Lifecycle is the maintenance policy of a dataset's table: how many
// snapshots are kept, when the files they no longer reference are deleted,
// when stray files are removed, and when small files are compacted. The zero
// value is the default policy; each zero field means the default given in
// its comment.
type Lifecycle struct {
	// Disabled turns the lifecycle off for the dataset: Maintain does
	// nothing (Skipped "disabled"), CommitResult.MaintenanceDue stays false,
	// and writes leave the table's lifecycle properties alone.
	Disabled bool
	// KeepLast is how many snapshots of the current branch expiry keeps,
	// the current one always included. Default 10.
	KeepLast int
	// KeepYoungerThan keeps every snapshot younger than this as well.
	// Default 0 (age keeps nothing beyond KeepLast).
	KeepYoungerThan time.Duration
	// FileGrace is how long the files that expiry dereferenced stay on
	// storage after the expiry, for readers still scanning an older
	// snapshot (Scan, hydration, a downstream engine). They are deleted by
	// the first Maintain run after the grace, except those a snapshot
	// still in its grace references (one the table holds, or one expired
	// less than FileGrace ago), which wait for that snapshot's grace.
	// Default 1 minute; a negative value means no grace (the next run
	// deletes them).
	FileGrace time.Duration
	// OrphanAge: the orphan pass removes files under the table location that
	// no retained snapshot, metadata file or pending expiry references and
	// that are older than this (a killed write's data files, metadata files
	// of failed commits, old metadata files). It must exceed the longest
	// write: a write's data files are unreferenced until it commits.
	// Default 1 hour; a negative value turns the orphan pass off.
	OrphanAge time.Duration
	// OrphanEvery is how often the orphan pass runs per table (it lists the
	// table location); the last run is recorded in the table property
	// lakewrite.orphans-checked-at. Default 1 hour; a negative value runs it
	// on every Maintain.
	OrphanEvery time.Duration
	// EveryCommits: expiry runs once this many snapshots are expirable, so
	// maintenance is due about every this many commits
	// (CommitResult.MaintenanceDue) and a table holds at most
	// KeepLast+EveryCommits snapshots (plus young ones). Default 10.
	EveryCommits int
	// MetadataVersions is write.metadata.previous-versions-max: how many
	// previous metadata.json files the table keeps (with
	// write.metadata.delete-after-commit.enabled=true, older ones are
	// deleted by the commit that drops them from the metadata log).
	// Default 10. The policy owns both properties: writes set them when a
	// table lacks them or holds other values.
	MetadataVersions int
	// CompactMinFiles is the least number of small data files worth
	// compacting in one run. Default 8.
	CompactMinFiles int
	// CompactTargetBytes is the size compaction writes files at; a data
	// file below a quarter of it is small. Default Config.TargetFileSize.
	CompactTargetBytes int64
}

// Lifecycle defaults (see Lifecycle).
const (
	defaultKeepLast         = identity.DefaultKeepLast
	defaultFileGrace        = time.Minute
	defaultOrphanAge        = time.Hour
	defaultOrphanEvery      = time.Hour
	defaultEveryCommits     = identity.DefaultEveryCommits
	defaultMetadataVersions = 10
	defaultCompactMinFiles  = 8
)

// Table properties kept by the lifecycle.
const (
	// tablePropExpired records what expiry dereferenced and is not deleted
	// yet: a JSON array of {"at": unix ms of the expiry, "lists": [manifest
	// list paths of the expired snapshots, relative to the table location
	// when under it]}. It is set in the same commit as the expiry, so the
	// record is atomic with it, and an entry is dropped once its files are
	// deleted (after Lifecycle.FileGrace).
	tablePropExpired = "lakewrite.expired"
	// tablePropOrphansCheckedAt is the time (unix ms) of the last orphan
	// pass; tables the facade creates start with their creation time.
	tablePropOrphansCheckedAt = "lakewrite.orphans-checked-at"
)

// withDefaults returns the policy with every zero field at its default.
func (l Lifecycle) withDefaults(targetFileSize int64) Lifecycle {
	if l.KeepLast <= 0 {
		l.KeepLast = defaultKeepLast
	}
	if l.KeepYoungerThan < 0 {
		l.KeepYoungerThan = 0
	}
	if l.FileGrace == 0 {
		l.FileGrace = defaultFileGrace
	}
	if l.OrphanAge == 0 {
		l.OrphanAge = defaultOrphanAge
	}
	if l.OrphanEvery == 0 {
		l.OrphanEvery = defaultOrphanEvery
	}
	if l.EveryCommits <= 0 {
		l.EveryCommits = defaultEveryCommits
	}
	if l.MetadataVersions <= 0 {
		l.MetadataVersions = defaultMetadataVersions
	}
	if l.CompactMinFiles <= 0 {
		l.CompactMinFiles = defaultCompactMinFiles
	}
	if l.CompactTargetBytes <= 0 {
		l.CompactTargetBytes = targetFileSize
	}
	return l
}

// grace is FileGrace with "none" as 0.
func (l Lifecycle) grace() time.Duration { return max(l.FileGrace, 0) }

// policy returns the resolved policy of a dataset.
func (f *Facade) policy(datasetID string) Lifecycle {
	pol := f.s.Lifecycle
	if f.s.LifecycleFor != nil {
		if p, ok := f.s.LifecycleFor(datasetID); ok {
			pol = p
		}
	}
	return pol.withDefaults(f.s.TargetFileSize)
}

// MaintenanceReport is what one Maintain run did. It marshals to JSON (the
// ledger stores it).
type MaintenanceReport struct {
	DatasetID string        `json:"dataset_id"`
	StartedAt time.Time     `json:"started_at"`
	Duration  time.Duration `json:"duration_ns"`
	// SnapshotsExpired by this run.
	SnapshotsExpired int `json:"snapshots_expired"`
	// FilesDeleted / BytesDeleted: files dereferenced by earlier expiries
	// and deleted after their grace (data files, manifests, manifest
	// lists). BytesDeleted includes the orphans' bytes.
	FilesDeleted int   `json:"files_deleted"`
	BytesDeleted int64 `json:"bytes_deleted"`
	// OrphansDeleted by the orphan pass.
	OrphansDeleted int `json:"orphans_deleted"`
	// Compaction: small data files rewritten, files written, bytes read.
	CompactedFiles int   `json:"compacted_files"`
	WrittenFiles   int   `json:"written_files"`
	CompactedBytes int64 `json:"compacted_bytes"`
	// CompactedRows: rows rewritten by compaction.
	CompactedRows int64 `json:"compacted_rows"`
	// SnapshotID of the compaction's snapshot, 0 if none.
	SnapshotID int64 `json:"snapshot_id,omitempty"`
	// Skipped says why nothing ran (e.g. "disabled", "no table").
	Skipped string `json:"skipped,omitempty"`
}

// Maintainer runs table maintenance. *Facade and facadetest.Lakehouse
// implement it; a caller holding a Lakehouse finds it by type assertion.
type Maintainer interface {
	// Maintain runs the lifecycle policy of the dataset once.
	Maintain(ctx context.Context, datasetID string) (MaintenanceReport, error)
}

var _ Maintainer = (*Facade)(nil)

// Maintain runs the dataset's lifecycle policy (Config.LifecycleFor, else
// Config.Lifecycle; zero fields take the defaults) once. In order: the
// lifecycle table properties are set when missing; small files are
// compacted; the files of earlier expiries whose grace has passed are
// deleted (those no retained snapshot references); the orphan pass runs
// when due; snapshots beyond the policy are expired (never the current
// one) and what they dereferenced is recorded in the table property lakewrite.expired.
// Properties, expiry and record land in one commit.
//
// Deletion never removes a file that a snapshot still in its grace (one
// the table holds, or one of an expiry whose FileGrace has not passed) may
// read. A file of an expired snapshot that is already gone counts as
// deleted. A file that cannot be read otherwise deletes nothing it could
// keep in use: the expiries concerned stay recorded for a later run (and
// the orphan pass waits when the files in use are not known), the rest of
// the run, expiry included, still commits, and Maintain then returns the
// error. So no file stops the lifecycle for good.
//
// Run it under the dataset's ledger intent (as writestrategy does): it
// commits to the table, and recovery relies on no other lakewrite commit
// landing while an intent is open. A dataset without a table is skipped.
// The report is returned with the error too, counting what was done.
func (f *Facade) Maintain(ctx context.Context, datasetID string) (MaintenanceReport, error) {
	if _, err := f.s.Naming(datasetID); err != nil {
		return MaintenanceReport{DatasetID: datasetID}, err
	}
	return f.maintain(ctx, datasetID, f.policy(datasetID))
}

// MaintainWith is Maintain with policy instead of the configured one (its
// zero fields take the defaults), for a one-off run such as a test's or an
// operator's.
func (f *Facade) MaintainWith(ctx context.Context, datasetID string, policy Lifecycle) (MaintenanceReport, error) {
	if _, err := f.s.Naming(datasetID); err != nil {
		return MaintenanceReport{DatasetID: datasetID}, err
	}
	return f.maintain(ctx, datasetID, policy.withDefaults(f.s.TargetFileSize))
}

func (f *Facade) maintain(ctx context.Context, datasetID string, pol Lifecycle) (rep MaintenanceReport, err error) {
	start := f.s.now()
	rep = MaintenanceReport{DatasetID: datasetID, StartedAt: start.UTC()}
	defer func() {
		rep.Duration = f.s.now().Sub(start)
		attrs := []any{"dataset", datasetID, "duration", rep.Duration,
			"snapshots_expired", rep.SnapshotsExpired, "files_deleted", rep.FilesDeleted,
			"bytes_deleted", rep.BytesDeleted, "orphans_deleted", rep.OrphansDeleted,
			"compacted_files", rep.CompactedFiles, "written_files", rep.WrittenFiles,
			"compacted_bytes", rep.CompactedBytes, "compacted_rows", rep.CompactedRows, "snapshot_id", rep.SnapshotID, "skipped", rep.Skipped}
		if err != nil {
			attrs = append(attrs, "err", err)
		}
		f.s.Logger.Info("facade: maintenance", attrs...)
	}()
	if pol.Disabled {
		rep.Skipped = "disabled"
		return rep, nil
	}
	ident, err := f.s.Naming(datasetID)
	if err != nil {
		return rep, err
	}
	tbl, err := f.load(ctx, datasetID, ident)
	if errors.Is(err, ErrTableNotFound) {
		rep.Skipped = "no table"
		return rep, nil
	}
	if err != nil {
		return rep, err
	}

	// Compaction commits its own snapshot; everything below continues from
	// the table it returns.
	compacted, crep, err := f.compact(ctx, tbl, compactOptions{MinFiles: pol.CompactMinFiles, TargetBytes: pol.CompactTargetBytes})
	rep.CompactedFiles, rep.WrittenFiles, rep.CompactedBytes, rep.CompactedRows, rep.SnapshotID =
		crep.CompactedFiles, crep.WrittenFiles, crep.CompactedBytes, crep.CompactedRows, crep.SnapshotID
	if err != nil {
		return rep, err
	}
	tbl = compacted

	now := f.s.now()
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return rep, fmt.Errorf("facade: maintain %q: %w", datasetID, err)
	}
	loc := tbl.Location()
	record, err := parseExpired(tbl.Properties()[tablePropExpired])
	if err != nil {
		return rep, fmt.Errorf("facade: maintain %q: table property %s: %w", datasetID, tablePropExpired, err)
	}
	var due, pending []expiredEntry
	for _, e := range record {
		if !now.Before(time.UnixMilli(e.At).Add(pol.grace())) {
			due = append(due, e)
		} else {
			pending = append(pending, e)
		}
	}
	props := lifecycleProps(tbl.Properties(), pol, now)

	// Files of due expiries, and the orphan pass, are judged against every
	// snapshot the table holds now (a superset of what this run's expiry
	// keeps) and every snapshot of the expiries still in their grace, so
	// nothing a reader of a snapshot in its grace may read is deleted. When
	// that set cannot be read, nothing is deleted: the due expiries stay
	// recorded, the orphan pass waits, and the expiry below still commits,
	// so a file that cannot be read never stops the lifecycle for good.
	// Maintain returns the error after the commit.
	var (
		retained *retainedSet
		kept     = map[int]bool{} // indices into due that stay recorded
		later    error            // returned after the commit
	)
	orphansDue := orphanPassDue(tbl.Properties(), pol, now)
	if len(due) > 0 || orphansDue {
		if retained, err = readRetained(tbl, fsys, loc, pending); err != nil {
			later = fmt.Errorf("files referenced by snapshots in their grace: %w", err)
			for i := range due {
				kept[i] = true
			}
		}
	}
	if len(due) > 0 && retained != nil {
		n, b, failed, err := deleteExpired(fsys, loc, due, retained)
		rep.FilesDeleted += n
		rep.BytesDeleted += b
		kept = failed
		if err != nil {
			later = errors.Join(later, fmt.Errorf("delete expired files: %w", err))
		}
	}
	if orphansDue && retained != nil {
		n, b, err := f.orphanPass(ctx, tbl, fsys, loc, pending, retained, pol)
		rep.OrphansDeleted += n
		rep.BytesDeleted += b
		if err != nil {
			later = errors.Join(later, fmt.Errorf("orphan pass: %w", err))
		} else {
			props[tablePropOrphansCheckedAt] = strconv.FormatInt(now.UnixMilli(), 10)
		}
	}
	// The record keeps its order: the due entries that stay, then the
	// pending ones.
	var keep []expiredEntry
	for i, e := range due {
		if kept[i] {
			keep = append(keep, e)
		}
	}
	pending = append(keep, pending...)

	obs := &observedCatalog{Catalog: f.cat}
	t := table.New(ident, tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, obs)
	txn := t.NewTransaction()
	// Fail rather than replay if anything committed since tbl was read.
	if err := txn.AssertRefSnapshotID(""); err != nil {
		return rep, fmt.Errorf("facade: maintain %q: %w", datasetID, err)
	}
	// Expiry runs in batches of EveryCommits snapshots, so a run that only
	// deletes the files of the previous expiry does not start another grace
	// period (and another run) for one snapshot. The post-commit cleanup of
	// ExpireSnapshots deletes files at once and reports a failed delete as a
	// failed Commit of a commit that landed: it stays off, and the
	// grace-delayed cleanup above does the work.
	if expirable(tbl.Metadata(), pol, now) >= pol.EveryCommits {
		if err := txn.ExpireSnapshots(table.WithRetainLast(pol.KeepLast), table.WithOlderThan(pol.KeepYoungerThan),
			table.WithPostCommit(false)); err != nil {
			return rep, fmt.Errorf("facade: maintain %q: expire snapshots: %w", datasetID, err)
		}
	}
	staged, err := txn.StagedTable()
	if err != nil {
		return rep, fmt.Errorf("facade: maintain %q: expire snapshots: %w", datasetID, err)
	}
	var lists []string
	for _, s := range tbl.Metadata().Snapshots() {
		if staged.SnapshotByID(s.SnapshotID) == nil && s.ManifestList != "" {
			lists = append(lists, relPath(loc, s.ManifestList))
			rep.SnapshotsExpired++
		}
	}
	next := pending
	if len(lists) > 0 {
		e, err := writeExpiryRecord(fsys, loc, now.UnixMilli(), lists)
		if err != nil {
			return rep, fmt.Errorf("facade: maintain %q: %w", datasetID, err)
		}
		next = append(slices.Clone(pending), e)
	}
	if len(next) != len(record) || len(lists) > 0 {
		if len(next) == 0 {
			if err := txn.RemoveProperties([]string{tablePropExpired}); err != nil {
				return rep, fmt.Errorf("facade: maintain %q: %w", datasetID, err)
			}
		} else {
			b, _ := json.Marshal(next)
			props[tablePropExpired] = string(b)
		}
	}
	if len(props) > 0 {
		if err := txn.SetProperties(props); err != nil {
			return rep, fmt.Errorf("facade: maintain %q: %w", datasetID, err)
		}
	}
	if _, err := txn.Commit(ctx); err != nil {
		called, cerr := obs.outcome()
		switch {
		case !called:
			return rep, fmt.Errorf("facade: maintain %q: commit: %w", datasetID, err)
		case isConflict(cerr):
			return rep, identity.CommitError(ErrCommitConflict, datasetID, 1, cerr)
		case cerr != nil:
			return rep, identity.CommitError(ErrCommitStateUnknown, datasetID, 1, cerr)
		default:
			// landed; only a post-commit step failed (none is enabled)
			return rep, fmt.Errorf("facade: maintain %q: after commit: %w", datasetID, err)
		}
	}
	if later != nil {
		return rep, fmt.Errorf("facade: maintain %q: committed; files kept for a later run: %w", datasetID, later)
	}
	if rep.SnapshotsExpired == 0 && rep.FilesDeleted == 0 && rep.OrphansDeleted == 0 && rep.CompactedFiles == 0 {
		rep.Skipped = "nothing due"
	}
	return rep, nil
}

// lifecycleProps returns the lifecycle properties the table lacks or holds
// with other values than the policy's.
func lifecycleProps(have iceberg.Properties, pol Lifecycle, now time.Time) iceberg.Properties {
	out := iceberg.Properties{}
	if pol.Disabled {
		return out
	}
	want := map[string]string{
		table.MetadataDeleteAfterCommitEnabledKey: "true",
		table.MetadataPreviousVersionsMaxKey:      strconv.Itoa(pol.MetadataVersions),
	}
	for k, v := range want {
		if have[k] != v {
			out[k] = v
		}
	}
	if _, ok := have[tablePropOrphansCheckedAt]; !ok {
		out[tablePropOrphansCheckedAt] = strconv.FormatInt(now.UnixMilli(), 10)
	}
	return out
}

func orphanPassDue(props iceberg.Properties, pol Lifecycle, now time.Time) bool {
	if pol.OrphanAge < 0 {
		return false
	}
	at, err := strconv.ParseInt(props[tablePropOrphansCheckedAt], 10, 64)
	return err != nil || pol.OrphanEvery < 0 || !now.Before(time.UnixMilli(at).Add(pol.OrphanEvery))
}

// maintenanceDue decides CommitResult.MaintenanceDue from the metadata a
// commit returned (no I/O). It is true when a Maintain run has work that
// keeps a bound: EveryCommits snapshots are expirable, an expiry's grace
// has passed, the orphan pass is due, or at least 2*CompactMinFiles data
// files were added since the last compaction (or, on a head written before
// that was recorded, the head holds that many files that are certainly
// small).
func maintenanceDue(meta table.Metadata, pol Lifecycle, now time.Time) bool {
	if pol.Disabled || meta == nil {
		return false
	}
	if expirable(meta, pol, now) >= pol.EveryCommits {
		return true
	}
	props := meta.Properties()
	if record, err := parseExpired(props[tablePropExpired]); err == nil {
		for _, e := range record {
			if !now.Before(time.UnixMilli(e.At).Add(pol.grace())) {
				return true
			}
		}
	}
	if _, ok := props[tablePropOrphansCheckedAt]; ok && orphanPassDue(props, pol, now) {
		return true
	}
	if head := meta.CurrentSnapshot(); head != nil && head.Summary != nil {
		if deleteHeavyTable(head.Summary.Properties) {
			return true
		}
		files, err1 := strconv.ParseInt(head.Summary.Properties["total-data-files"], 10, 64)
		size, err2 := strconv.ParseInt(head.Summary.Properties["total-files-size"], 10, 64)
		if base, err := strconv.ParseInt(head.Summary.Properties[summaryCompactBase], 10, 64); err == nil && err1 == nil {
			// Files added since the last compaction or replace; the files
			// compaction left (size tiers) do not count.
			return files-base >= int64(2*pol.CompactMinFiles)
		}
		// Files at or above a quarter of the target hold at least that
		// much each, so at least files - 4*size/target files are small.
		if err1 == nil && err2 == nil && pol.CompactTargetBytes > 0 &&
			files-4*size/pol.CompactTargetBytes >= int64(2*pol.CompactMinFiles) {
			return true
		}
	}
	return false
}

// expirable counts the snapshots beyond the newest KeepLast that are older
// than KeepYoungerThan (what expiry would remove).
func expirable(meta table.Metadata, pol Lifecycle, now time.Time) int {
	snaps := meta.Snapshots()
	if len(snaps) <= pol.KeepLast {
		return 0
	}
	if pol.KeepYoungerThan <= 0 {
		return len(snaps) - pol.KeepLast
	}
	ts := make([]int64, len(snaps))
	for i, s := range snaps {
		ts[i] = s.TimestampMs
	}
	slices.Sort(ts)
	cutoff := now.Add(-pol.KeepYoungerThan).UnixMilli()
	n := 0
	for _, t := range ts[:len(ts)-pol.KeepLast] {
		if t < cutoff {
			n++
		}
	}
	return n
}

type expiredEntry struct {
	At int64 `json:"at"`
	// File holds the expired manifest lists (a JSON array, relative to
	// the table location) in a side file under metadata/, so the record in
	// the table properties, which every commit rewrites, stays one short
	// line per expiry however many snapshots it expired.
	File string `json:"file,omitempty"`
	// Lists inline (records written before File existed).
	Lists []string `json:"lists,omitempty"`
}

// lists returns the manifest lists of an expiry record entry; a side file
// already gone (the entry was cleaned by a run that crashed before
// dropping it) lists nothing.
func (e expiredEntry) lists(fsys iceio.IO, loc string) ([]string, error) {
	if e.File == "" {
		return e.Lists, nil
	}
	f, err := fsys.Open(absPath(loc, e.File))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read expiry record %s: %w", e.File, err)
	}
	defer f.Close()
	var out []string
	if err := json.NewDecoder(f).Decode(&out); err != nil {
		return nil, fmt.Errorf("read expiry record %s: %w", e.File, err)
	}
	return out, nil
}

// writeExpiryRecord writes the side file of a new expiry entry.
func writeExpiryRecord(fsys iceio.IO, loc string, at int64, lists []string) (expiredEntry, error) {
	w, ok := fsys.(iceio.WriteFileIO)
	if !ok {
		return expiredEntry{At: at, Lists: lists}, nil // inline, as before
	}
	name := fmt.Sprintf("metadata/lakewrite-expired-%d-%s.json", at, uuid.NewString())
	b, err := json.Marshal(lists)
	if err != nil {
		return expiredEntry{}, err
	}
	if err := w.WriteFile(absPath(loc, name), b); err != nil {
		return expiredEntry{}, fmt.Errorf("write expiry record: %w", err)
	}
	return expiredEntry{At: at, File: name}, nil
}

func parseExpired(s string) ([]expiredEntry, error) {
	if s == "" {
		return nil, nil
	}
	var out []expiredEntry
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, err
	}
	return out, nil
}

// relPath returns p relative to the table location when under it.
func relPath(loc, p string) string {
	prefix := strings.TrimSuffix(loc, "/") + "/"
	if rest, ok := strings.CutPrefix(p, prefix); ok {
		return rest
	}
	return p
}

// absPath undoes relPath.
func absPath(loc, p string) string {
	if strings.Contains(p, "://") || strings.HasPrefix(p, "/") {
		return p
	}
	return strings.TrimSuffix(loc, "/") + "/" + p
}

// pathKey identifies a file across spellings (file:///x and /x, a bucket
// URI and the URI a listing returns): the URL path, cleaned.
func pathKey(p string) string {
	if u, err := url.Parse(p); err == nil && u.Scheme != "" && len(u.Scheme) > 1 {
		return path.Clean("/" + u.Host + "/" + u.Path)
	}
	return path.Clean(p)
}

// retainedSet is what the snapshots a reader may still read reference:
// their manifest lists, their manifests, and the data and delete files live
// in them. Those snapshots are the table's own and the expired snapshots
// of the expiries still in their grace.
type retainedSet struct {
	manifests map[string]bool // by pathKey
	live      map[string]bool // by pathKey: data files live in a snapshot
	lists     map[string]bool // by pathKey: manifest lists
}

// readRetained reads every snapshot's manifest list and every distinct
// manifest once, then those of the expiries still in their grace
// (pending). Bounded by the retention policy and the grace.
//
// A file of the table's own snapshots must be read: one that cannot be
// (even one gone) leaves the set unknown, and the error says so. A file of
// a pending expiry that is gone counts as deleted: the snapshots that list
// it cannot be read any more, and the run that deleted it deleted the
// files only it referenced first. Any other error leaves the set unknown.
func readRetained(tbl *table.Table, fsys iceio.IO, loc string, pending []expiredEntry) (*retainedSet, error) {
	r := &retainedSet{manifests: map[string]bool{}, live: map[string]bool{}, lists: map[string]bool{}}
	for _, s := range tbl.Metadata().Snapshots() {
		if err := r.addList(fsys, s.ManifestList, false); err != nil {
			return nil, fmt.Errorf("snapshot %d: %w", s.SnapshotID, err)
		}
	}
	for _, e := range pending {
		ls, err := e.lists(fsys, loc)
		if err != nil {
			return nil, err
		}
		for _, l := range ls {
			if err := r.addList(fsys, absPath(loc, l), true); err != nil {
				return nil, fmt.Errorf("expired snapshot in its grace: %w", err)
			}
		}
	}
	return r, nil
}

// addList adds a manifest list, its manifests and their live files.
// With goneOK, a list or manifest that does not exist is skipped.
func (r *retainedSet) addList(fsys iceio.IO, list string, goneOK bool) error {
	if list == "" || r.lists[pathKey(list)] {
		return nil
	}
	mfs, err := (table.Snapshot{ManifestList: list}).Manifests(fsys)
	if goneOK && isNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read manifest list %s: %w", list, err)
	}
	r.lists[pathKey(list)] = true
	for _, m := range mfs {
		if r.manifests[pathKey(m.FilePath())] {
			continue
		}
		var files []string
		for e, err := range m.Entries(fsys, true) {
			if goneOK && isNotExist(err) {
				files = nil
				break
			}
			if err != nil {
				return fmt.Errorf("read manifest %s: %w", m.FilePath(), err)
			}
			files = append(files, pathKey(e.DataFile().FilePath()))
		}
		r.manifests[pathKey(m.FilePath())] = true
		for _, p := range files {
			r.live[p] = true
		}
	}
	return nil
}

type fileRef struct {
	path string
	size int64 // -1: unknown
	rec  int   // index of the expiry entry it was found through
	data bool  // a data or delete file (not a manifest, list or side file)
}

// expiredFiles lists the files reachable from the expired manifest lists
// that the retained set does not reference: data files first, then
// manifests, then the lists, then the entries' side files (so an
// interrupted deletion leaves every list still present readable). A file
// already gone counts as deleted. An entry with a file that cannot be read
// otherwise is returned in failed with the error: nothing under that file,
// nor its list nor its side file, is listed, so a later run finds them.
func expiredFiles(fsys iceio.IO, loc string, entries []expiredEntry, retained *retainedSet) (files []fileRef, failed map[int]bool, errs error) {
	var data, manifests, lists, records []fileRef
	failed = map[int]bool{}
	seen := map[string]bool{}
	fail := func(i int, err error) {
		failed[i] = true
		errs = errors.Join(errs, err)
	}
	for i, e := range entries {
		ls, err := e.lists(fsys, loc)
		if err != nil {
			fail(i, err)
			continue
		}
		for _, l := range ls {
			list := absPath(loc, l)
			if retained.lists[pathKey(list)] || seen[list] {
				continue
			}
			mfs, err := (table.Snapshot{ManifestList: list}).Manifests(fsys)
			if isNotExist(err) {
				continue
			}
			if err != nil {
				fail(i, fmt.Errorf("read expired manifest list %s: %w", list, err))
				continue
			}
			seen[list] = true
			listOK := true
			for _, m := range mfs {
				if retained.manifests[pathKey(m.FilePath())] || seen[m.FilePath()] {
					continue
				}
				var mdata []fileRef
				var merr error
				for ent, err := range m.Entries(fsys, false) {
					if err != nil {
						merr = err
						break
					}
					df := ent.DataFile()
					if retained.live[pathKey(df.FilePath())] || seen[df.FilePath()] {
						continue
					}
					mdata = append(mdata, fileRef{path: df.FilePath(), size: df.FileSizeBytes(), rec: i, data: true})
				}
				if isNotExist(merr) {
					continue
				}
				if merr != nil {
					listOK = false
					fail(i, fmt.Errorf("read expired manifest %s: %w", m.FilePath(), merr))
					continue
				}
				seen[m.FilePath()] = true
				for _, d := range mdata {
					if !seen[d.path] {
						seen[d.path] = true
						data = append(data, d)
					}
				}
				manifests = append(manifests, fileRef{path: m.FilePath(), size: m.Length(), rec: i})
			}
			if listOK {
				lists = append(lists, fileRef{path: list, size: -1, rec: i})
			} else {
				delete(seen, list) // another entry listing it tries again
			}
		}
		if e.File != "" {
			records = append(records, fileRef{path: absPath(loc, e.File), size: -1, rec: i})
		}
	}
	return slices.Concat(data, manifests, lists, records), failed, errs
}

func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist)
}

// deleteExpired deletes the files of due expiries that no snapshot a
// reader may still read references (retained), and returns the indices of
// the entries whose files could not all be listed or deleted: those stay
// recorded for a later run. A file already gone is not an error.
func deleteExpired(fsys iceio.IO, loc string, due []expiredEntry, retained *retainedSet) (int, int64, map[int]bool, error) {
	files, failed, errs := expiredFiles(fsys, loc, due, retained)
	n, bytes := 0, int64(0)
	for _, fr := range files {
		// Data files come first: an entry that failed keeps its
		// manifests, lists and side file, so a later run reaches what is
		// left.
		if failed[fr.rec] && !fr.data {
			continue
		}
		size := fr.size
		if size < 0 {
			size = statSize(fsys, fr.path)
		}
		if err := fsys.Remove(fr.path); err != nil {
			if !isNotExist(err) {
				failed[fr.rec] = true
				errs = errors.Join(errs, err)
			}
			continue
		}
		n++
		bytes += max(size, 0)
	}
	return n, bytes, failed, errs
}

func statSize(fsys iceio.IO, p string) int64 {
	f, err := fsys.Open(p)
	if err != nil {
		return -1
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return -1
	}
	return st.Size()
}

// orphanPass deletes the files under the table location older than
// OrphanAge that nothing references: iceberg-go's orphan planning (which
// counts the current and logged metadata files, the version hint, every
// snapshot's manifest list, manifests and live data files as referenced),
// minus the files of expiries still in their grace.
func (f *Facade) orphanPass(ctx context.Context, tbl *table.Table, fsys iceio.IO, loc string,
	pending []expiredEntry, retained *retainedSet, pol Lifecycle) (int, int64, error) {
	plan, err := tbl.PlanOrphanFiles(ctx, table.WithFilesOlderThan(pol.OrphanAge),
		table.WithPrefixMismatchMode(table.PrefixMismatchIgnore))
	if err != nil {
		return 0, 0, err
	}
	candidates := plan.OrphanFiles()
	if len(candidates) == 0 {
		return 0, 0, nil
	}
	// Every file the pending expiries will delete, including the data
	// files their snapshots removed, is kept for them.
	keep := map[string]bool{}
	if len(pending) > 0 {
		none := &retainedSet{manifests: map[string]bool{}, live: map[string]bool{}, lists: map[string]bool{}}
		files, _, err := expiredFiles(fsys, loc, pending, none)
		if err != nil {
			return 0, 0, err
		}
		for _, fr := range files {
			keep[pathKey(fr.path)] = true
		}
	}
	n, bytes := 0, int64(0)
	var errs error
	for _, c := range candidates {
		k := pathKey(c.Path)
		if keep[k] || retained.live[k] || retained.lists[k] || retained.manifests[k] {
			continue
		}
		if err := fsys.Remove(c.Path); err != nil {
			if !isNotExist(err) {
				errs = errors.Join(errs, err)
			}
			continue
		}
		n++
		bytes += c.SizeBytes
	}
	return n, bytes, errs
}
