package writestrategy

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/internal/pgtest"
)

// A pipelinedTx begins with its settings in the round trip of the first
// description; it is a transaction like pgx's own in everything else:
// begun by any other statement, committed, rolled back, savepoints, large
// objects, a refused statement rolling it back at COMMIT.
func TestPipelinedTx(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	conn := pgtest.Conn(t, url)
	_, err := conn.Exec(ctx, `CREATE TABLE pt (v int)`)
	require.NoError(t, err)
	count := func() (n int) {
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pt`).Scan(&n))
		return n
	}
	newTx := func() *pipelinedTx {
		return newPipelinedTx(conn, "BEGIN", `SELECT set_config('jit', 'off', true)`)
	}

	t.Run("describe begins", func(t *testing.T) {
		tx := newTx()
		sd, err := tx.describe(ctx, `SELECT 1::bigint AS n, 'x'::text AS s`)
		require.NoError(t, err)
		require.Len(t, sd.Fields, 2)
		require.Equal(t, "n", sd.Fields[0].Name)
		require.Equal(t, byte('T'), conn.PgConn().TxStatus(), "in the transaction")
		var jit string
		require.NoError(t, tx.QueryRow(ctx, `SELECT current_setting('jit')`).Scan(&jit))
		require.Equal(t, "off", jit, "its settings applied")
		_, err = tx.Exec(ctx, `INSERT INTO pt VALUES (1)`)
		require.NoError(t, err)
		sd, err = tx.describe(ctx, `SELECT 2 AS m`) // begun: a plain description
		require.NoError(t, err)
		require.Equal(t, "m", sd.Fields[0].Name)
		require.NoError(t, tx.Commit(ctx))
		require.ErrorIs(t, tx.Commit(ctx), pgx.ErrTxClosed)
		require.ErrorIs(t, tx.Rollback(ctx), pgx.ErrTxClosed)
		require.Equal(t, 1, count())
		require.Equal(t, byte('I'), conn.PgConn().TxStatus())
	})

	t.Run("refused description", func(t *testing.T) {
		tx := newTx()
		_, err := tx.describe(ctx, `SELECT no_such_column FROM pt`)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, "42703", pgErr.Code)
		require.False(t, conn.IsClosed())
		require.NoError(t, tx.Rollback(ctx))
		require.Equal(t, byte('I'), conn.PgConn().TxStatus())
		var one int
		require.NoError(t, conn.QueryRow(ctx, `SELECT 1`).Scan(&one), "the session is usable")
	})

	t.Run("statements first", func(t *testing.T) {
		tx := newTx()
		_, err := tx.Exec(ctx, `INSERT INTO pt VALUES (2)`)
		require.NoError(t, err)
		require.Equal(t, byte('T'), conn.PgConn().TxStatus())
		require.NoError(t, tx.Rollback(ctx))
		require.Equal(t, 1, count(), "rolled back")
	})

	t.Run("never begun", func(t *testing.T) {
		tx := newTx()
		require.NoError(t, tx.Rollback(ctx))
		require.Equal(t, byte('I'), conn.PgConn().TxStatus())
		_, err := tx.Exec(ctx, `SELECT 1`)
		require.ErrorIs(t, err, pgx.ErrTxClosed)
		_, err = tx.describe(ctx, `SELECT 1`)
		require.ErrorIs(t, err, pgx.ErrTxClosed)
		require.ErrorIs(t, tx.SendBatch(ctx, &pgx.Batch{}).Close(), pgx.ErrTxClosed)
		tx = newTx()
		require.NoError(t, tx.Commit(ctx), "nothing to commit")
	})

	t.Run("savepoints", func(t *testing.T) {
		tx := newTx()
		_, err := tx.describe(ctx, `SELECT 1`)
		require.NoError(t, err)
		err = pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
			_, err := sp.Exec(ctx, `INSERT INTO pt VALUES (3)`)
			require.NoError(t, err)
			return errors.New("undo")
		})
		require.EqualError(t, err, "undo")
		require.NoError(t, pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
			_, err := sp.Exec(ctx, `INSERT INTO pt VALUES (4)`)
			return err
		}))
		require.NoError(t, tx.Commit(ctx))
		var vs []int
		rows, err := conn.Query(ctx, `SELECT v FROM pt ORDER BY v`)
		require.NoError(t, err)
		vs, err = pgx.CollectRows(rows, pgx.RowTo[int])
		require.NoError(t, err)
		require.Equal(t, []int{1, 4}, vs)
	})

	t.Run("refused statement", func(t *testing.T) {
		tx := newTx()
		_, err := tx.describe(ctx, `SELECT 1`)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `INSERT INTO pt VALUES (1/0)`)
		require.Error(t, err)
		require.ErrorIs(t, tx.Commit(ctx), pgx.ErrTxCommitRollback)
		require.Equal(t, byte('I'), conn.PgConn().TxStatus())
	})

	t.Run("batch and large objects", func(t *testing.T) {
		tx := newTx()
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO pt VALUES (5)`)
		b.Queue(`INSERT INTO pt VALUES (6)`)
		require.NoError(t, tx.SendBatch(ctx, b).Close())
		lo := tx.LargeObjects()
		oid, err := lo.Create(ctx, 0)
		require.NoError(t, err)
		obj, err := lo.Open(ctx, oid, pgx.LargeObjectModeWrite)
		require.NoError(t, err)
		_, err = obj.Write([]byte("hello"))
		require.NoError(t, err)
		require.NoError(t, obj.Close())
		require.NoError(t, tx.Rollback(ctx))
		require.Equal(t, 2, count(), "the batch rolled back")
		var n int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_largeobject_metadata WHERE oid = $1`, oid).Scan(&n))
		require.Zero(t, n, "the large object too")
	})

	t.Run("broken session", func(t *testing.T) {
		other := pgtest.Conn(t, url)
		broken, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		t.Cleanup(func() { _ = broken.Close(context.Background()) })
		_, err = other.Exec(ctx, `SELECT pg_terminate_backend($1)`, broken.PgConn().PID())
		require.NoError(t, err)
		tx := newPipelinedTx(broken, "BEGIN")
		_, err = tx.describe(ctx, `SELECT 1`)
		require.Error(t, err)
		require.True(t, broken.IsClosed(), "closed, not given back")
		require.NoError(t, tx.Rollback(ctx), "not begun: nothing to roll back")
	})
}
