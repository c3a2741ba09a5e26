package writestrategy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/internal/refresh"
)

// BenchmarkKeysParamPlanning times what the affected keys cost the
// planner when a recompute receives them as a parameter (refresh.ParamKeys,
// bounded by refresh.MaxParamKeys) against the form that reads them in the
// statement: over an analyzed 1M-row table with an index on the key
// (100,000 keys, 10 rows each), the plan_ms and read_ms (the statement's
// execution, a GROUP BY of the keys' rows) of 1,000 to 100,000 keys.
// The planner estimates an array's rows element by element, so the
// parameter's planning grows with the keys while the subselect's does not.
//
//	go test -run '^$' -bench KeysParamPlanning -benchtime 3x ./writestrategy/
func BenchmarkKeysParamPlanning(b *testing.B) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.URL(b))
	require.NoError(b, err)
	defer pool.Close()
	_, err = pool.Exec(ctx, `CREATE TABLE f (id bigint PRIMARY KEY, k bigint NOT NULL, v numeric NOT NULL);
		INSERT INTO f SELECT g, (g::bigint * 104729) % 100000, g FROM generate_series(1, 1000000) g;
		CREATE INDEX f_k ON f (k)`)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `VACUUM (ANALYZE) f`) // hint bits set, as on a table read before
	require.NoError(b, err)
	for _, n := range []int{1_000, 5_000, 10_000, 20_000, 100_000} {
		keys := make([]int64, n)
		for i := range keys {
			keys[i] = int64(i) * (100_000 / int64(n))
		}
		for _, form := range []struct{ name, cond string }{
			{"subselect", "k = ANY (ARRAY(SELECT unnest($1::bigint[])))"},
			{"param", "k = ANY (" + refresh.ParamKeys("$1", "bigint") + ")"},
		} {
			b.Run(fmt.Sprintf("keys=%d/%s", n, form.name), func(b *testing.B) {
				q := `EXPLAIN (ANALYZE, TIMING OFF, SUMMARY, FORMAT JSON) SELECT k, sum(v) FROM f WHERE ` + form.cond + ` GROUP BY k`
				var plan, read time.Duration
				var out []byte
				require.NoError(b, pool.QueryRow(ctx, q, keys).Scan(&out)) // warm-up, not counted
				for b.Loop() {
					require.NoError(b, pool.QueryRow(ctx, q, keys).Scan(&out))
					var ex []struct {
						Planning  float64 `json:"Planning Time"`
						Execution float64 `json:"Execution Time"`
					}
					require.NoError(b, json.Unmarshal(out, &ex))
					plan += time.Duration(ex[0].Planning * float64(time.Millisecond))
					read += time.Duration(ex[0].Execution * float64(time.Millisecond))
				}
				b.ReportMetric(float64(plan.Microseconds())/1000/float64(b.N), "plan_ms")
				b.ReportMetric(float64(read.Microseconds())/1000/float64(b.N), "read_ms")
			})
		}
	}
}
