package writestrategy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
)

// CommitStaged makes a staged lakehouse write visible under the ledger
// intent in, in the order that keeps a veto invisible: the ledger's
// expectations are asked with the staged outcome (ledger.Check: row count,
// the write's stamp time, schema), a veto deletes the staged files and is
// returned (matching ledger.ErrVetoed), and only then is the snapshot
// committed. A replayed append (Info().Replay set) is already visible and
// is committed without asking.
//
// It does not commit the intent: the caller does, with the outcome
// CommitOutcome makes of the commit result and schema (ledger.Commit, or
// the outcome returned to ledger.With), and maps
// facade.ErrCommitStateUnknown to ledger.ErrOutcomeUnknown. The Dispatcher
// and the manual-table example use it; so can any writer that composes
// facade and ledger itself. A writer that dies between the snapshot
// commit and its ledger commit leaves the intent open; Dispatcher.Lookup
// (the next Dispatcher write of the dataset, or ledger.Recover with it)
// rolls it forward with the same row count, snapshot id, committed-at and
// watermark, and the declared schema the landed table schema gives (see
// Dispatcher.Lookup).
func CommitStaged(ctx context.Context, l *ledger.Ledger, in *ledger.Intent, staged facade.Staged, schema json.RawMessage) (facade.CommitResult, error) {
	if err := checkStaged(ctx, l, in, staged, schema); err != nil {
		return facade.CommitResult{}, errors.Join(err, abortStaged(ctx, staged))
	}
	return staged.Commit(ctx)
}

// checkStaged asks the ledger's expectations about a staged write's
// outcome; a replay is already visible and not asked about.
func checkStaged(ctx context.Context, l *ledger.Ledger, in *ledger.Intent, staged facade.Staged, schema json.RawMessage) error {
	info := staged.Info()
	if info.Replay != nil {
		return nil
	}
	return l.Check(ctx, in, ledger.Outcome{RowCount: info.Rows, CommittedAt: info.CreatedAt, Schema: schema})
}

// abortStaged deletes a staged write's files, also after the caller's
// context ended.
func abortStaged(ctx context.Context, staged facade.Staged) error {
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	return staged.Abort(cctx)
}

// Lookup is the dispatcher's ledger.Lookup: an open Postgres intent of a
// dead process provably did not land (the row store write and the ledger
// commit share one transaction); an Iceberg intent landed when a snapshot
// carrying its transaction id is in the table's history, and is rolled
// forward with what a normal commit records: the snapshot's row count, id
// and commit time (the watermark), and the declared schema. A Dispatcher
// write records its declared schema in the snapshot summary; for a write
// composed otherwise (facade.Stage and CommitStaged) the schema is the
// landed table's business columns with the Postgres types the table
// recorded (built-in types by name, numeric with the Iceberg decimal's
// precision and scale, a varchar without its length, any other type as
// the type a load of its Arrow type stores: text for an enum).
func (d *Dispatcher) Lookup(ctx context.Context, in ledger.Intent) (ledger.Landing, error) {
	if in.Sink != sink.Iceberg {
		return ledger.Landing{}, nil
	}
	if d.cfg.Lakehouse == nil {
		return ledger.Landing{}, fmt.Errorf("%w: cannot look up intent %s: no Lakehouse configured", ErrInvalid, in.ID)
	}
	res, found, err := d.cfg.Lakehouse.FindTxn(ctx, in.DatasetID, in.ID)
	if err != nil || !found {
		return ledger.Landing{}, err
	}
	// A roll-forward stamps what a normal commit stamps: row count,
	// snapshot id, committed-at (and so the watermark) and the declared
	// schema, all read back from the landed snapshot, whoever composed
	// the write: the schema a Dispatcher recorded in the summary, else
	// (CommitStaged, or any writer staging through the facade itself) the
	// one the snapshot's table schema gives (CommitOutcome). A maintenance
	// commit records no schema.
	o := CommitOutcome(res, declaredSchema(res.Summary))
	if in.WriteMode == ledger.Maintenance {
		o.Schema = nil
	}
	return ledger.Landing{Landed: true, Outcome: o}, nil
}

// summarySchemaKey is the request metadata key under which the Iceberg arm
// records the output's declared schema in the snapshot summary (as
// facade.SummaryMetaPrefix + summarySchemaKey), so that a write rolled
// forward after a crash stamps the same dataset schema as a normal commit.
const summarySchemaKey = "lakewrite-declared-schema"

func withDeclaredSchema(meta map[string]string, cols Schema) map[string]string {
	out := make(map[string]string, len(meta)+1)
	maps.Copy(out, meta)
	out[summarySchemaKey] = string(cols.JSON())
	return out
}

func declaredSchema(summary map[string]string) json.RawMessage {
	raw, ok := summary[facade.SummaryMetaPrefix+summarySchemaKey]
	if !ok {
		return nil
	}
	if _, err := ParseSchema(json.RawMessage(raw)); err != nil {
		return nil
	}
	return json.RawMessage(raw)
}
