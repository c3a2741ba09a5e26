package facade_test

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
)

// heldSnapshot is a reader's view of a snapshot: the table metadata it
// loaded when the snapshot was the head, so it can read the snapshot
// after expiry as a downstream engine that planned earlier does.
type heldSnapshot struct {
	tbl       *table.Table
	id        int64
	rows      int64
	expiredAt time.Time // zero while the table holds it
}

// readAll reads every row of the held snapshot.
func (h heldSnapshot) readAll(ctx context.Context) (int64, error) {
	_, it, err := h.tbl.Scan(table.WithSnapshotID(h.id)).ToArrowRecords(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for b, err := range it {
		if err != nil {
			return n, err
		}
		n += b.NumRows()
		b.Release()
	}
	return n, nil
}

// tightLifecycle is a policy whose expiries come faster than its grace
// under a write every half second of the test clock.
var tightLifecycle = facade.Lifecycle{KeepLast: 2, EveryCommits: 2, FileGrace: 3 * time.Second}

// mergedBatch asks for a merge by "id" (the facade's merge of a Replace).
type mergedBatch struct{ arrow.RecordBatch }

func (mergedBatch) MergeKey() []string { return []string{"id"} }
func (mergedBatch) MergeDone(int64)    {}

var mergedSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "v", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// mergeTen writes ids 0..9 as a merge by id, row i%10 holding value i and
// the others what they held at write i-1 (one row changed per write).
func mergeTen(t *testing.T, f *facade.Facade, ds string, i int) facade.CommitResult {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, mergedSchema)
	defer b.Release()
	for id := range 10 {
		v := i - (i-id+10)%10 // the last write <= i that changed id
		b.Field(0).(*array.Int64Builder).Append(int64(id))
		b.Field(1).(*array.Int64Builder).Append(int64(v))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	rows := func(yield func(arrow.RecordBatch, error) bool) { yield(mergedBatch{rec}, nil) }
	res, err := f.Write(context.Background(), facade.Target{DatasetID: ds, WriterID: "w"},
		facade.WriteRequest{Mode: facade.Replace, Schema: mergedSchema, Rows: rows, TxnID: "m" + strconv.Itoa(i)})
	require.NoError(t, err)
	return res
}

// frequentWrites writes every 500 ms of a test clock, with the tight
// lifecycle, and runs Maintain whenever a commit says it is due. Each
// write appends 2 rows, or with merge changes one row of 10 by a merge.
// After each run it calls after with the run's error, every snapshot
// written so far (expiredAt set from the run that expired it) and the
// clock's time after the run. Appends and merges carry manifests from one
// snapshot to the next until a merge of manifests or a compaction rewrites
// them, so an expiry's snapshots share manifests with the snapshots of the
// next expiries.
func frequentWrites(t *testing.T, writes int, merge bool, after func(i int, err error, held []heldSnapshot, now time.Time, tbl *table.Table)) {
	t.Helper()
	clk := &clock{}
	e := newIcebergEnv(t, func(c *facade.Config) {
		c.Lifecycle = tightLifecycle
		facade.SetNow(c, clk.now)
	})
	defer e.mem.AssertSize(t, 0)
	ctx := context.Background()
	const ds = "tight"
	var held []heldSnapshot
	for i := range writes {
		clk.advance(500 * time.Millisecond)
		var res facade.CommitResult
		rows := int64(10)
		if merge {
			res = mergeTen(t, e.f, ds, i)
		} else {
			res = writeRows(t, e, e.f, ds, facade.Append, 2*i, 2, "w"+strconv.Itoa(i))
			rows = int64(2 * (i + 1))
		}
		tbl, err := e.f.LoadTable(ctx, ds)
		require.NoError(t, err)
		held = append(held, heldSnapshot{tbl: tbl, id: res.SnapshotID, rows: rows})
		if !res.MaintenanceDue {
			continue
		}
		before := clk.now()
		_, merr := e.f.Maintain(ctx, ds)
		tbl, err = e.f.LoadTable(ctx, ds)
		require.NoError(t, err)
		for j := range held {
			if held[j].expiredAt.IsZero() && tbl.SnapshotByID(held[j].id) == nil {
				// The run recorded its expiry at or after before, so the
				// grace counted from before ends no later than the run's.
				held[j].expiredAt = before
			}
		}
		after(i, merr, held, clk.now(), tbl)
	}
}

// TestGraceProtectsReadersUnderFrequentWrites: with expiries coming faster
// than FileGrace, every snapshot a reader may still read (one the table
// holds, or one expired less than FileGrace ago) reads all its rows after
// every maintenance run, including snapshots whose manifests an earlier,
// due expiry also listed.
func TestGraceProtectsReadersUnderFrequentWrites(t *testing.T) {
	t.Parallel()
	for _, merge := range []bool{false, true} {
		name := "append"
		if merge {
			name = "merge"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			checked := 0
			frequentWrites(t, 20, merge, func(i int, merr error, held []heldSnapshot, now time.Time, _ *table.Table) {
				for _, h := range held {
					if !h.expiredAt.IsZero() && !now.Before(h.expiredAt.Add(tightLifecycle.FileGrace)) {
						continue // past its grace: its files may be gone
					}
					n, err := h.readAll(ctx)
					require.NoError(t, err, "write %d: snapshot %d expired %v ago", i, h.id, now.Sub(h.expiredAt))
					require.Equal(t, h.rows, n, "write %d: snapshot %d", i, h.id)
					if !h.expiredAt.IsZero() {
						checked++
					}
				}
				require.NoError(t, merr, "write %d", i)
			})
			require.Positive(t, checked, "expired snapshots in their grace were read")
		})
	}
}

