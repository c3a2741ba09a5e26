// Package identity is the schema planning and identity stamping shared by
// the facade's Iceberg backend and its in-memory double (facadetest): the
// mapping of request columns to Iceberg types, the schema change a write
// makes under a SchemaPolicy, the row hash behind __row_id and the
// checksum, the numbering of equal rows behind __row_id, and the stamper that converts request batches to the table
// schema and stamps the identity columns. Package facade re-exports the
// names users see: the identity column names, the sentinel errors, the
// error types (as aliases); its Checksum and SchemaPolicy are struct
// types of the same fields, converted at the boundary. CommitError builds
// the failed-commit errors of both backends. Nothing else here is public
// API.
package identity
