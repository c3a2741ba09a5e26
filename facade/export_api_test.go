package facade

import "time"

// Names the external tests use.
const DefaultCompactMinFiles = defaultCompactMinFiles
const DefaultMetadataVersions = defaultMetadataVersions
const TablePropExpired = tablePropExpired

// PropertyRowIDVersion is the table property recording a table's row id
// version.
const PropertyRowIDVersion = propertyRowIDVersion
const SummaryNextRowIndex = summaryNextRowIndex
const TablePropOrphansCheckedAt = tablePropOrphansCheckedAt

// SetNow sets the clock of c (stamped into __created_at, read by the
// lifecycle).
func SetNow(c *Config, now func() time.Time) { c.now = now }

// SetNamespace sets the namespace of c's default naming.
func SetNamespace(c *Config, ns []string) { c.namespace = ns }
