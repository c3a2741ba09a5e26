package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Dataset is a row of the datasets table.
type Dataset struct {
	ID       string
	Name     string
	Schema   json.RawMessage // declared schema; nil when none
	RowCount int64
	Status   string // "pending" until the first commit, then "active"
	// Sink is where the contents live: the sink of the last committed intent
	// ("pg", "iceberg_native"); "" until the first commit.
	Sink            string
	SourceWatermark time.Time // zero until the first commit
	CreatedAt       time.Time
	UpdatedAt       time.Time
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
		VALUES ($1, $2, $3::jsonb) ON CONFLICT (id) DO NOTHING`, id, name, nullJSON(schema)); err != nil {
		return Dataset{}, fmt.Errorf("ledger: ensure dataset %q: %w", id, err)
	}
	return l.Dataset(ctx, id)
}

// Dataset returns a registered dataset, or an error matching
// ErrDatasetNotFound.
func (l *Ledger) Dataset(ctx context.Context, id string) (Dataset, error) {
	var d Dataset
	var schema []byte
	var wm *time.Time
	err := l.db.QueryRow(ctx, `SELECT id, name, schema, row_count, status, coalesce(sink, ''), source_watermark, created_at, updated_at
		FROM `+l.table("datasets")+` WHERE id = $1`, id).
		Scan(&d.ID, &d.Name, &schema, &d.RowCount, &d.Status, &d.Sink, &wm, &d.CreatedAt, &d.UpdatedAt)
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
	return d, nil
}
