package facade

import (
	"context"
	"time"
)

// Names the external tests use.
const DefaultCompactMinFiles = defaultCompactMinFiles
const DefaultMetadataVersions = defaultMetadataVersions
const TablePropExpired = tablePropExpired

// PropertyRowIDVersion is the table property recording a table's row id
// version.
const PropertyRowIDVersion = propertyRowIDVersion
const SummaryNextRowIndex = summaryNextRowIndex
const TablePropOrphansCheckedAt = tablePropOrphansCheckedAt

// MaintainWith runs policy on the dataset once, as Maintain runs the
// configured one.
func (f *Facade) MaintainWith(ctx context.Context, datasetID string, policy Lifecycle) (MaintenanceReport, error) {
	return f.maintainWith(ctx, datasetID, policy)
}

// SetNow sets the clock of c (stamped into __created_at, read by the
// lifecycle).
func SetNow(c *Config, now func() time.Time) { c.now = now }

// SetNamespace sets the namespace of c's default naming.
func SetNamespace(c *Config, ns []string) { c.namespace = ns }
