package writestrategy_test

import (
	"context"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// A float that changes between 0 and -0 is a changed value on both sinks:
// Verify sees an Iceberg table holding 0 where the compute gives -0, the
// next snapshot_replace merge rewrites the row (as the row store does), and
// both sinks then hold -0 with equal checksums. A table left holding 0 by
// an earlier library (whose merge kept the row) is the table this test
// writes before the update: it is corrected by its next write.
func TestMergeAndVerifySeeNegativeZero(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, version := range []int{2, 3} {
		t.Run("v"+string(rune('0'+version)), func(t *testing.T) {
			t.Parallel()
			w := newWorldWith(t, nil, &facade.Config{FormatVersionFor: func(string) (int, bool) { return version, true }}, nil, nil)
			_, err := w.pool.Exec(ctx, `CREATE TABLE nz_src (id bigint PRIMARY KEY, f double precision, r real);
				INSERT INTO nz_src VALUES (1, 0, 0), (2, 1.5, 1.5)`)
			require.NoError(t, err)
			schema := writestrategy.Schema{Columns: []writestrategy.Column{
				{Name: "id", Type: "bigint"}, {Name: "f", Type: "double precision"}, {Name: "r", Type: "real"}}}
			publish := func() { seedRowStore(t, w.pool, "src", schema, `SELECT id, f, r FROM nz_src`) }
			publish()
			ensureOutputs(t, w.pool, "ice", "pg")
			w.iceberg("ice")
			replace := func(out string) writestrategy.Deploy {
				return writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "src", Target: out, Key: []string{"id"}}
			}
			verify := func(out string) writestrategy.Parity {
				ps, err := w.d.Verify(ctx, writestrategy.Request{Strategy: replace(out)})
				require.NoError(t, err)
				require.Len(t, ps, 1)
				return ps[0]
			}
			for _, out := range []string{"ice", "pg"} {
				require.Equal(t, int64(2), w.mustWrite(replace(out))[0].Rows)
				require.True(t, verify(out).OK(), "%s", verify(out))
			}
			// Only the sign of a zero changes, in each float column in turn.
			for _, col := range []string{"f", "r"} {
				_, err = w.pool.Exec(ctx, `UPDATE nz_src SET `+col+` = '-0' WHERE id = 1`)
				require.NoError(t, err)
				publish()
				for _, out := range []string{"ice", "pg"} {
					p := verify(out)
					require.False(t, p.OK(), "%s holds +0 where the compute gives -0: %s", out, p)
				}
				ice, pg := w.mustWrite(replace("ice"))[0], w.mustWrite(replace("pg"))[0]
				require.Equal(t, int64(1), pg.Preserved, "the row store rewrites the row")
				require.Equal(t, int64(1), ice.Preserved, "the merge rewrites the row")
				require.Equal(t, w.checksum("pg"), w.checksum("ice"))
				for _, out := range []string{"ice", "pg"} {
					require.True(t, verify(out).OK(), "%s", verify(out))
				}
				require.True(t, math.Signbit(icebergFloat(t, w.lake, "ice", col, 1)), "Iceberg holds -0 in %s", col)
			}
			// Nothing changed: every row is left in place.
			require.Equal(t, int64(2), w.mustWrite(replace("ice"))[0].Preserved)
			require.Equal(t, int64(2), w.mustWrite(replace("pg"))[0].Preserved)
		})
	}
}

// icebergFloat is column col (double or real) of the row whose id is id.
func icebergFloat(t *testing.T, lake facade.Lakehouse, ds, col string, id int64) float64 {
	t.Helper()
	var got []float64
	for rec, err := range lake.Scan(context.Background(), ds, facade.ScanOptions{}) {
		require.NoError(t, err)
		sc := rec.Schema()
		ids := rec.Column(sc.FieldIndices("id")[0]).(*array.Int64)
		c := rec.Column(sc.FieldIndices(col)[0])
		for i := range int(rec.NumRows()) {
			if ids.Value(i) != id {
				continue
			}
			switch a := c.(type) {
			case *array.Float64:
				got = append(got, a.Value(i))
			case *array.Float32:
				got = append(got, float64(a.Value(i)))
			default:
				t.Fatalf("column %s is %s", col, c.DataType())
			}
		}
	}
	require.Len(t, got, 1)
	return got[0]
}
