package facade

// Names the external tests use.
const DefaultCompactMinFiles = defaultCompactMinFiles
const DefaultMetadataVersions = defaultMetadataVersions
const TablePropExpired = tablePropExpired
