package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/internal/vocab"
)

// Dataset is a row of the datasets table.
type Dataset struct {
	ID       string
	Name     string
	Schema   json.RawMessage // declared schema; nil when none
	RowCount int64
	Status   string // "pending" until the first commit, then "active"
	// Sink is where the contents live: the sink (a sink.Sink) of the last
	// committed intent, or sink.Relation for a dataset registered over a
	// Postgres relation (never written); "" until the first commit.
	Sink vocab.Sink
	// Owner is the only writer whose intents open on the dataset; "" means
	// any writer (see ClaimDataset).
	Owner           string
	SourceWatermark time.Time // zero until the first commit
	// MaintainedAt is the commit time of the last maintenance intent; zero
	// until one commits.
	MaintainedAt time.Time
	// Maintenance is the report of the last maintenance run that passed
	// one (Outcome.Report); nil when none did.
	Maintenance json.RawMessage
}

// EnsureDataset registers a dataset if it is not registered yet; an
// existing dataset is left as it is. It returns the stored row.
func (l *Ledger) EnsureDataset(ctx context.Context, id, name string, schema json.RawMessage) (Dataset, error) {
	if strings.TrimSpace(id) == "" {
		return Dataset{}, invalid("dataset id is empty")
	}
	if schema != nil && !json.Valid(schema) {
		return Dataset{}, invalid("dataset %q: schema is not valid JSON", id)
	}
	if _, err := l.db.Exec(ctx, `INSERT INTO `+l.table("datasets")+` (id, name, schema)
		VALUES ($1, $2, $3::pg_catalog.jsonb) ON CONFLICT (id) DO NOTHING`, id, name, nullJSON(schema)); err != nil {
		return Dataset{}, fmt.Errorf("ledger: ensure dataset %q: %w", id, err)
	}
	return l.Dataset(ctx, id)
}

// Dataset returns a registered dataset, or an error matching
// ErrDatasetNotFound.
func (l *Ledger) Dataset(ctx context.Context, id string) (Dataset, error) {
	return l.scanDataset(l.db.QueryRow(ctx, l.datasetSQL(), id), id)
}

// datasetSQL reads the row of dataset $1.
func (l *Ledger) datasetSQL() string {
	return `SELECT id, name, schema, row_count, status, coalesce(sink, ''), coalesce(owner, ''),
		source_watermark, maintained_at, maintenance
		FROM ` + l.table("datasets") + ` WHERE id = $1`
}

// scanDataset scans the row of datasetSQL.
func (l *Ledger) scanDataset(row pgx.Row, id string) (Dataset, error) {
	var d Dataset
	var schema []byte
	var report []byte
	var wm, maintained *time.Time
	err := row.Scan(&d.ID, &d.Name, &schema, &d.RowCount, &d.Status, &d.Sink, &d.Owner, &wm, &maintained, &report)
	if errors.Is(err, pgx.ErrNoRows) {
		return Dataset{}, fmt.Errorf("%w: %q", ErrDatasetNotFound, id)
	}
	if err != nil {
		return Dataset{}, fmt.Errorf("ledger: dataset %q: %w", id, err)
	}
	if schema != nil {
		d.Schema = json.RawMessage(schema)
	}
	if wm != nil {
		d.SourceWatermark = *wm
	}
	if maintained != nil {
		d.MaintainedAt = *maintained
	}
	if report != nil {
		d.Maintenance = json.RawMessage(report)
	}
	return d, nil
}

// ClaimDataset makes writerID the owner of dataset id. From then on only
// that writer's intents open on it: Open returns an error matching
// ErrNotOwner to any other writer, so that two writers of the same id (a
// manual table and a pipeline output, say) cannot overwrite each other.
// Claiming an unowned dataset, or one the writer already owns, succeeds; a
// dataset owned by another writer returns an error matching ErrNotOwner,
// naming the owner. Datasets nobody claimed accept every writer. An intent
// already open when the dataset is claimed is not affected: it commits or
// aborts as usual.
func (l *Ledger) ClaimDataset(ctx context.Context, id, writerID string) error {
	if strings.TrimSpace(writerID) == "" {
		return invalid("dataset %q: writer id is empty", id)
	}
	// The owner after the claim: the writer, the other owner, or NULL
	// when the dataset does not exist.
	var owner *string
	err := l.db.QueryRow(ctx, `WITH claimed AS (
			UPDATE `+l.table("datasets")+` SET owner = $2, updated_at = now()
			WHERE id = $1 AND (owner IS NULL OR owner = $2) RETURNING owner)
		SELECT coalesce((SELECT owner FROM claimed), (SELECT owner FROM `+l.table("datasets")+` WHERE id = $1))`,
		id, writerID).Scan(&owner)
	switch {
	case err != nil:
		return fmt.Errorf("ledger: claim dataset %q: %w", id, err)
	case owner == nil:
		return fmt.Errorf("%w: %q", ErrDatasetNotFound, id)
	case *owner == writerID:
		return nil
	}
	return notOwner(id, *owner, writerID)
}

// SetDatasetOwner sets the owner of dataset id unconditionally; "" clears
// it (any writer again). It is the operator's tool for handing a dataset
// over; writers claim with ClaimDataset.
func (l *Ledger) SetDatasetOwner(ctx context.Context, id, owner string) error {
	tag, err := l.db.Exec(ctx, `UPDATE `+l.table("datasets")+` SET owner = nullif($2, ''), updated_at = now() WHERE id = $1`, id, owner)
	if err != nil {
		return fmt.Errorf("ledger: set owner of dataset %q: %w", id, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%w: %q", ErrDatasetNotFound, id)
	}
	return nil
}
