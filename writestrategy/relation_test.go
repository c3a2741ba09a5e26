package writestrategy_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

func (w *world) exec(sql string, args ...any) {
	w.t.Helper()
	_, err := w.pool.Exec(context.Background(), sql, args...)
	require.NoError(w.t, err)
}

var aggSteps = []writestrategy.Step{{Name: "agg",
	SQL: `SELECT category, sum(amount) AS total, count(*) AS n, min(ts) AS first FROM source GROUP BY category ORDER BY category`}}

// A Transform over a registered view gives the output it gives over a
// copy of the view's rows, on either sink, and sees the view's changes at
// the next write.
func TestRelationSourceMatchesCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	w.exec(`CREATE TABLE src_orders AS `+ordersSQL, 300)
	w.exec(`CREATE VIEW v_orders AS SELECT * FROM src_orders WHERE amount > 10`)
	s, err := writestrategy.RegisterRelation(ctx, w.pool, nil, "rel_orders", "v_orders")
	require.NoError(t, err)
	require.Equal(t, ordersSchema, s)
	ds, err := w.ledger.Dataset(ctx, "rel_orders")
	require.NoError(t, err)
	require.Equal(t, sink.Relation, ds.Sink)
	require.JSONEq(t, string(ordersSchema.JSON()), string(ds.Schema))

	ensureOutputs(t, w.pool, "copied", "out_rel", "out_copy", "out_rel_ice")
	w.iceberg("out_rel_ice")
	run := func(wantRows int64) {
		t.Helper()
		_, err := w.load(writestrategy.LoadRequest{DatasetID: "copied", SQL: `SELECT * FROM v_orders`})
		require.NoError(t, err)
		// The registered relation reads as its copy does.
		require.Equal(t, w.checksum("copied"), w.checksum("rel_orders"))
		require.Equal(t, wantRows, w.checksum("rel_orders").Rows)
		for out, src := range map[string]string{"out_rel": "rel_orders", "out_copy": "copied", "out_rel_ice": "rel_orders"} {
			w.mustWrite(writestrategy.Transform{Output: out, Source: src, Steps: aggSteps})
		}
		ref := w.checksum("out_copy")
		require.Equal(t, int64(3), ref.Rows)
		require.Equal(t, ref, w.checksum("out_rel"))
		require.Equal(t, ref, w.checksum("out_rel_ice"))
	}
	run(292)
	before := w.checksum("out_rel")
	// The view's rows change: the next write sees them.
	w.exec(`INSERT INTO src_orders SELECT * FROM (`+ordersSQL+`) o WHERE id > 250`, 400)
	run(442)
	require.NotEqual(t, before, w.checksum("out_rel"))

	// Parity of an output read from the relation.
	ps, err := w.d.Verify(ctx, writestrategy.Request{Strategy: writestrategy.Transform{Output: "out_rel_ice", Source: "rel_orders", Steps: aggSteps}})
	require.NoError(t, err)
	require.True(t, ps[0].OK(), ps[0].String())

	// Joins read a relation like any source.
	join := func(out, left string) facade.Checksum {
		w.mustWrite(writestrategy.Join{Output: out, Left: left, Right: "copied", On: []writestrategy.JoinOn{{Left: "id", Right: "id"}},
			Columns: []writestrategy.JoinColumn{{Side: "left", Name: "id"}, {Side: "right", Name: "amount"}}})
		return w.checksum(out)
	}
	require.Equal(t, join("out_copy", "copied"), join("out_rel", "rel_orders"))
}

