package writestrategy_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// schemaSource is merge_src published as the row-store dataset "src" with
// the columns the test declares now.
type schemaSource struct {
	*mergeSource
	w      *world
	schema writestrategy.Schema
}

// alter runs ddl on merge_src, declares its columns as s and publishes it.
func (s *schemaSource) alter(ddl string, cols writestrategy.Schema) {
	s.t.Helper()
	if ddl != "" {
		s.w.exec(ddl)
	}
	s.schema = cols
	s.publish()
}

func (s *schemaSource) publish() {
	s.t.Helper()
	seedRowStore(s.t, s.pool, "src", s.schema, typedSelect(s.schema, "merge_src"))
}

// change updates, inserts and deletes rows through the columns every
// schema of the test has (id, v), then publishes.
func (s *schemaSource) change(updates, inserts, deletes int) {
	s.t.Helper()
	s.w.exec(`DELETE FROM merge_src WHERE id IN (SELECT id FROM merge_src ORDER BY id DESC LIMIT $1)`, deletes)
	s.w.exec(`UPDATE merge_src SET v = v || 'x' WHERE id IN (SELECT id FROM merge_src ORDER BY md5(id::text || v) LIMIT $1)`, updates)
	s.w.exec(`INSERT INTO merge_src (id, v) SELECT g, 'new' || g FROM generate_series($1::bigint, $2::bigint) g`,
		s.nextID, s.nextID+int64(inserts)-1)
	s.nextID += int64(inserts)
	s.publish()
}

func schemaOf(cols ...string) writestrategy.Schema {
	var s writestrategy.Schema
	for i := 0; i+1 < len(cols); i += 2 {
		s.Columns = append(s.Columns, writestrategy.Column{Name: cols[i], Type: cols[i+1]})
	}
	return s
}

// A snapshot_replace on Iceberg whose source's columns change between two
// runs (a column added, a column type widened, columns reordered, a column
// dropped): the run that meets the change writes exactly the source's rows
// (as a full rewrite or as a merge), with the counts of the same deploy on
// Postgres, and the runs after it merge again on the new columns, writing
// only the changed rows and keeping the unchanged rows' identity.
func TestSoakSchemaChangeBetweenMerges(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	base := newMergeSource(t, w.pool, 300)
	src := &schemaSource{mergeSource: base, w: w, schema: mergeSchema}
	ensureOutputs(t, w.pool, "sr", "pg_sr")
	w.iceberg("sr")

	// write runs the deploy on both arms and checks the Iceberg one; it
	// returns whether the Iceberg run was a merge (only the changed rows
	// written).
	var before map[int64][3]int64
	write := func(msg string, changed int64) bool {
		t.Helper()
		want := w.mustWrite(mergeDeploy("pg_sr"))[0]
		got := w.mustWrite(mergeDeploy("sr"))[0]
		require.Equal(t, want.Rows, got.Rows, msg)
		require.Equal(t, want.Skipped, got.Skipped, msg)
		require.Equal(t, want.Preserved, got.Preserved, msg)
		require.Equal(t, columnTypes(src.schema), columnTypes(writestrategy.ResultColumns(got)), msg)
		verifyReplace(t, w, "sr", msg)
		require.Equal(t, soakSourceRows(w, src.schema), soakDatasetRows(w, src.schema, "sr"), "%s: a full rebuild's rows", msg)
		require.Equal(t, w.checksum("pg_sr"), w.checksum("sr"), msg)
		after := rowIdentities(t, w.lake, "sr")
		added := writtenRecords(t, w, got)
		if changed >= 0 {
			requireMerged(t, w, got, changed, msg)
		}
		merged := added < got.Rows
		if merged {
			require.Equal(t, got.Preserved, keptIdentities(before, after), "%s: unchanged rows keep their identity columns", msg)
		} else {
			// A replace renumbers __row_index and carries __row_id and
			// __created_at of the unchanged rows.
			require.Equal(t, got.Preserved, keptIdentities(rowIDs(before), rowIDs(after)), "%s: unchanged rows keep __row_id and __created_at", msg)
		}
		before = after
		return merged
	}
	write("first", -1)
	src.change(10, 5, 3)
	require.True(t, write("merge", 15))

	steps := []struct {
		name string
		ddl  string
		cols writestrategy.Schema
	}{
		{"column added", `ALTER TABLE merge_src ADD COLUMN score double precision; UPDATE merge_src SET score = id / 4.0 WHERE id % 3 = 0`,
			schemaOf("id", "bigint", "v", "text", "n", "integer", "category", "text", "score", "double precision")},
		{"column added, all NULL", `ALTER TABLE merge_src ADD COLUMN note text`,
			schemaOf("id", "bigint", "v", "text", "n", "integer", "category", "text", "score", "double precision", "note", "text")},
		{"type widened", `ALTER TABLE merge_src ALTER n TYPE bigint`,
			schemaOf("id", "bigint", "v", "text", "n", "bigint", "category", "text", "score", "double precision", "note", "text")},
		{"columns reordered", ``,
			schemaOf("note", "text", "category", "text", "id", "bigint", "score", "double precision", "v", "text", "n", "bigint")},
		{"column dropped", `ALTER TABLE merge_src DROP COLUMN category`,
			schemaOf("note", "text", "id", "bigint", "score", "double precision", "v", "text", "n", "bigint")},
		{"type changed", `ALTER TABLE merge_src ALTER n TYPE text`,
			schemaOf("note", "text", "id", "bigint", "score", "double precision", "v", "text", "n", "text")},
	}
	for _, st := range steps {
		src.alter(st.ddl, st.cols)
		merged := write(st.name, -1)
		t.Logf("%s: the run meeting the change was a merge: %v", st.name, merged)
		for i := range 2 {
			src.change(4+i, 3, 2)
			require.True(t, write(fmt.Sprintf("%s: run %d after", st.name, i), int64(7+i)), "%s: merges go on", st.name)
		}
	}
	require.Equal(t, facade.Replace, w.mustWrite(mergeDeploy("sr"))[0].Mode)
}