// TestExpiryStaysBoundedUnderFrequentWrites: with expiries coming faster
// than FileGrace (a merge changing one row of 10 every half second), every maintenance run succeeds and the table holds at
// most KeepLast+EveryCommits snapshots after each, and the expiry record
// holds only the expiries of about one grace period.
func TestExpiryStaysBoundedUnderFrequentWrites(t *testing.T) {
	t.Parallel()
	runs := 0
	frequentWrites(t, 30, true, func(i int, merr error, _ []heldSnapshot, _ time.Time, tbl *table.Table) {
		runs++
		require.NoError(t, merr, "write %d", i)
		require.LessOrEqual(t, len(tbl.Metadata().Snapshots()), tightLifecycle.KeepLast+tightLifecycle.EveryCommits, "write %d", i)
		var record []json.RawMessage
		if s := tbl.Properties()[facade.TablePropExpired]; s != "" {
			require.NoError(t, json.Unmarshal([]byte(s), &record))
		}
		// An expiry per run at most, a run at most every 2 writes (1 s):
		// about FileGrace/1s pending expiries, plus the one just due.
		require.LessOrEqual(t, len(record), 5, "write %d: expiries recorded", i)
	})
	require.Greater(t, runs, 10)
}

// expiredOnly returns the manifests of snapshot id in old that the
// current snapshot of cur does not list.
func expiredOnly(t *testing.T, old, cur *table.Table, id int64) []string {
	t.Helper()
	fsys, err := cur.FS(context.Background())
	require.NoError(t, err)
	live := map[string]bool{}
	mfs, err := cur.CurrentSnapshot().Manifests(fsys)
	require.NoError(t, err)
	for _, m := range mfs {
		live[m.FilePath()] = true
	}
	mfs, err = old.SnapshotByID(id).Manifests(fsys)
	require.NoError(t, err)
	var out []string
	for _, m := range mfs {
		if !live[m.FilePath()] {
			out = append(out, m.FilePath())
		}
	}
	return out
}

func expiryRecord(t *testing.T, f *facade.Facade, ds string) []json.RawMessage {
	t.Helper()
	tbl, err := f.LoadTable(context.Background(), ds)
	require.NoError(t, err)
	var record []json.RawMessage
	if s := tbl.Properties()[facade.TablePropExpired]; s != "" {
		require.NoError(t, json.Unmarshal([]byte(s), &record))
	}
	return record
}