// Registered relations: the forms of a relation, re-registration, and
// every refusal.
func TestRegisterRelation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, nil)
	w.exec(`CREATE SCHEMA "Sales"`)
	w.exec(`CREATE TABLE "Sales"."Orders" AS `+ordersSQL, 20)
	w.exec(`CREATE MATERIALIZED VIEW mv AS SELECT id FROM "Sales"."Orders"`)
	w.exec(`CREATE SEQUENCE seq`)
	reg := func(id, rel string) (writestrategy.Schema, error) {
		return writestrategy.RegisterRelation(ctx, w.pool, nil, id, rel)
	}
	ensureOutputs(t, w.pool, "out", "written")

	// Names: quoted and qualified, materialized views; queries.
	for rel, rows := range map[string]int64{`"Sales"."Orders"`: 20, `mv`: 20, `public.MV`: 20,
		`SELECT id, name FROM "Sales"."Orders" WHERE id <= $$5$$::int`: 5, `VALUES (1, 'a'), (2, 'b')`: 2,
		`WITH x AS (SELECT 1 AS a) SELECT * FROM x`: 1, "  select id from mv -- trailing comment": 20} {
		_, err := reg("rel", rel)
		require.NoError(t, err, rel)
		require.Equal(t, rows, w.checksum("rel").Rows, rel)
		w.mustWrite(writestrategy.Transform{Output: "out", Source: "rel"})
		require.Equal(t, rows, w.checksum("out").Rows, rel)
	}
	// A name is stored schema-qualified as it resolves at registration, so
	// a session with another search_path (or a temporary table of the same
	// name) reads the same relation; a temporary table is refused.
	_, err := reg("rel", "mv")
	require.NoError(t, err)
	var stored string
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT relation FROM lakewrite.datasets WHERE id = 'rel'`).Scan(&stored))
	require.Equal(t, `"public"."mv"`, stored)
	tx, err := w.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `CREATE TEMP TABLE mv AS SELECT 1::bigint AS id`)
	require.NoError(t, err)
	_, err = writestrategy.RegisterRelation(ctx, tx, nil, "rel_tmp", "mv")
	require.ErrorIs(t, err, writestrategy.ErrInvalid)
	require.NoError(t, tx.Rollback(ctx))

	s, err := reg("rel", `SELECT id, name FROM "Sales"."Orders"`)
	require.NoError(t, err)
	require.Equal(t, writestrategy.Schema{Columns: []writestrategy.Column{{Name: "id", Type: "bigint"}, {Name: "name", Type: "text"}}}, s)

	// Refused relations: nothing registered, nothing run.
	for rel, want := range map[string]error{
		"":                             writestrategy.ErrInvalid,
		"no_such_table":                writestrategy.ErrInvalid,
		"seq":                          writestrategy.ErrInvalid,
		`mv; DROP TABLE mv`:            writestrategy.ErrUnsafeIdentifier,
		`DELETE FROM "Sales"."Orders"`: writestrategy.ErrUnsafeIdentifier,
		`a.b.c`:                        writestrategy.ErrUnsafeIdentifier,
		`"unterminated`:                writestrategy.ErrUnsafeIdentifier,
		`SELECT 1 AS __x`:              writestrategy.ErrUnsafeIdentifier,
		`SELECT 1 AS a; DROP TABLE mv`: nil,
		`SELECT 1 AS a, 2 AS a`:        writestrategy.ErrUnsafeIdentifier,
		`SELECT 1 AS a) r; DROP TABLE mv; SELECT (1`:                           nil,
		`WITH d AS (DELETE FROM "Sales"."Orders" RETURNING *) SELECT * FROM d`: nil,
		`SELECT $1::int AS a`: writestrategy.ErrInvalid,
	} {
		_, err := reg("bad", rel)
		require.Error(t, err, rel)
		if want != nil {
			require.ErrorIs(t, err, want, rel)
		} else {
			var qe *writestrategy.QueryError
			require.ErrorAs(t, err, &qe, rel)
		}
	}
	var n int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM "Sales"."Orders") + (SELECT count(*) FROM mv)`).Scan(&n))
	require.Equal(t, 40, n)
	_, err = w.ledger.Dataset(ctx, "bad")
	require.ErrorIs(t, err, ledger.ErrDatasetNotFound)

	// A dataset holding written contents is not turned into a relation.
	_, err = w.load(writestrategy.LoadRequest{DatasetID: "written", SQL: `SELECT 1 AS a`})
	require.NoError(t, err)
	_, err = reg("written", "mv")
	require.ErrorIs(t, err, writestrategy.ErrRelationConflict)

	// Nor is a dataset whose first write is in flight; once that write
	// has ended (here: aborted, nothing written) it can be registered.
	_, err = w.ledger.EnsureDataset(ctx, "inflight", "inflight", nil)
	require.NoError(t, err)
	in, err := w.ledger.Open(ctx, ledger.OpenParams{DatasetID: "inflight", WriterID: "w", Sink: sink.Postgres, WriteMode: facade.Replace})
	require.NoError(t, err)
	_, err = reg("inflight", "mv")
	require.ErrorIs(t, err, writestrategy.ErrRelationConflict)
	require.NoError(t, w.ledger.Abort(ctx, in, errors.New("test")))
	_, err = reg("inflight", "mv")
	require.NoError(t, err)

	// Writes to a relation are refused on either sink; nothing changes.
	for _, ice := range []bool{false, true} {
		if ice {
			w.iceberg("rel")
		}
		_, err = w.write(writestrategy.Transform{Output: "rel", Source: "written"})
		require.ErrorIs(t, err, writestrategy.ErrRelationDataset)
		_, err = w.load(writestrategy.LoadRequest{DatasetID: "rel", SQL: `SELECT 1::bigint AS id, 'x' AS name`})
		require.ErrorIs(t, err, writestrategy.ErrRelationDataset)
		require.Equal(t, int64(20), w.checksum("rel").Rows)
	}
	tx, err = w.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = writestrategy.Apply(ctx, tx, nil, writestrategy.Transform{Output: "rel", Source: "written"})
	require.ErrorIs(t, err, writestrategy.ErrRelationDataset)
	require.NoError(t, tx.Rollback(ctx))
	ds, err := w.ledger.Dataset(ctx, "rel")
	require.NoError(t, err)
	require.Equal(t, sink.Relation, ds.Sink)

	// A delta read of a relation is refused.
	_, err = w.d.Write(ctx, writestrategy.Request{WriterID: writer, Strategy: writestrategy.Transform{Output: "out", Source: "rel"},
		ReadMode: incremental.ReadDelta, Delta: map[string][]string{"rel": nil}})
	require.ErrorIs(t, err, writestrategy.ErrInvalid)

	// Columns changed under the registration: refused until registered again.
	w.exec(`CREATE VIEW v AS SELECT id FROM mv`)
	_, err = reg("rel_v", "v")
	require.NoError(t, err)
	w.exec(`DROP VIEW v`)
	w.exec(`CREATE VIEW v AS SELECT id::text AS id FROM mv`)
	_, err = w.write(writestrategy.Transform{Output: "out", Source: "rel_v"})
	require.ErrorIs(t, err, writestrategy.ErrRelationChanged)
	_, err = reg("rel_v", "v")
	require.NoError(t, err)
	w.mustWrite(writestrategy.Transform{Output: "out", Source: "rel_v"})

	// The registration commits with the caller's transaction.
	err = pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		_, err := writestrategy.RegisterRelation(ctx, tx, nil, "rel_tx", "mv")
		require.NoError(t, err)
		return context.Canceled
	})
	require.ErrorIs(t, err, context.Canceled)
	_, err = w.ledger.Dataset(ctx, "rel_tx")
	require.ErrorIs(t, err, ledger.ErrDatasetNotFound)
}
