package ledger

import (
	"context"
	"fmt"
	"time"
)

// Committed returns the committed intents of a dataset whose committed_at
// lies in the window (low, high], ordered by committed_at then id. A zero
// low means "from the beginning". Maintenance intents carry no data and are
// left out.
//
// Taken alone this can skip a transaction that commits later with an
// earlier committed_at; the incremental package bounds high so that does not
// happen.
func (l *Ledger) Committed(ctx context.Context, datasetID string, low, high time.Time) ([]Txn, error) {
	if datasetID == "" {
		return nil, invalid("Committed: dataset id is empty")
	}
	if !low.IsZero() && high.Before(low) {
		return nil, invalid("Committed: window high %s is before low %s", high, low)
	}
	var lowArg any
	if !low.IsZero() {
		lowArg = low
	}
	rows, err := l.db.Query(ctx, `SELECT `+txnColumns+` FROM `+l.table("pipeline_build_transactions")+`
		WHERE dataset_id = $1 AND status = 'committed' AND write_mode <> 'maintenance'
		  AND ($2::pg_catalog.timestamptz IS NULL OR committed_at > $2) AND committed_at <= $3
		ORDER BY committed_at, id`, datasetID, lowArg, high)
	if err != nil {
		return nil, fmt.Errorf("ledger: committed window: %w", err)
	}
	defer rows.Close()
	var out []Txn
	for rows.Next() {
		t, err := scanTxn(rows)
		if err != nil {
			return nil, fmt.Errorf("ledger: committed window: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: committed window: %w", err)
	}
	return out, nil
}

// OldestOpen returns the created_at (database clock) of the dataset's open
// intent, if there is one. An open maintenance intent carries no data and
// does not count.
func (l *Ledger) OldestOpen(ctx context.Context, datasetID string) (time.Time, bool, error) {
	var t *time.Time
	err := l.db.QueryRow(ctx, `SELECT min(created_at) FROM `+l.table("pipeline_build_transactions")+`
		WHERE dataset_id = $1 AND status = 'open' AND write_mode <> 'maintenance'`, datasetID).Scan(&t)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("ledger: oldest open intent: %w", err)
	}
	if t == nil {
		return time.Time{}, false, nil
	}
	return *t, true, nil
}

// Now returns the database clock.
func (l *Ledger) Now(ctx context.Context) (time.Time, error) {
	var t time.Time
	if err := l.db.QueryRow(ctx, `SELECT now()`).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("ledger: now: %w", err)
	}
	return t, nil
}