// TestExpiryRecoversFromMissingManifest: a table whose expiry record lists
// a snapshot whose manifest is already gone (deleted under it by an
// earlier run, or by hand) runs its next maintenance to the end: the
// missing file counts as deleted, the other files of the expiry are
// deleted, the record is dropped and expiry goes on.
func TestExpiryRecoversFromMissingManifest(t *testing.T) {
	t.Parallel()
	clk := &clock{}
	pol := facade.Lifecycle{KeepLast: 1, EveryCommits: 1, FileGrace: time.Hour, OrphanAge: -1}
	e := newIcebergEnv(t, func(c *facade.Config) {
		c.Lifecycle = pol
		facade.SetNow(c, clk.now)
	})
	defer e.mem.AssertSize(t, 0)
	ctx := context.Background()
	const ds = "stuck"
	w0 := writeRows(t, e, e.f, ds, facade.Replace, 0, 50, "s0")
	w1 := writeRows(t, e, e.f, ds, facade.Replace, 100, 50, "s1")
	writeRows(t, e, e.f, ds, facade.Replace, 200, 50, "s2")
	old, err := e.f.LoadTable(ctx, ds)
	require.NoError(t, err)
	rep, err := e.f.Maintain(ctx, ds)
	require.NoError(t, err)
	require.Equal(t, 2, rep.SnapshotsExpired)
	require.Len(t, expiryRecord(t, e.f, ds), 1)

	// The stuck state: a manifest of an expired snapshot is gone.
	cur, err := e.f.LoadTable(ctx, ds)
	require.NoError(t, err)
	gone := expiredOnly(t, old, cur, w0.SnapshotID)
	require.NotEmpty(t, gone)
	for _, m := range gone {
		require.NoError(t, os.Remove(strings.TrimPrefix(m, "file://")))
	}

	clk.advance(2 * time.Hour)
	writeRows(t, e, e.f, ds, facade.Replace, 300, 50, "s3")
	rep, err = e.f.Maintain(ctx, ds)
	require.NoError(t, err, "a missing file of an expired snapshot does not stop maintenance")
	require.Equal(t, 1, rep.SnapshotsExpired, "expiry went on")
	require.Positive(t, rep.FilesDeleted)
	for _, df := range w1.DataFiles {
		require.False(t, exists(df.Path), "the expiry's other files are deleted: %s", df.Path)
	}
	require.Len(t, expiryRecord(t, e.f, ds), 1, "the due entry is dropped, the new one recorded")

	clk.advance(2 * time.Hour)
	rep, err = e.f.Maintain(ctx, ds)
	require.NoError(t, err)
	require.Positive(t, rep.FilesDeleted)
	require.Empty(t, expiryRecord(t, e.f, ds))
	sum, err := e.f.Checksum(ctx, ds, 0)
	require.NoError(t, err)
	require.EqualValues(t, 50, sum.Rows)
}

// TestExpiryKeepsFilesItCannotCheck: when a file of a snapshot in its
// grace cannot be read (not gone: unreadable), nothing is deleted, since
// no file can be shown unreferenced; the expiry still commits and the run
// returns the error. Once the file reads again, the next run deletes what
// was due.
func TestExpiryKeepsFilesItCannotCheck(t *testing.T) {
	t.Parallel()
	clk := &clock{}
	pol := facade.Lifecycle{KeepLast: 1, EveryCommits: 1, FileGrace: time.Hour, OrphanAge: -1}
	e := newIcebergEnv(t, func(c *facade.Config) {
		c.Lifecycle = pol
		facade.SetNow(c, clk.now)
	})
	defer e.mem.AssertSize(t, 0)
	ctx := context.Background()
	const ds = "unreadable"
	w0 := writeRows(t, e, e.f, ds, facade.Replace, 0, 50, "u0")
	w1 := writeRows(t, e, e.f, ds, facade.Replace, 100, 50, "u1")
	old, err := e.f.LoadTable(ctx, ds)
	require.NoError(t, err)
	_, err = e.f.Maintain(ctx, ds) // expires u0
	require.NoError(t, err)
	clk.advance(30 * time.Minute)
	writeRows(t, e, e.f, ds, facade.Replace, 200, 50, "u2")
	_, err = e.f.Maintain(ctx, ds) // expires u1
	require.NoError(t, err)
	require.Len(t, expiryRecord(t, e.f, ds), 2)

	// u0's expiry is due, u1's is in its grace and its manifest list
	// cannot be read.
	clk.advance(40 * time.Minute)
	list := strings.TrimPrefix(old.SnapshotByID(w1.SnapshotID).ManifestList, "file://")
	orig, err := os.ReadFile(list)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(list, []byte("not avro"), 0o644))
	writeRows(t, e, e.f, ds, facade.Replace, 300, 50, "u3")
	rep, err := e.f.Maintain(ctx, ds)
	require.Error(t, err)
	require.Equal(t, 1, rep.SnapshotsExpired, "the expiry committed")
	require.Zero(t, rep.FilesDeleted)
	for _, df := range w0.DataFiles {
		require.True(t, exists(df.Path), "kept: %s", df.Path)
	}
	require.Len(t, expiryRecord(t, e.f, ds), 3, "the due entry stays recorded")

	require.NoError(t, os.WriteFile(list, orig, 0o644))
	rep, err = e.f.Maintain(ctx, ds)
	require.NoError(t, err)
	require.Positive(t, rep.FilesDeleted)
	for _, df := range w0.DataFiles {
		require.False(t, exists(df.Path), "deleted once checked: %s", df.Path)
	}
	require.Len(t, expiryRecord(t, e.f, ds), 2)
	n, err := heldSnapshot{tbl: old, id: w1.SnapshotID, rows: 50}.readAll(ctx)
	require.NoError(t, err, "the snapshot in its grace still reads")
	require.EqualValues(t, 50, n)
}
