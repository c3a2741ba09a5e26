package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Landing is what a Lookup found out about an intent's write.
type Landing struct {
	// Landed reports that the write is in the target (for Iceberg: a
	// snapshot carrying the transaction id is in the table's history).
	Landed bool
	// Outcome of the landed write (row count, snapshot id, commit time),
	// used to roll the intent forward. Ignored when Landed is false.
	Outcome Outcome
}

// Lookup answers "did the write of this intent land?". Return Landed=false
// with a nil error only when the write is provably absent; return an error
// when it cannot tell (catalog unreachable, ...): the intent is then left
// open and reported, never aborted.
type Lookup func(ctx context.Context, in Intent) (Landing, error)

// SweepParams select what Sweep reconciles.
type SweepParams struct {
	// OlderThan: only intents opened at least this long ago (database
	// clock). Must be positive: an intent younger than any writer's run time
	// may belong to a live writer.
	OlderThan time.Duration
	// DatasetID limits the sweep to one dataset (Recover sets it).
	DatasetID string
	// Limit caps the intents handled in one call. Default 100.
	Limit int
	// Lookup is required.
	Lookup Lookup
}

// Unresolved is an intent Sweep left open, and why.
type Unresolved struct {
	Intent Intent
	Err    error
}

// SweepReport lists what Sweep did.
type SweepReport struct {
	RolledForward []Intent     // write found: committed with the found outcome
	Aborted       []Intent     // write provably absent: aborted
	Unresolved    []Unresolved // lookup could not tell, or the commit failed: left open
	Skipped       []Intent     // changed by someone else while sweeping
}

// Sweep reconciles stale open intents; it never aborts blindly. For each
// open intent older than p.OlderThan it first claims the intent (bumps its
// attempt, which fences out the original writer), then asks p.Lookup:
//   - landed: the intent is committed with the found outcome (expectations
//     run as for any commit);
//   - provably absent: the intent is aborted;
//   - unknown (lookup error): the intent stays open and is reported; a later
//     sweep asks again.
func (l *Ledger) Sweep(ctx context.Context, p SweepParams) (SweepReport, error) {
	var rep SweepReport
	if p.Lookup == nil {
		return rep, invalid("Sweep: Lookup is nil")
	}
	if p.OlderThan <= 0 {
		return rep, invalid("Sweep: OlderThan must be positive")
	}
	if p.Limit <= 0 {
		p.Limit = 100
	}
	rows, err := l.db.Query(ctx, `SELECT `+txnColumns+` FROM `+l.table("pipeline_build_transactions")+`
		WHERE status = 'open' AND created_at <= now() - $1::interval
		  AND ($2 = '' OR dataset_id = $2)
		ORDER BY created_at LIMIT $3`, p.OlderThan, p.DatasetID, p.Limit)
	if err != nil {
		return rep, fmt.Errorf("ledger: sweep: %w", err)
	}
	var stale []Txn
	for rows.Next() {
		t, err := scanTxn(rows)
		if err != nil {
			rows.Close()
			return rep, fmt.Errorf("ledger: sweep: %w", err)
		}
		stale = append(stale, t)
	}
	if err := rows.Err(); err != nil {
		return rep, fmt.Errorf("ledger: sweep: %w", err)
	}
	for _, t := range stale {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		in := t.Intent()
		claimed, err := l.claim(ctx, in)
		if err != nil {
			var se *StateError
			if errors.As(err, &se) {
				rep.Skipped = append(rep.Skipped, *in)
				continue
			}
			return rep, err
		}
		landing, lerr := p.Lookup(ctx, *claimed)
		switch {
		case lerr != nil:
			rep.Unresolved = append(rep.Unresolved, Unresolved{Intent: *claimed, Err: lerr})
		case landing.Landed:
			if err := l.Commit(ctx, claimed, landing.Outcome); err != nil {
				if errors.Is(err, ErrVetoed) {
					rep.Aborted = append(rep.Aborted, *claimed)
				} else {
					rep.Unresolved = append(rep.Unresolved, Unresolved{Intent: *claimed, Err: err})
				}
				continue
			}
			rep.RolledForward = append(rep.RolledForward, *claimed)
		default:
			if err := l.Abort(ctx, claimed, errors.New("swept: the write did not land")); err != nil {
				rep.Unresolved = append(rep.Unresolved, Unresolved{Intent: *claimed, Err: err})
				continue
			}
			rep.Aborted = append(rep.Aborted, *claimed)
		}
	}
	if len(rep.RolledForward)+len(rep.Aborted)+len(rep.Unresolved) > 0 {
		l.log.InfoContext(ctx, "lakewrite sweep", "dataset_id", p.DatasetID, "rolled_forward", len(rep.RolledForward),
			"aborted", len(rep.Aborted), "unresolved", len(rep.Unresolved))
	}
	return rep, nil
}

// Recover is Sweep for one dataset: call it before opening a new intent so
// a write left open by a dead process is rolled forward or aborted instead
// of blocking the dataset.
func (l *Ledger) Recover(ctx context.Context, datasetID string, olderThan time.Duration, lookup Lookup) (SweepReport, error) {
	if datasetID == "" {
		return SweepReport{}, invalid("Recover: dataset id is empty")
	}
	return l.Sweep(ctx, SweepParams{OlderThan: olderThan, DatasetID: datasetID, Lookup: lookup})
}

// claim bumps the attempt of an open intent, fencing out its writer.
func (l *Ledger) claim(ctx context.Context, in *Intent) (*Intent, error) {
	out := *in
	err := l.db.QueryRow(ctx, `UPDATE `+l.table("pipeline_build_transactions")+`
		SET attempt = attempt + 1 WHERE id = $1 AND status = 'open' AND attempt = $2
		RETURNING attempt`, in.ID, in.Attempt).Scan(&out.Attempt)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, l.stateError(ctx, l.db, in)
		}
		return nil, fmt.Errorf("ledger: claim intent %s: %w", in.ID, err)
	}
	return &out, nil
}