// rowIDs keeps the __row_id and __created_at of rowIdentities.
func rowIDs(ids map[int64][3]int64) map[int64][2]int64 {
	out := make(map[int64][2]int64, len(ids))
	for k, v := range ids {
		out[k] = [2]int64{v[1], v[2]}
	}
	return out
}

// A snapshot_replace on Iceberg whose key changes between runs. A new key
// the target's rows are unique by (another unique column, a key widened
// by a column, the old key again) is merged by: the rows and counts are
// those of the same deploy on Postgres. A new key the target holds twice
// (a key narrowed to a non-unique column) cannot be merged into in place:
// the write replaces the table whole with the same rows as on Postgres,
// and the next run merges again.
func TestSoakMergeKeyChanged(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	src := newMergeSource(t, w.pool, 300)
	ensureOutputs(t, w.pool, "sr", "pg_sr")
	w.iceberg("sr")
	deploy := func(out string, key ...string) writestrategy.Deploy {
		return writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "src", Target: out, Key: key}
	}
	for i, key := range [][]string{{"id"}, {"id"}, {"v"}, {"v"}, {"id", "category"}, {"id"}} {
		msg := fmt.Sprintf("write %d, key %v", i, key)
		src.change(5, 3, 2)
		want := w.mustWrite(deploy("pg_sr", key...))[0]
		got := w.mustWrite(deploy("sr", key...))[0]
		require.Equal(t, want.Rows, got.Rows, msg)
		require.Equal(t, want.Skipped, got.Skipped, msg)
		require.Equal(t, want.Preserved, got.Preserved, msg)
		require.Equal(t, w.checksum("pg_sr"), w.checksum("sr"), msg)
		require.Equal(t, soakSourceRows(w, mergeSchema), soakDatasetRows(w, mergeSchema, "sr"), msg)
		if i > 0 {
			requireMerged(t, w, got, 8, msg)
		}
	}

	// Narrowed to a column the target holds many times: Postgres keeps one
	// row per category; the Iceberg merge cannot update such a target in
	// place and replaces it whole with the same rows, then merges again.
	src.change(5, 3, 2)
	want := w.mustWrite(deploy("pg_sr", "category"))[0]
	require.EqualValues(t, 4, want.Rows)
	for run := range 2 {
		got := w.mustWrite(deploy("sr", "category"))[0]
		require.Equal(t, want.Rows, got.Rows, "run %d", run)
		require.Equal(t, w.checksum("pg_sr"), w.checksum("sr"), "run %d", run)
		require.Equal(t, soakDatasetRows(w, mergeSchema, "pg_sr"), soakDatasetRows(w, mergeSchema, "sr"), "run %d", run)
		require.Zero(t, w.openIntents("sr"))
	}
	// Back on its key, the deploy merges again.
	got := w.mustWrite(deploy("sr", "id"))[0]
	require.Equal(t, sourceCount(t, w), got.Rows)
	require.Equal(t, soakSourceRows(w, mergeSchema), soakDatasetRows(w, mergeSchema, "sr"))
	verifyReplace(t, w, "sr", "back on its key")
}

