package facade

import (
	"context"
	"iter"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/stretchr/testify/require"
)

// keyBatch asks for a merge by key (see mergeRows).
type keyBatch struct {
	arrow.RecordBatch
	key       []string
	preserved *int64
}

func (b keyBatch) MergeKey() []string        { return b.key }
func (b keyBatch) MergeDone(preserved int64) { *b.preserved = preserved }

// keyedBy asks for a merge of rows by key; MergeDone sets *preserved.
func keyedBy(rows iter.Seq2[arrow.RecordBatch, error], key []string, preserved *int64) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for rec, err := range rows {
			if err != nil || !yield(keyBatch{RecordBatch: rec, key: key, preserved: preserved}, nil) {
				return
			}
		}
	}
}

// Distinct keys that share a key hash are distinct keys: under a key hash
// that gives every key one value (or one of two), a merge finds each
// target row by its key, leaves the unchanged rows in place, rewrites the
// changed ones and deletes the keys gone, as under the real hash; it
// neither fails nor falls back to a full rewrite (MergeDone reports the
// rows left in place, and only the new and changed rows are written).
func TestMergeKeysSharingAHash(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		key  []string
		hash func(uint64) uint64
	}{
		{"integer key, one hash", []string{"id"}, func(uint64) uint64 { return 0x9e3779b97f4a7c15 }},
		{"integer key, two hashes", []string{"id"}, func(h uint64) uint64 { return h & 1 * 0x9e3779b97f4a7c15 }},
		{"two-column key, one hash", []string{"id", "name"}, func(uint64) uint64 { return 0x9e3779b97f4a7c15 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := newCompactEnv(t, mergeOnRead, func(c *Config) { c.keyHash = tc.hash })
			f := env.f
			const ds = "collide"
			write := func(ids []int64, name func(int64) string) (CommitResult, int64) {
				t.Helper()
				preserved := int64(-1)
				res, err := f.Write(context.Background(), Target{DatasetID: ds}, WriteRequest{
					Mode: Replace, Schema: mergeSchemaOf(), Rows: keyedBy(mergeRowsOf(ids, name, nil), tc.key, &preserved)})
				require.NoError(t, err)
				return res, preserved
			}
			_, pre := write(idRange(0, 200), plainName) // a plain replace: nothing to merge into
			require.Equal(t, int64(-1), pre)
			orig := liveIdentity(t, f, ds)

			// Keys 0..49 disappear, 100..109 change, 200..209 are new.
			ids := idRange(50, 210)
			changed := func(id int64) string {
				if id >= 100 && id < 110 {
					return "changed"
				}
				return "n"
			}
			res, preserved := write(ids, changed)
			require.Equal(t, int64(160), res.Rows)
			require.Equal(t, int64(140), preserved, "a merge, not a full rewrite")
			require.Equal(t, "20", res.Summary["added-records"], "only the new and changed rows are written")
			require.Equal(t, "60", res.Summary["added-position-deletes"])
			want, err := ChecksumBatches(mergeRowsOf(ids, changed, nil))
			require.NoError(t, err)
			got, err := f.Checksum(context.Background(), ds, 0)
			require.NoError(t, err)
			require.Equal(t, want, got)
			live := liveIdentity(t, f, ds)
			require.Len(t, live, 160)
			for _, id := range ids {
				if id < 200 && changed(id) == "n" {
					require.Equal(t, orig[id], live[id], "id %d keeps its identity", id)
				}
			}

			// The same rows again: everything is left in place.
			res, preserved = write(ids, changed)
			require.Equal(t, int64(160), preserved)
			require.Contains(t, []string{"", "0"}, res.Summary["added-records"], "nothing written")
		})
	}
}

func mergeSchemaOf() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
}
