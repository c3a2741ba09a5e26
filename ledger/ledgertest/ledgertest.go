package ledgertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/ledger"
)

// timeout bounds every database call a helper makes.
const timeout = time.Minute

func bounded() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), timeout)
}

// migrate applies the control-plane migrations to schema of db ("" means
// the default, "lakewrite"). It is idempotent.
func migrate(t testing.TB, db ledger.DB, schema string) {
	t.Helper()
	ctx, cancel := bounded()
	defer cancel()
	if _, err := ledger.Migrate(ctx, db, schema); err != nil {
		t.Fatalf("ledgertest: migrate: %v", err)
	}
}

// NewLedger migrates cfg.Schema on db and returns a Ledger with cfg; a nil
// cfg means the default configuration and the default schema.
func NewLedger(t testing.TB, db ledger.DB, cfg *ledger.Config) *ledger.Ledger {
	t.Helper()
	var schema string
	if cfg != nil {
		schema = cfg.Schema
	}
	migrate(t, db, schema)
	l, err := ledger.New(db, cfg)
	if err != nil {
		t.Fatalf("ledgertest: new ledger: %v", err)
	}
	return l
}

// NewSchema creates a migrated control-plane schema with a fresh name
// ("lwtest_" and random hex) in db and drops it (CASCADE) when the test
// ends, so parallel tests can share one database. Pass the name to
// ledger.Config.Schema, sink.FlagsConfig.Schema and the like. db must still
// be usable at cleanup: create the pool before calling NewSchema (cleanups
// run last-registered first).
func NewSchema(t testing.TB, db ledger.DB) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "lwtest_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := bounded()
		defer cancel()
		if _, err := db.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{name}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("ledgertest: drop schema %s: %v", name, err)
		}
	})
	migrate(t, db, name)
	return name
}

// Txns returns every intent of the dataset, in any state, oldest first.
// db must be the database of l.
func Txns(t testing.TB, db ledger.DB, l *ledger.Ledger, datasetID string) []ledger.Txn {
	t.Helper()
	ctx, cancel := bounded()
	defer cancel()
	table := pgx.Identifier{l.Schema(), "pipeline_build_transactions"}.Sanitize()
	rows, err := db.Query(ctx, `SELECT id::pg_catalog.text FROM `+table+` WHERE dataset_id = $1 ORDER BY created_at, id`, datasetID)
	if err != nil {
		t.Fatalf("ledgertest: list intents of %q: %v", datasetID, err)
		return nil
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("ledgertest: list intents of %q: %v", datasetID, err)
		return nil
	}
	out := make([]ledger.Txn, 0, len(ids))
	for _, id := range ids {
		txn, err := l.Get(ctx, id)
		if err != nil {
			t.Fatalf("ledgertest: get intent %s: %v", id, err)
			return nil
		}
		out = append(out, txn)
	}
	return out
}

// LastTxn returns the dataset's most recent intent, in any state; it fails
// the test when the dataset has none. Use it to find the intent of a write
// that returned an error (and so no transaction id).
func LastTxn(t testing.TB, db ledger.DB, l *ledger.Ledger, datasetID string) ledger.Txn {
	t.Helper()
	txns := Txns(t, db, l, datasetID)
	if len(txns) == 0 {
		t.Fatalf("ledgertest: dataset %q has no intent", datasetID)
		return ledger.Txn{}
	}
	return txns[len(txns)-1]
}
