package writestrategy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/facadetest"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// A temporary table is also a type of its name, and the session's
// temporary schema is searched before pg_catalog for type names: on
// sessions with temporary tables named like built-in types, the statements
// the library sends mean what they do elsewhere. Writes on every row-store
// path, the ledger's intents (committed, aborted, withdrawn, swept, read)
// and the writer flags all work there.
func TestTypeNamesShadowedByTempTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		for _, name := range []string{"text", "int8", "int4", "int2", "oid", "bool", "uuid", "jsonb", "timestamptz"} {
			if _, err := c.Exec(ctx, `CREATE TEMP TABLE `+name+` (x int)`); err != nil {
				return err
			}
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	plain, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(plain.Close)
	var shadowed bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT pg_catalog.to_regtype('text')::pg_catalog.oid <> 25`).Scan(&shadowed))
	require.True(t, shadowed, "a bare text is the temporary table's type")

	w := wireWorld(t, pool, facadetest.New(nil), nil, nil)
	l, flags := w.ledger, w.flags

	// Columns of types whose names are SQL keywords: a column's declared
	// type is a plain name, and text is not visible on these sessions.
	cols := writestrategy.Schema{Columns: []writestrategy.Column{{Name: "o", Type: "integer"}, {Name: "x", Type: "character varying"}}}
	seedRowStore(t, pool, "src", cols, `SELECT g AS o, ('v' || g)::varchar AS x FROM generate_series(1, 3) g`)
	ensureOutputs(t, pool, "rep", "m", "u", "app", "snap")
	require.NoError(t, flags.SetOverride(ctx, writer, sink.Postgres, "rep"))
	n, err := flags.ClearOverride(ctx, writer, "rep")
	require.NoError(t, err)
	require.Equal(t, 1, n)

	var last writestrategy.WriteResult
	for _, s := range []writestrategy.WriteStrategy{
		writestrategy.Transform{Output: "rep", Source: "src"},
		writestrategy.Transform{Output: "rep", Source: "src"}, // described before
		writestrategy.Split{Source: "src", Predicate: "o < 10", Matched: "m", Unmatched: "u"},
		writestrategy.Deploy{Mode: writestrategy.KindAppendAlways, Source: "src", Target: "app"},
		writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "src", Target: "snap", Key: []string{"o"}},
		writestrategy.Deploy{Mode: writestrategy.KindSnapshotReplace, Source: "src", Target: "snap", Key: []string{"o"}}, // preserving
	} {
		rs := w.mustWrite(s)
		last = rs[len(rs)-1]
		require.Equal(t, sink.Postgres, last.Sink)
	}
	require.EqualValues(t, 3, last.Preserved)
	want := []string{`{"o": 1, "x": "v1"}`, `{"o": 2, "x": "v2"}`, `{"o": 3, "x": "v3"}`}
	for _, id := range []string{"rep", "m", "app", "snap"} {
		require.Equal(t, want, rowStoreRows(t, plain, id), id)
	}
	txn, err := l.Get(ctx, last.TxnID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusCommitted, txn.Status)
	now, err := l.Now(ctx)
	require.NoError(t, err)
	committed, err := l.Committed(ctx, "rep", time.Time{}, now)
	require.NoError(t, err)
	require.Len(t, committed, 2)

	open := func() *ledger.Intent {
		in, err := l.Open(ctx, ledger.OpenParams{DatasetID: "rep", WriterID: writer, Sink: "pg", WriteMode: facade.Replace})
		require.NoError(t, err)
		return in
	}
	in := open()
	require.NoError(t, l.Withdraw(ctx, in))
	_, err = l.Get(ctx, in.ID)
	require.ErrorIs(t, err, ledger.ErrIntentNotFound)
	in = open()
	require.NoError(t, l.Abort(ctx, in, errors.New("given up")))
	txn, err = l.Get(ctx, in.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusAborted, txn.Status)
	in = open()
	in.Release() // left open, its writer gone
	absent := func(context.Context, ledger.Intent) (ledger.Landing, error) { return ledger.Landing{}, nil }
	rep, err := l.Sweep(ctx, ledger.SweepParams{Lookup: absent})
	require.NoError(t, err)
	require.Len(t, rep.Aborted, 1)

	// Not supported there: a dataset declaring a column of a built-in type
	// without a keyword name (text, uuid, jsonb, ...). Its declared type is
	// a bare name, which on these sessions names the temporary table's row
	// type. The write fails with the server's error and writes nothing.
	seedRowStore(t, plain, "src_text", writestrategy.Schema{Columns: []writestrategy.Column{{Name: "o", Type: "integer"}, {Name: "x", Type: "text"}}},
		`SELECT g AS o, 'v' || g AS x FROM generate_series(1, 3) g`)
	ensureOutputs(t, pool, "rep_text")
	_, err = w.write(writestrategy.Transform{Output: "rep_text", Source: "src_text"})
	var qe *writestrategy.QueryError
	require.ErrorAs(t, err, &qe)
	require.Empty(t, rowStoreRows(t, plain, "rep_text"))
	txns, err := l.Committed(ctx, "rep_text", time.Time{}, now.Add(time.Hour))
	require.NoError(t, err)
	require.Empty(t, txns)
}
