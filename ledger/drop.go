package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// StatusDropped is the datasets.status of a dataset being decommissioned
// (MarkDropped): no intent opens on it (Open returns ErrDatasetDropped)
// until DeleteDropped removes its rows; a write may then register it again.
const StatusDropped = "dropped"

// ErrDatasetDropped: the dataset is marked dropped and being decommissioned;
// no write opens on it. Finish the drop (writestrategy's Dispatcher.Drop
// completes an interrupted one), then register the dataset again to write it.
var ErrDatasetDropped = errors.New("ledger: dataset dropped")

// dropBusyError refuses to drop a dataset with an open intent. It matches
// ErrBusy; its message names the dataset and the intent.
type dropBusyError struct {
	holderID string // the open intent

	datasetID string
}

func (e *dropBusyError) Error() string {
	return fmt.Sprintf("ledger: dataset %q has open intent %s: not dropped (let the write finish, or reconcile it, then drop again)", e.datasetID, e.holderID)
}

func (e *dropBusyError) Is(target error) bool { return target == ErrBusy }

// MarkDropped marks dataset id dropped, the first step of decommissioning
// it: from its commit on, Open refuses the dataset with ErrDatasetDropped.
// The dataset's row is locked for the check, so an intent being opened
// either commits first (and the drop is refused with an error matching ErrBusy) or
// sees the mark. A dataset marked already stays marked (the drop is being
// completed). It returns the dataset's row as it was before the mark.
func (l *Ledger) MarkDropped(ctx context.Context, id string) (Dataset, error) {
	if strings.TrimSpace(id) == "" {
		return Dataset{}, invalid("dataset id is empty")
	}
	var ds Dataset
	err := pgx.BeginFunc(ctx, l.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM `+l.table("datasets")+` WHERE id = $1 FOR UPDATE`, id); err != nil {
			return err
		}
		var err error
		if ds, err = l.scanDataset(tx.QueryRow(ctx, l.datasetSQL(), id), id); err != nil {
			return err
		}
		if err := l.refuseOpen(ctx, tx, id); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE `+l.table("datasets")+` SET status = $2, updated_at = now() WHERE id = $1`, id, StatusDropped)
		return err
	})
	if err != nil {
		return Dataset{}, l.dropErr("mark dataset dropped", id, err)
	}
	return ds, nil
}

// DeleteDropped deletes the control-plane rows of a dataset marked dropped,
// the last step of decommissioning it: its datasets row, and with it (ON
// DELETE CASCADE) its intents, its row-store rows and its writer flag
// overrides. A dataset not registered (deleted already) is not an error; one
// not marked dropped is refused with ErrInvalidArgument, and one with an open
// intent with an error matching ErrBusy.
func (l *Ledger) DeleteDropped(ctx context.Context, id string) error {
	err := pgx.BeginFunc(ctx, l.db, func(tx pgx.Tx) error {
		var status string
		err := tx.QueryRow(ctx, `SELECT status FROM `+l.table("datasets")+` WHERE id = $1 FOR UPDATE`, id).Scan(&status)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if status != StatusDropped {
			return invalid("dataset %q is not marked dropped (status %q): MarkDropped first", id, status)
		}
		if err := l.refuseOpen(ctx, tx, id); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM `+l.table("datasets")+` WHERE id = $1`, id)
		return err
	})
	return l.dropErr("delete dropped dataset", id, err)
}

func (l *Ledger) refuseOpen(ctx context.Context, tx pgx.Tx, id string) error {
	var holder string
	err := tx.QueryRow(ctx, `SELECT id::pg_catalog.text FROM `+l.table("pipeline_build_transactions")+`
		WHERE dataset_id = $1 AND status = 'open' LIMIT 1`, id).Scan(&holder)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return &dropBusyError{datasetID: id, holderID: holder}
}

func (l *Ledger) dropErr(op, id string, err error) error {
	var busy *dropBusyError
	if err == nil || errors.As(err, &busy) || errors.Is(err, ErrDatasetNotFound) || errors.Is(err, ErrInvalid) {
		return err
	}
	return fmt.Errorf("ledger: %s %q: %w", op, id, err)
}

// OpenIntent is an open intent as an operator sees it (OpenIntents).
type OpenIntent struct {
	Txn
	// Age is how long ago it was opened, by the database clock.
	Age time.Duration
	// Liveness reports that the intent carries a session lock or a lease,
	// so that its holder's death is observable.
	Liveness bool
	// HolderAlive reports that its holder's session lock is held, or its
	// lease has not lapsed: the writer is alive (false without liveness:
	// unknown, judged by Age).
	HolderAlive bool
}

// OpenIntents lists every open intent, oldest first, with its age and its
// holder's liveness.
func (l *Ledger) OpenIntents(ctx context.Context) ([]OpenIntent, error) {
	rows, err := l.db.Query(ctx, `SELECT `+txnColumns+`, lock_key IS NOT NULL OR lease_until IS NOT NULL, `+liveSQL+`,
		extract(epoch FROM now() - created_at)::pg_catalog.float8
		FROM `+l.table("pipeline_build_transactions")+` WHERE status = 'open' ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("ledger: list open intents: %w", err)
	}
	defer rows.Close()
	var out []OpenIntent
	for rows.Next() {
		var o OpenIntent
		var age float64
		t, err := scanTxn(rows, &o.Liveness, &o.HolderAlive, &age)
		if err != nil {
			return nil, fmt.Errorf("ledger: list open intents: %w", err)
		}
		o.Txn, o.Age = t, time.Duration(age*float64(time.Second))
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: list open intents: %w", err)
	}
	return out, nil
}