// An append_new whose source gains a column, then loses one, between runs:
// on Iceberg, on Postgres, flipped to Iceberg and reverted to Postgres at
// the change, every write lands with the same rows and counts (the rows
// already there read NULL in the new column), and later runs append on the
// new columns.
func TestSoakAppendNewColumnsChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	base := newMergeSource(t, w.pool, 200)
	src := &schemaSource{mergeSource: base, w: w, schema: mergeSchema}
	outs := []string{"ice", "pg", "flip", "revert"}
	ensureOutputs(t, w.pool, outs...)
	w.iceberg("ice", "revert")
	// sums: compare the checksums too. After a column is dropped they
	// differ: an Iceberg append keeps the table's column (the rows it
	// holds keep their values, new rows read NULL) and its checksum
	// covers it, where the row store's covers the declared columns.
	sums := true
	write := func(msg string, news int64) {
		t.Helper()
		var want writestrategy.WriteResult
		for i, out := range outs {
			got := w.mustWrite(appendNewDeploy(out))[0]
			if i == 0 {
				want = got
			}
			require.Equal(t, want.Skipped, got.Skipped, "%s: %s", msg, out)
			if got.Mode == facade.Append {
				require.Equal(t, news, got.Rows, "%s: %s", msg, out)
			}
			require.Equal(t, columnTypes(src.schema), columnTypes(writestrategy.ResultColumns(got)), "%s: %s", msg, out)
		}
		for _, out := range outs[1:] {
			require.Equal(t, soakDatasetRows(w, src.schema, outs[0]), soakDatasetRows(w, src.schema, out), "%s: %s", msg, out)
			if sums {
				require.Equal(t, w.checksum(outs[0]), w.checksum(out), "%s: %s", msg, out)
			}
		}
	}
	write("first", 200)
	src.change(3, 4, 2)
	write("second", 4)

	src.alter(`ALTER TABLE merge_src ADD COLUMN score double precision; UPDATE merge_src SET score = id / 2.0`,
		schemaOf("id", "bigint", "v", "text", "n", "integer", "category", "text", "score", "double precision"))
	src.change(3, 5, 2)
	w.iceberg("flip")
	_, err := w.flags.ClearOverride(ctx, writer, "revert")
	require.NoError(t, err)
	w.resolver.Invalidate()
	write("column added", 5)
	var nulls int64
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM lakewrite.dataset_rows WHERE dataset_id = 'pg' AND data->'score' IS NULL`).Scan(&nulls))
	require.Equal(t, int64(204), nulls, "the rows already there hold no score")
	src.change(2, 3, 1)
	write("after the column was added", 3)

	sums = false
	src.alter(`ALTER TABLE merge_src DROP COLUMN category`,
		schemaOf("id", "bigint", "v", "text", "n", "integer", "score", "double precision"))
	src.change(2, 3, 1)
	write("column dropped", 3)
	src.change(2, 2, 1)
	write("after the column was dropped", 2)
}
